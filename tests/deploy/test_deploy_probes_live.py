"""The image's entry point run with the chart's environment, probed the way the kubelet probes.

Only the bind address, ports and metrics directory change (loopback, ports chosen by the
server or held free for it, a temporary directory); every other BASRA_* value is the chart's
default render. The probes ask where the chart's probes ask: the health port.
"""

from __future__ import annotations

import os
import signal
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from testkit import harness
from testkit.deployment import HEALTH_SERVICE, container, env_map, manifests, render


def health_status(channel: grpc.Channel, service: str) -> Any:
    """One gRPC health check, as the kubelet's grpc probe makes it."""
    stub = health_pb2_grpc.HealthStub(channel)
    return stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=2).status


@pytest.fixture
def server(tmp_path: Path) -> Iterator[harness.ServedProcess]:
    """`basra-rules serve` with the chart's default environment, stopped after the test."""
    env = env_map(container(manifests(render())))
    metrics_dir = tmp_path / "metrics"
    metrics_dir.mkdir()
    env["BASRA_METRICS_DIR"] = str(metrics_dir)
    # The chart's environment only, as in the container (plus what Python needs to run here);
    # the launcher's flags set loopback, the ports, and the chart's own log level and format.
    keep = {k: os.environ[k] for k in ("PATH", "HOME", "LANG") if k in os.environ}
    assert env["BASRA_LOG_FORMAT"] == "json"
    assert int(env["BASRA_HEALTH_PORT"]) > 0  # the chart's probes' port, moved by the launcher
    served = harness.start(
        env={**keep, **env},
        inherit_env=False,
        log_level=env["BASRA_LOG_LEVEL"],
        metrics=True,
        health=True,
    )
    try:
        yield served
    finally:
        served.kill()


@pytest.mark.timeout(90)
def test_probes_pass_and_sigterm_drains(server: harness.ServedProcess) -> None:
    """The chart's startup/liveness ("") and readiness (rules service) probes pass on the
    health port, as does a client's health check on the gRPC port; SIGTERM ends it cleanly."""
    # The console script the image's ENTRYPOINT runs, not a module form.
    assert Path(harness.command()[0]).name == "basra-rules"
    serving = health_pb2.HealthCheckResponse.SERVING
    probes = container(manifests(render()))
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        with grpc.insecure_channel(server.health_target) as channel:
            assert health_status(channel, probes[probe]["grpc"]["service"]) == serving, probe
    with grpc.insecure_channel(server.target) as channel:
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
    assert server.wait(timeout=grace + 10) == 0
