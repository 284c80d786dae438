"""The image's entry point run with the chart's environment, probed the way the kubelet probes.

Only the bind address, ports and metrics directory change (loopback, free ports, a temporary
directory); every other BASRA_* value is the chart's default render.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from deploy_support import HEALTH_SERVICE, container, env_map, manifests, render
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

START_TIMEOUT = 30.0


def free_port() -> int:
    """A loopback port nobody listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def entry_point() -> str:
    """The console script the image's ENTRYPOINT runs, from this interpreter's environment."""
    script = Path(sys.executable).with_name("basra-rules")
    assert script.is_file(), f"{script} missing: is the project installed in the venv?"
    return str(script)


def health_status(channel: grpc.Channel, service: str) -> Any:
    """One gRPC health check, as the kubelet's grpc probe makes it."""
    stub = health_pb2_grpc.HealthStub(channel)
    return stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=2).status


class Running:
    """A started server process with its ports."""

    def __init__(self, process: subprocess.Popen[bytes], port: int, metrics_port: int) -> None:
        """Hold the process and the ports it serves on."""
        self.process = process
        self.port = port
        self.metrics_port = metrics_port


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Running]:
    """`basra-rules serve` with the chart's default environment, stopped after the test."""
    env = env_map(container(manifests(render())))
    port, metrics_port = free_port(), free_port()
    metrics_dir = tmp_path / "metrics"
    metrics_dir.mkdir()
    env.update(
        BASRA_HOST="127.0.0.1",
        BASRA_PORT=str(port),
        BASRA_METRICS_PORT=str(metrics_port),
        BASRA_METRICS_DIR=str(metrics_dir),
    )
    # The chart's environment only, as in the container (plus what Python needs to run here).
    keep = {k: os.environ[k] for k in ("PATH", "HOME", "LANG") if k in os.environ}
    process = subprocess.Popen(
        [entry_point(), "serve"],
        env={**keep, **env},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        yield Running(process, port, metrics_port)
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(timeout=10)
        if process.stderr:
            process.stderr.close()


def wait_serving(channel: grpc.Channel, running: Running) -> None:
    """Wait until the startup probe would pass, failing fast if the process died."""
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if running.process.poll() is not None:
            stderr = running.process.stderr.read().decode() if running.process.stderr else ""
            pytest.fail(f"server exited with {running.process.returncode}: {stderr[-2000:]}")
        try:
            if health_status(channel, "") == health_pb2.HealthCheckResponse.SERVING:
                return
        except grpc.RpcError:
            pass
        time.sleep(0.1)
    pytest.fail("server did not report SERVING in time")


@pytest.mark.timeout(90)
def test_probes_pass_and_sigterm_drains(server: Running) -> None:
    """Startup/liveness ("") and readiness (rules service) pass; SIGTERM ends it cleanly."""
    with grpc.insecure_channel(f"127.0.0.1:{server.port}") as channel:
        wait_serving(channel, server)
        serving = health_pb2.HealthCheckResponse.SERVING
        assert health_status(channel, "") == serving
        assert health_status(channel, HEALTH_SERVICE) == serving

        # BASRA_REFLECTION=true from the chart: reflection lists the rules service.
        stub = reflection_pb2_grpc.ServerReflectionStub(channel)
        request = reflection_pb2.ServerReflectionRequest(list_services="")
        (answer,) = list(stub.ServerReflectionInfo(iter([request]), timeout=5))
        names = {s.name for s in answer.list_services_response.service}
        assert HEALTH_SERVICE in names

    # The ServiceMonitor's target: /metrics on the metrics port.
    url = f"http://127.0.0.1:{server.metrics_port}/metrics"
    with urllib.request.urlopen(url, timeout=5) as response:
        assert response.status == 200

    grace = int(env_map(container(manifests(render())))["BASRA_GRACE_SECONDS"])
    server.process.send_signal(signal.SIGTERM)
    assert server.process.wait(timeout=grace + 10) == 0
