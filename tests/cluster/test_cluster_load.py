"""Real clients through the chart's Service: ghz runs every deploy/ghz configuration against
the ClusterIP, and the Go lobby (examples/go/cmd/lobby) plays whole matches with the published
service config.

A ClusterIP balances connections, not calls: kube-proxy sends each new connection to a pod
drawn at random, and within the pod the kernel hands it to one worker (SO_REUSEPORT). So a
run's spread over the pods and workers follows its connections; the test asserts that the
configurations' connections, all runs together, reached every worker of every pod, and prints
each run's spread.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from testkit.chart_on_cluster import Release
from testkit.deployment import REPO

GHZ = REPO / ".ci" / "tools" / "go" / "bin" / "ghz"
GHZ_CONFIGS = sorted((REPO / "deploy" / "ghz").glob("*.json"))
SERVICE_CONFIG = REPO / "deploy" / "grpc-service-config.json"
GO_LOBBY = REPO / "examples" / "go"
# Workers write their counters to their files once a second or so.
SETTLE_SECONDS = 10.0

pytestmark = pytest.mark.timeout(900)


def _calls(release: Release) -> dict[str, dict[str, float]]:
    """RulesService calls by pod and worker, once the workers' files stop changing."""
    deadline = time.monotonic() + SETTLE_SECONDS
    last: dict[str, dict[str, float]] | None = None
    while True:
        now = {p["metadata"]["name"]: release.worker_calls(p) for p in release.ready_pods()}
        if now == last or time.monotonic() > deadline:
            return now
        last = now
        time.sleep(1.5)


def _grown(
    before: Mapping[str, Mapping[str, float]], after: Mapping[str, Mapping[str, float]]
) -> dict[str, dict[str, float]]:
    return {
        pod: {w: calls - before.get(pod, {}).get(w, 0.0) for w, calls in workers.items()}
        for pod, workers in after.items()
    }


def _ghz(config: Path, target: str) -> dict[str, Any]:
    done = subprocess.run(
        [str(GHZ), "--config", str(config), "-O", "json", target],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout)
    assert isinstance(report, dict)
    return report


def test_ghz_runs_every_config_through_the_service_and_reaches_every_worker(
    release: Release,
) -> None:
    """Every deploy/ghz configuration, unchanged but for the host, all calls OK; together
    they reach both pods and both workers of each."""
    assert len(GHZ_CONFIGS) == 5
    start = _calls(release)
    before = start
    for config in GHZ_CONFIGS:
        settings = json.loads(config.read_text())
        report = _ghz(config, release.target())
        assert report["statusCodeDistribution"] == {"OK": settings["total"]}, (
            config.name,
            report.get("errorDistribution"),
        )
        after = _calls(release)
        spread = {pod: sorted(w.values()) for pod, w in _grown(before, after).items()}
        print(f"{config.name}: {report['rps']:.0f} calls/s, calls per pod and worker {spread}")
        before = after
    total = _grown(start, before)
    assert len(total) == 2
    for pod, workers in total.items():
        assert len(workers) == 2, (pod, workers)
        assert all(calls > 0 for calls in workers.values()), (pod, workers)


def test_the_go_lobby_plays_whole_matches_through_the_service(
    release: Release, tmp_path: Path
) -> None:
    """The Go client, with the published service config, plays matches to their end."""
    binary = tmp_path / "lobby"
    subprocess.run(
        ["go", "build", "-o", str(binary), "./cmd/lobby"],
        cwd=GO_LOBBY,
        check=True,
        timeout=300,
        capture_output=True,
    )
    done = subprocess.run(
        [
            str(binary),
            "-target",
            release.target(),
            "-service-config",
            str(SERVICE_CONFIG),
            "-matches",
            "2",
            "-seed",
            "cluster-go",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    summary = json.loads(done.stdout)
    assert summary["finished"] == 2 and summary["calls"] > 100, summary
