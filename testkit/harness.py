"""`basra-rules serve` as a child process on loopback: the one way tests, benchmarks and the
soak start the server.

The server binds a port of its own choosing (--port 0) and says which in its "serving" log
line, which is read back here, so no other process can take the port in between. Where a
port number is needed before the start (metrics on, or a log level that hides the "serving"
line), testkit.ports holds it until the server has bound it. The JSON log lines are collected
as they come. Worker processes and their memory are read from /proc, so no extra package is
needed.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from clients import channels
from testkit.ports import LOOPBACK, reserved_port

START_SECONDS = 60.0
# Log levels at which the supervisor's "serving" line (an info line) is not written.
QUIET_LEVELS = ("warning", "error")


def command() -> list[str]:
    """The `basra-rules` console command of this environment (or its module form)."""
    script = Path(sys.executable).parent / "basra-rules"
    return [str(script)] if script.exists() else [sys.executable, "-m", "clients.cli"]


def serve_command(
    *flags: str, port: int = 0, metrics_port: int = 0, program: Sequence[str] | None = None
) -> list[str]:
    """Return the command line of `basra-rules serve` on loopback at these ports, then `flags`."""
    return [
        *(program or command()),
        "serve",
        "--host",
        LOOPBACK,
        "--port",
        str(port),
        "--metrics-port",
        str(metrics_port),
        *flags,
    ]


@contextmanager
def taken_port() -> Iterator[int]:
    """Hold a loopback port that someone listens on (a port a server must fail to have)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as holder:
        holder.bind((LOOPBACK, 0))
        holder.listen()
        yield int(holder.getsockname()[1])


def children(pid: int) -> list[int]:
    """Return the pids whose parent is `pid`, read from /proc."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        # Fields after the command name (which may hold spaces) start after its last ")".
        fields = stat[stat.rindex(")") + 2 :].split()
        if int(fields[1]) == pid:
            found.append(int(entry))
    return sorted(found)


def cmdline(pid: int) -> str:
    """Return the command line of a process ("" when it is gone)."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def rss_kib(pid: int) -> int | None:
    """Return the resident set size of a process in KiB (None when it is gone)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    for line in status.splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return None


def worker_pids(supervisor: int) -> list[int]:
    """Return the live worker processes of a supervisor (spawned children, not helpers)."""
    return [p for p in children(supervisor) if "spawn_main" in cmdline(p)]


@dataclass
class ServedProcess:
    """A running `basra-rules serve` child: its process, its port and its log so far."""

    process: subprocess.Popen[str]
    port: int = 0
    metrics_port: int | None = None
    """The /metrics port (None: metrics off)."""
    health_port: int | None = None
    """The health port (None: off)."""
    raw: list[str] = field(default_factory=list)
    lines: list[dict[str, Any]] = field(default_factory=list)
    arrived: threading.Condition = field(default_factory=threading.Condition)
    keep_calls: bool = True
    """Whether to keep the per-call "rpc" lines (a long soak drops them to save memory)."""
    reader: threading.Thread | None = None

    @property
    def target(self) -> str:
        """The address clients dial."""
        return f"{LOOPBACK}:{self.port}"

    @property
    def health_target(self) -> str:
        """The address probes dial: the health port."""
        assert self.health_port is not None, "started without health=True"
        return f"{LOOPBACK}:{self.health_port}"

    @property
    def pid(self) -> int:
        """The supervisor's pid."""
        return self.process.pid

    def workers(self) -> list[int]:
        """The live worker pids."""
        return worker_pids(self.pid)

    def ready_workers(self) -> list[int]:
        """The live worker pids that have started serving (per the supervisor's log)."""
        with self.arrived:
            ready = {pid for line in self.find("serving") for pid in line.get("pids", [])}
            ready |= {line["pid"] for line in self.find("worker replaced")}
        return [pid for pid in self.workers() if pid in ready]

    def log_lines(self) -> list[dict[str, Any]]:
        """Every log line so far, parsed."""
        with self.arrived:
            return list(self.lines)

    def log_text(self) -> str:
        """Everything the server printed so far."""
        with self.arrived:
            return "".join(self.raw)

    def find(self, event: str, **match: Any) -> list[dict[str, Any]]:
        """Every log line so far with this event and these field values."""
        with self.arrived:
            return [
                line
                for line in self.lines
                if line.get("event") == event and all(line.get(k) == v for k, v in match.items())
            ]

    def wait_for(
        self, event: str, timeout: float = 30.0, count: int = 1, **match: Any
    ) -> dict[str, Any]:
        """Wait until `count` log lines with this event (and fields) have come; return the last."""
        deadline = time.monotonic() + timeout
        with self.arrived:
            while True:
                found = self.find(event, **match)
                if len(found) >= count:
                    return found[count - 1]
                remaining = deadline - time.monotonic()
                if remaining <= 0 or self.process.poll() is not None:
                    tail = "".join(self.raw[-5:])
                    raise TimeoutError(f"no {event!r} log line within {timeout} s; last: {tail}")
                self.arrived.wait(min(remaining, 0.5))

    def wait(self, timeout: float = 30.0) -> int:
        """Wait for the exit and for the log to be read to its end; return the exit code."""
        code = self.process.wait(timeout)
        if self.reader is not None:
            self.reader.join(timeout)
        return code

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM, then wait; kill past the timeout. Return the exit code."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            return self.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return self.wait(10)

    def kill(self) -> None:
        """Stop at once (the cleanup after a failed test)."""
        if self.process.poll() is None:
            self.process.kill()
        self.wait(10)

    def _read(self) -> None:
        stream = self.process.stdout
        assert stream is not None
        for text in stream:
            try:
                parsed = json.loads(text)
            except json.JSONDecodeError:
                parsed = {"event": "<not json>", "text": text.rstrip()}
            if not isinstance(parsed, dict):
                parsed = {"value": parsed}
            if not self.keep_calls and parsed.get("event") == "rpc":
                continue
            with self.arrived:
                self.raw.append(text)
                self.lines.append(parsed)
                self.arrived.notify_all()


def wait_healthy(target: str, process: subprocess.Popen[str], timeout: float) -> None:
    """Wait until the gRPC health check at `target` answers SERVING, while `process` runs."""
    deadline = time.monotonic() + timeout
    with channels.channel(target) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        while process.poll() is None and time.monotonic() < deadline:
            try:
                reply = stub.Check(health_pb2.HealthCheckRequest(), timeout=1.0)
                if reply.status == health_pb2.HealthCheckResponse.SERVING:
                    return
            except grpc.RpcError:
                pass
            time.sleep(0.05)
    raise TimeoutError(f"no SERVING health answer at {target} within {timeout} s")


def start(
    flags: Sequence[str] = (),
    *,
    env: Mapping[str, str] | None = None,
    inherit_env: bool = True,
    cwd: str | Path | None = None,
    log_level: str = "info",
    metrics: bool = False,
    health: bool = False,
    keep_calls: bool = True,
    program: Sequence[str] | None = None,
) -> ServedProcess:
    """Start `basra-rules serve` on loopback with JSON logs and the given flags; wait for it.

    `program` replaces this environment's `basra-rules` command (an older tree's
    `python -m clients.cli`, run from its own `cwd`, for a before-and-after benchmark). `env`
    is added to this process's environment (to nothing but `env` when `inherit_env` is false).
    With `metrics`, /metrics is served on a port held free until the server binds it; without,
    metrics are off. With `health`, the health port is held the same way (without, it is as the
    flags and `env` say: off by default). At a quiet `log_level` (no "serving" line) the gRPC
    port is held the same way and the server counts as started once its health check says
    SERVING.
    `program` is the `basra-rules` command to run (default: this environment's, `command()`;
    testkit.releases gives a previous release's).
    """
    with ExitStack() as holding:
        quiet = log_level in QUIET_LEVELS
        port = holding.enter_context(reserved_port()) if quiet else 0
        metrics_port = holding.enter_context(reserved_port()) if metrics else 0
        health_port = holding.enter_context(reserved_port()) if health else 0
        health_flags = ["--health-port", str(health_port)] if health else []
        process = subprocess.Popen(
            serve_command(
                "--log-format",
                "json",
                "--log-level",
                log_level,
                *health_flags,
                *flags,
                port=port,
                metrics_port=metrics_port,
                program=program,
            ),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            text=True,
            env={**(os.environ if inherit_env else {}), **(env or {})},
            cwd=cwd,
        )
        served = ServedProcess(
            process, port, metrics_port or None, health_port or None, keep_calls=keep_calls
        )
        served.reader = threading.Thread(target=served._read, name="server-log", daemon=True)
        served.reader.start()
        try:
            if quiet:
                wait_healthy(served.target, process, START_SECONDS)
            else:
                serving = served.wait_for("serving", START_SECONDS)
                served.port = int(serving["port"])
                served.metrics_port = serving["metrics_port"]
        except TimeoutError:
            served.stop(5)
            raise TimeoutError(f"the server did not start: {served.log_text()[-2000:]}") from None
        return served
