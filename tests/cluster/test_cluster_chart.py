"""The chart as users install it, on a real cluster: replicas, probes, security, the Service,
grpcurl, logs and the disruption budget.

The release is the session's (conftest.py): `helm install --wait` with the chart's own values.
The modules of this folder run in name order on one cluster of testkit.cluster.NODES nodes;
those before test_cluster_rollouts use this default release: 2 pods x 1 CPU requested, on a
cluster of NODE_CPUS (2) allocatable CPUs a node.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from testkit.chart_on_cluster import RULES_SERVICE, Release, pod_processes, ready
from testkit.cluster import NODE_CPUS, PAUSE_IMAGE
from testkit.deployment import REPO

GRPCURL = REPO / ".venv" / "bin" / "grpcurl"
HEALTH_PORT = 8081

pytestmark = pytest.mark.timeout(600)


def test_helm_install_wait_returns_with_the_replicas_the_chart_promises(release: Release) -> None:
    """With the autoscaler on (the default), --wait returns with minReplicas Ready pods, and
    the budget lets one of them go, not the only one."""
    deployment = release.get("deployment", release.name)
    assert deployment["spec"]["replicas"] == 2
    assert len(release.ready_pods()) == 2, "helm install --wait returned before 2 pods were Ready"
    hpa = release.get("hpa", release.name)
    assert hpa["spec"]["minReplicas"] == 2
    budget = release.get("pdb", release.name)
    assert budget["status"]["currentHealthy"] == 2
    assert budget["status"]["disruptionsAllowed"] == 1


def test_every_pod_turns_ready_through_the_kubelets_grpc_probes(release: Release) -> None:
    """All three probes are the kubelet's gRPC probes on the health port, and the kubelet of
    each pod's node counted readiness successes for it."""
    for pod in release.ready_pods():
        node = pod["spec"]["nodeName"]
        probes = release.cluster.kubectl(
            "get", "--raw", f"/api/v1/nodes/{node}/proxy/metrics/probes"
        ).stdout
        (server,) = pod["spec"]["containers"]
        for kind in ("startupProbe", "livenessProbe", "readinessProbe"):
            assert server[kind]["grpc"]["port"] == HEALTH_PORT, kind
        assert server["readinessProbe"]["grpc"]["service"] == RULES_SERVICE
        (status,) = pod["status"]["containerStatuses"]
        assert status["ready"] and status["restartCount"] == 0
        name = pod["metadata"]["name"]
        successes = [
            line
            for line in probes.splitlines()
            if line.startswith("prober_probe_total{")
            and f'pod="{name}"' in line
            and 'probe_type="Readiness"' in line
            and 'result="successful"' in line
        ]
        assert successes and float(successes[0].rpartition(" ")[2]) >= 1, name


def test_the_security_context_is_accepted_and_holds(release: Release) -> None:
    """The pods run under the chart's context as the kernel sees them: uid 10001, no
    capabilities, no new privileges, a read-only root; and they serve."""
    for pod in release.ready_pods():
        context = pod["spec"]["containers"][0]["securityContext"]
        assert context["readOnlyRootFilesystem"] and context["capabilities"]["drop"] == ["ALL"]
        pids = list(pod_processes(pod))
        assert len(pids) >= 3, "a supervisor and two workers"
        for pid in pids:
            status = dict(
                line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
            )
            assert status["Uid"].split()[:2] == ["10001", "10001"], pid
            assert int(status["CapEff"], 16) == 0 and int(status["CapPrm"], 16) == 0, pid
            assert status["NoNewPrivs"].strip() == "1", pid
            root = [
                line.split()
                for line in Path(f"/proc/{pid}/mountinfo").read_text().splitlines()
                if line.split()[4] == "/"
            ]
            assert root and "ro" in root[-1][5].split(","), root


def _grpcurl(*args: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [str(GRPCURL), *args], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    return done


def test_grpcurl_lists_describes_and_calls_through_the_service(release: Release) -> None:
    """grpcurl, by reflection through the ClusterIP: the service is listed and described, and
    a NewMatch answers with a state."""
    target = release.target()
    assert RULES_SERVICE in _grpcurl("-plaintext", target, "list").stdout.split()
    described = _grpcurl("-plaintext", target, "describe", RULES_SERVICE).stdout
    assert "rpc Apply" in described and "rpc SuggestMove" in described
    answer = json.loads(
        _grpcurl(
            "-plaintext", "-d", '{"seed": "Y2x1c3Rlcg=="}', target, f"{RULES_SERVICE}/NewMatch"
        ).stdout
    )
    assert answer["state"]["status"] == "STATUS_IN_PROGRESS"
    assert answer["events"], answer.keys()


def test_kubectl_logs_shows_the_documented_json_lines(release: Release) -> None:
    """Each pod logs JSON lines: `serving` with its workers, and a line per call with the
    documented fields."""
    for _ in range(8):
        _grpcurl("-plaintext", "-d", "{}", release.target(), f"{RULES_SERVICE}/NewMatch")
    calls = []
    for pod in release.ready_pods():
        lines = [json.loads(line) for line in release.logs(pod)]
        serving = [line for line in lines if line.get("event") == "serving"]
        assert serving and len(serving[0]["pids"]) == 2, lines[:5]
        calls += [line for line in lines if line.get("method") == f"{RULES_SERVICE}/NewMatch"]
    assert len(calls) >= 8, [line for line in lines if line.get("event") != "serving"][-3:]
    for line in calls:
        assert {"timestamp", "level", "method", "code", "duration_ms", "worker"} <= set(line)
        assert line["code"] == "OK" and line["level"] == "info"


def _evict(release: Release, pod: str) -> subprocess.CompletedProcess[str]:
    body = {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": pod, "namespace": release.namespace},
    }
    return release.cluster.kubectl(
        "create",
        "--raw",
        f"/api/v1/namespaces/{release.namespace}/pods/{pod}/eviction",
        "-f",
        "-",
        stdin=json.dumps(body),
        check=False,
    )


def test_an_eviction_that_would_break_the_budget_is_refused(release: Release) -> None:
    """Of two pods, one may be evicted; the second, while the first is gone, is refused."""
    first, second = (p["metadata"]["name"] for p in release.ready_pods())
    allowed = _evict(release, first)
    assert allowed.returncode == 0, allowed.stderr
    refused = _evict(release, second)
    assert refused.returncode != 0
    assert "disruption budget" in refused.stderr, refused.stderr
    assert second in {p["metadata"]["name"] for p in release.ready_pods()}
    release.wait_ready(2)


def _filler(release: Release, cpus: int) -> dict[str, object]:
    """A Deployment of pause containers asking 1 CPU each, `cpus` of them, in the release's
    namespace: the rest of the cluster's CPU taken."""
    labels = {"app": "filler"}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "filler", "namespace": release.namespace},
        "spec": {
            "replicas": cpus,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "terminationGracePeriodSeconds": 1,
                    "containers": [
                        {
                            "name": "pause",
                            "image": PAUSE_IMAGE,
                            "imagePullPolicy": "Never",
                            "resources": {"requests": {"cpu": "1"}},
                        }
                    ],
                },
            },
        },
    }


def test_a_rollout_without_room_fails_fast_and_clearly(release: Release) -> None:
    """With every other CPU of the cluster taken (pause pods asking 1 CPU each beside the
    defaults' 2 pods of 1 CPU), a rollout's surge pod cannot be placed: it stays Pending for
    `Insufficient cpu`, and the rollout is marked failed at its progress deadline (shortened
    here) instead of hanging; a rollback restores the release."""
    cluster = release.cluster
    before = {p["metadata"]["name"] for p in release.ready_pods()}
    free = NODE_CPUS * len(cluster.nodes) - len(before)
    release.kubectl("apply", "-f", "-", stdin=json.dumps(_filler(release, free)))
    try:
        release.kubectl("rollout", "status", "deployment/filler", "--timeout=90s", timeout=120)
        release.upgrade(
            "--set",
            "podAnnotations.rolled=once",
            "--set",
            "rollout.progressDeadlineSeconds=15",
            wait=False,
        )
        status = release.kubectl(
            "rollout",
            "status",
            f"deployment/{release.name}",
            "--timeout=90s",
            check=False,
            timeout=120,
        )
        assert status.returncode != 0
        assert "exceeded its progress deadline" in status.stderr + status.stdout, status
        pending = [p for p in release.pods() if p["metadata"]["name"] not in before]
        assert len(pending) == 1 and not ready(pending[0])
        reasons = " ".join(e["message"] for e in release.events(pending[0]["metadata"]["name"]))
        assert "Insufficient cpu" in reasons, reasons
        cluster.helm("rollback", release.name, "--namespace", release.namespace, "--wait")
        release.wait_ready(2)
        assert {p["metadata"]["name"] for p in release.pods()} == before
    finally:
        release.kubectl(
            "delete", "deployment", "filler", "--wait=true", "--timeout=90s", timeout=120
        )
        deadline = time.monotonic() + 90  # its CPU free again for the tests after
        while release.get("pods", "-l", "app=filler")["items"] and time.monotonic() < deadline:
            time.sleep(0.5)
