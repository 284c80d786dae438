"""A `basra-rules serve` process on a free loopback port, for the load tests."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

REPO = Path(__file__).resolve().parents[2]
GHZ_DIR = REPO / "deploy" / "ghz"
STARTUP_SECONDS = 30.0
STOP_SECONDS = 15.0


def basra_rules_command() -> list[str]:
    """Return the console command of the installed service (the venv's, when it has one)."""
    beside = Path(sys.executable).with_name("basra-rules")
    if beside.exists():
        return [str(beside)]
    found = shutil.which("basra-rules")
    if found is None:
        raise RuntimeError("the basra-rules console command is not installed")
    return [found]


def free_port() -> int:
    """Return a loopback TCP port that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass(frozen=True)
class RunningServer:
    """A started server process and its address."""

    process: subprocess.Popen[bytes]
    address: str


def wait_serving(address: str, process: subprocess.Popen[bytes], seconds: float) -> bool:
    """Poll health until SERVING; False if the process ended or time ran out."""
    give_up = time.monotonic() + seconds
    with grpc.insecure_channel(address) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        while time.monotonic() < give_up and process.poll() is None:
            try:
                reply = stub.Check(health_pb2.HealthCheckRequest(service=""), timeout=1.0)
                if reply.status == health_pb2.HealthCheckResponse.SERVING:
                    return True
            except grpc.RpcError:
                pass
            time.sleep(0.1)
    return False


def stop(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM the server and wait for it; SIGKILL if it outlives the wait."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(STOP_SECONDS)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(STOP_SECONDS)


@contextmanager
def running_server(tmp: Path, extra: Sequence[str] = ()) -> Iterator[RunningServer]:
    """Run `basra-rules serve` on a free loopback port until the block ends."""
    last_error = ""
    # A port found free can be taken before the server binds it: try a few.
    for _ in range(3):
        port = free_port()
        args = [
            *basra_rules_command(),
            "serve",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--metrics-port",
            "0",
            "--log-level",
            "warning",
            "--metrics-dir",
            str(tmp),
            *extra,
        ]
        log = tmp / f"server-{port}.log"
        with log.open("wb") as sink:
            process = subprocess.Popen(
                args, stdout=sink, stderr=subprocess.STDOUT, cwd=REPO, env=dict(os.environ)
            )
        address = f"127.0.0.1:{port}"
        try:
            if wait_serving(address, process, STARTUP_SECONDS):
                yield RunningServer(process, address)
                return
            last_error = log.read_text(errors="replace")[-2000:]
        finally:
            stop(process)
    raise RuntimeError(f"the server did not become SERVING:\n{last_error}")
