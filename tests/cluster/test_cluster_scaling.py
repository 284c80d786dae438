"""The chart's HorizontalPodAutoscaler on a real cluster: metrics-server (testkit/cluster.py
starts it, registered as metrics.k8s.io) reports the pods' CPU, the autoscaler scales the
Deployment up under ghz load and back down to minReplicas after it, each within a bound, and a
`helm upgrade` while scaled up keeps the autoscaler's count (the chart's `basra-rules.replicas`
reads it with `lookup`).

The release is the module's own, alone on the cluster: requests.cpu=500m (so that
maxReplicas=4 pods fit wherever the scheduler puts them, NODE_CPUS a node), a CPU
target of 20 % (TARGET says why), and autoscaling.behavior with a 15 s scale-down
stabilization window instead of Kubernetes' 5 minutes, so that the test is bounded. The
cluster's autoscaler looks every 5 s and metrics-server resolves 15 s windows.

What makes it scale is checked, not assumed: at minReplicas without load the HPA reads the
pods' CPU below the target and keeps its count; under the load it read more than the target;
and the load was calls answered (ghz's report: every call OK, at a least pace).
"""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from testkit import cluster as kube
from testkit.chart_on_cluster import Release, install, uninstall_all
from testkit.deployment import REPO
from testkit.ghz_tool import GHZ

pytestmark = pytest.mark.timeout(600)

MIN, MAX = 2, 4
# The autoscaler's CPU target, lowered from the chart's 70 %: on the shared 2-core machine the
# two pods got 0.55 CPU between them under this load (55 % of their requests), too little to
# ask for 4 pods at 70 %. At 20 % two pods ask for 4 from 0.3 CPU, and 4 keep 4 from 0.36.
TARGET = 20
BEHAVIOR = {"scaleDown": {"stabilizationWindowSeconds": 15}}
VALUES = (
    "--set",
    "resources.requests.cpu=500m",
    "--set",
    f"autoscaling.maxReplicas={MAX}",
    "--set",
    f"autoscaling.targetCPUUtilizationPercentage={TARGET}",
    "--set-json",
    f"autoscaling.behavior={json.dumps(BEHAVIOR)}",
)
UP_SECONDS = 150.0
DOWN_SECONDS = 150.0
LOAD_SECONDS = 400
# How long the idle pods are watched before the load: several of the autoscaler's 5 s looks.
BASELINE_SECONDS = 20.0
# The least pace of ghz's calls over the load, calls a second (a few hundred when it runs).
MIN_LOAD_PACE = 20


@pytest.fixture(scope="module")
def scaling_release(cluster: kube.Cluster) -> Iterator[Release]:
    """The chart with room for maxReplicas pods and a short scale-down window, alone on the
    cluster; uninstalled after the module."""
    uninstall_all(cluster)
    # The release name holds the chart name, so that its objects are named as the release.
    yield install(cluster, "basra-rules", namespace="scale", values=VALUES)
    uninstall_all(cluster)


@dataclass
class Load:
    """ghz's SuggestMove through the Service, running until stopped; its JSON report to
    `report` (ghz writes it once stopped)."""

    process: subprocess.Popen[bytes]
    report: Path
    began: float
    ended: float = 0.0
    utilization: list[int] = field(default_factory=list)
    """The HPA's CPU utilization (% of requests) as seen while scaling up."""

    def stop(self) -> None:
        """SIGINT, on which ghz stops sending, waits for the calls in flight
        (--duration-stop=wait) and writes its report."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
            self.ended = time.monotonic()

    def result(self) -> dict[str, Any]:
        """ghz's report, once stopped."""
        assert self.process.returncode == 0, self.report.with_suffix(".err").read_text()[-2000:]
        found = json.loads(self.report.read_text())
        assert isinstance(found, dict)
        return found


def _replicas(release: Release) -> int:
    return int(release.get("deployment", release.name)["spec"]["replicas"])


def _scale_events(release: Release) -> list[str]:
    """The Deployment's scaling events' messages."""
    return [
        e["message"]
        for e in release.events(release.name)
        if e["reason"] == "ScalingReplicaSet" and e["involvedObject"]["kind"] == "Deployment"
    ]


def _wait(what: str, ready: Any, seconds: float, release: Release) -> Any:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        found = ready()
        if found:
            return found
        time.sleep(2)
    hpa = release.get("hpa", release.name)
    raise TimeoutError(f"{what} not within {seconds} s: hpa status {hpa['status']}")


def _utilization(release: Release) -> int | None:
    """The CPU utilization of the pods (% of their requests) the HPA last computed."""
    status = release.get("hpa", release.name)["status"]
    for metric in status.get("currentMetrics") or []:
        current = metric.get("resource", {}).get("current", {})
        if metric["type"] == "Resource" and "averageUtilization" in current:
            return int(current["averageUtilization"])
    return None


@pytest.fixture(scope="module")
def scaled_up(scaling_release: Release, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Load]:
    """ghz's SuggestMove through the Service (16 in flight over 8 connections) until the
    Deployment runs maxReplicas Ready pods; the load runs on until a test stops it (or the
    module ends). The scale-up's time is printed."""
    release = scaling_release
    release.wait_ready(MIN)
    report = tmp_path_factory.mktemp("ghz") / "report.json"
    began = time.monotonic()
    with report.open("wb") as output, report.with_suffix(".err").open("wb") as errors:
        process = subprocess.Popen(
            [
                str(GHZ),
                "--config",
                str(REPO / "deploy" / "ghz" / "suggest_move.json"),
                "-c",
                "16",
                "--connections",
                "8",
                "-z",
                f"{LOAD_SECONDS}s",
                "--duration-stop",
                "wait",
                "--timeout",
                "5s",
                "-O",
                "json",
                release.target(),
            ],
            cwd=REPO,
            stdout=output,
            stderr=errors,
        )
    load = Load(process, report, began)

    def up() -> bool:
        seen = _utilization(release)
        if seen is not None:
            load.utilization.append(seen)
        return _replicas(release) == MAX and len(release.ready_pods()) == MAX

    try:
        _wait(f"the Deployment scaled to {MAX} Ready pods", up, UP_SECONDS, release)
        print(
            f"scaled {MIN} -> {MAX} Ready pods in {time.monotonic() - began:.0f} s of load; "
            f"the HPA saw {load.utilization} % CPU utilization (target {TARGET} %)"
        )
        yield load
    finally:
        load.stop()


def test_metrics_server_serves_the_pods_cpu(scaling_release: Release) -> None:
    """`kubectl top pods` answers for every pod of the release (the autoscaler's source)."""
    release = scaling_release
    pods = {p["metadata"]["name"] for p in release.wait_ready(MIN)}

    def top() -> dict[str, str] | None:
        done = release.kubectl("top", "pods", "--no-headers", check=False, timeout=30)
        if done.returncode != 0:
            return None
        rows = {line.split()[0]: line.split()[1] for line in done.stdout.splitlines()}
        return rows if rows.keys() == pods else None

    rows = _wait("kubectl top pods for every pod", top, 90, release)
    assert all(cpu.endswith("m") for cpu in rows.values()), rows


def test_without_load_the_autoscaler_keeps_min_replicas(scaling_release: Release) -> None:
    """The baseline: with no calls, the HPA reads the idle pods' CPU below the target and
    keeps minReplicas for several of its looks."""
    release = scaling_release
    _wait("the HPA's first CPU reading", lambda: _utilization(release) is not None, 90, release)
    seen: list[int | None] = []
    deadline = time.monotonic() + BASELINE_SECONDS
    while time.monotonic() < deadline:
        seen.append(_utilization(release))
        assert _replicas(release) == MIN, seen
        time.sleep(2)
    assert all(u is not None and u < TARGET for u in seen), (seen, TARGET)
    assert release.get("hpa", release.name)["status"]["desiredReplicas"] == MIN
    print(f"idle: the HPA saw {sorted({u or 0 for u in seen})} % CPU utilization at {MIN} pods")


def test_under_load_the_autoscaler_scales_up_to_max_replicas(
    scaling_release: Release, scaled_up: Load
) -> None:
    """Under SuggestMove load the HPA, reading metrics-server's CPU, scales the Deployment
    from minReplicas to maxReplicas, and every new pod turns Ready (the fixture bounds it)."""
    release = scaling_release
    hpa = release.get("hpa", release.name)
    assert hpa["status"]["desiredReplicas"] == MAX
    conditions = {c["type"]: c for c in hpa["status"]["conditions"]}
    assert conditions["ScalingActive"]["status"] == "True", conditions
    assert conditions["ScalingActive"]["reason"] == "ValidMetricFound", conditions
    assert any(f"to {MAX}" in m and "Scaled up" in m for m in _scale_events(release))
    assert scaled_up.process.poll() is None, "the load ended before the scale-up"
    # It scaled because the load's CPU passed the target (by more than its 10 % tolerance).
    assert max(scaled_up.utilization, default=0) > TARGET * 1.1, scaled_up.utilization


def test_helm_upgrade_while_scaled_up_keeps_the_autoscalers_count(
    scaling_release: Release, scaled_up: Load
) -> None:
    """A `helm upgrade` of the release while the HPA holds maxReplicas renders the
    Deployment's replicas from the running Deployment (lookup), so the upgrade neither
    changes the count nor scales any ReplicaSet down."""
    release = scaling_release
    assert _replicas(release) == MAX
    generation = release.get("deployment", release.name)["metadata"]["generation"]
    release.upgrade("--set", "service.annotations.upgraded=yes")
    assert release.get("service", release.name)["metadata"]["annotations"]["upgraded"] == "yes"
    assert _replicas(release) == MAX
    deployment = release.get("deployment", release.name)
    assert deployment["metadata"]["generation"] == generation, "the upgrade changed the spec"
    assert not [m for m in _scale_events(release) if "Scaled down" in m]
    assert len(release.ready_pods()) == MAX
    history = json.loads(
        release.cluster.helm(
            "history", release.name, "--namespace", release.namespace, "-o", "json"
        ).stdout
    )
    assert history[-1]["status"] == "deployed" and history[-1]["revision"] == 2


def test_after_the_load_the_autoscaler_scales_back_down_to_min_replicas(
    scaling_release: Release, scaled_up: Load
) -> None:
    """The load stops; within the bound (metrics-server's window, the 15 s stabilization,
    the pods' drain) the Deployment is back to minReplicas and only that many pods remain."""
    release = scaling_release
    scaled_up.stop()
    began = time.monotonic()
    report = scaled_up.result()
    seconds = scaled_up.ended - scaled_up.began
    # The load was calls answered, all of them, at a pace.
    assert report["statusCodeDistribution"] == {"OK": report["count"]}, (
        report["statusCodeDistribution"],
        report.get("errorDistribution"),
    )
    assert report["count"] >= MIN_LOAD_PACE * seconds, (report["count"], seconds)
    print(f"the load: {report['count']} calls OK in {seconds:.0f} s ({report['rps']:.0f}/s)")
    _wait(
        f"the Deployment back to {MIN} pods",
        lambda: _replicas(release) == MIN and len(release.pods()) == MIN,
        DOWN_SECONDS,
        release,
    )
    print(f"scaled {MAX} -> {MIN} pods in {time.monotonic() - began:.0f} s after the load")
    release.wait_ready(MIN, 30)
    assert any(f"to {MIN}" in m and "Scaled down" in m for m in _scale_events(release))
    with contextlib.suppress(KeyError):
        assert release.get("hpa", release.name)["status"]["desiredReplicas"] == MIN
