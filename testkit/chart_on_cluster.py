"""The chart installed on a test cluster (testkit/cluster.py), and what the tests read of it.

A release is installed as users install it, `helm install --wait` with the chart's own values
and only the image's reference and pull policy set, plus whatever a test names. What the pods
did is read where it lands: the Kubernetes API for objects and events, the pods' metrics
emptyDir on the pod's node for each worker's own counters (each worker writes its own file there,
which /metrics sums), and the kubelet's pod logs.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from testkit.cluster import Cluster
from testkit.deployment import CHART_DIR
from testkit.metrics_files import counter_total

CHART_IMAGE = ("--set", "image.repository=basra-rules", "--set", "image.pullPolicy=Never")
RULES_SERVICE = "basra.v1.RulesService"
HELM_TIMEOUT = "180s"


@dataclass(frozen=True)
class Release:
    """One release of the chart on the cluster."""

    cluster: Cluster
    name: str
    namespace: str

    @property
    def selector(self) -> str:
        """The label selector of the release's pods."""
        return f"app.kubernetes.io/instance={self.name}"

    def kubectl(self, *args: str, **options: Any) -> Any:
        """kubectl in the release's namespace."""
        return self.cluster.kubectl("--namespace", self.namespace, *args, **options)

    def get(self, *args: str) -> Any:
        """`kubectl get ... -o json` in the release's namespace."""
        return json.loads(self.kubectl("get", *args, "-o", "json").stdout)

    def upgrade(self, *flags: str, wait: bool = True, check: bool = True) -> Any:
        """`helm upgrade` of the release with its values kept and `flags` added."""
        return self.cluster.helm(
            "upgrade",
            self.name,
            str(CHART_DIR),
            "--namespace",
            self.namespace,
            "--reuse-values",
            *flags,
            *(("--wait", "--timeout", HELM_TIMEOUT) if wait else ()),
            timeout=300,
            check=check,
        )

    def service_ip(self, service: str | None = None) -> str:
        """The ClusterIP of the release's Service (or another Service of the namespace)."""
        return str(self.get("service", service or self.name)["spec"]["clusterIP"])

    def target(self) -> str:
        """host:port of the gRPC port through the Service."""
        return f"{self.service_ip()}:50051"

    def pods(self) -> list[dict[str, Any]]:
        """The release's pods that are not being deleted."""
        found = self.get("pods", "-l", self.selector)["items"]
        return [p for p in found if not p["metadata"].get("deletionTimestamp")]

    def ready_pods(self) -> list[dict[str, Any]]:
        """The release's pods whose Ready condition is true."""
        return [p for p in self.pods() if ready(p)]

    def wait_ready(self, count: int, seconds: float = 180.0) -> list[dict[str, Any]]:
        """Wait until exactly `count` pods exist and all are Ready; return them."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            pods = self.pods()
            if len(pods) == count and all(ready(p) for p in pods):
                return pods
            time.sleep(0.5)
        raise TimeoutError(
            f"{count} ready pods of {self.name} not within {seconds} s: "
            f"{[(p['metadata']['name'], ready(p)) for p in self.pods()]}"
        )

    def endpoints(self, service: str | None = None) -> list[str]:
        """The ready addresses the Service's EndpointSlices list."""
        slices = self.get(
            "endpointslices", "-l", f"kubernetes.io/service-name={service or self.name}"
        )["items"]
        return sorted(
            address
            for piece in slices
            for endpoint in piece.get("endpoints") or []
            if endpoint.get("conditions", {}).get("ready")
            for address in endpoint["addresses"]
        )

    def events(self, involving: str) -> list[dict[str, Any]]:
        """Events about one object of the namespace."""
        found = self.get("events", "--field-selector", f"involvedObject.name={involving}")
        return list(found["items"])

    def metrics_dir(self, pod: Mapping[str, Any]) -> Path:
        """The pod's prometheus-client multiprocess directory, an emptyDir on the node the pod
        is bound to."""
        uid = str(pod["metadata"]["uid"])
        return (
            self.cluster.node(str(pod["spec"]["nodeName"])).files
            / "kubelet"
            / "root"
            / "pods"
            / uid
            / "volumes"
            / "kubernetes.io~empty-dir"
            / "metrics"
        )

    def worker_calls(self, pod: Mapping[str, Any], method: str | None = None) -> dict[str, float]:
        """RulesService calls each of the pod's workers has handled (all codes), by the
        worker's own counter file, optionally for one method."""
        calls = {}
        directory = self.metrics_dir(pod)
        for path in sorted(directory.glob("counter_*.db")):
            calls[path.stem.removeprefix("counter_")] = counter_total(
                [path],
                "grpc_server_handled_total",
                {"grpc_service": RULES_SERVICE, **({"grpc_method": method} if method else {})},
            )
        return calls

    def logs(self, pod: Mapping[str, Any]) -> list[str]:
        """`kubectl logs` of the pod's server container, as lines."""
        done = self.kubectl("logs", pod["metadata"]["name"], "-c", "server", timeout=60)
        return list(done.stdout.splitlines())


def ready(pod: Mapping[str, Any]) -> bool:
    """Whether the pod's Ready condition is true."""
    return any(
        c["type"] == "Ready" and c["status"] == "True"
        for c in pod.get("status", {}).get("conditions", [])
    )


def pod_processes(pod: Mapping[str, Any]) -> dict[int, tuple[int, int]]:
    """The pod's processes other than the pause container's, by host pid: (parent's host pid,
    pid in the pod's own namespace)."""
    marker = f"pod{pod['metadata']['uid']}"
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            groups = (entry / "cgroup").read_text()
            command = (entry / "cmdline").read_bytes()
            status = dict(
                line.split(":", 1) for line in (entry / "status").read_text().splitlines()
            )
        except (OSError, ValueError):
            continue
        if marker in groups and b"pause" not in command.split(b"\0")[0]:
            found[int(entry.name)] = (int(status["PPid"]), int(status["NSpid"].split()[-1]))
    return found


def workers(pod: Mapping[str, Any]) -> dict[int, int]:
    """The pod's workers, host pid by pid in the pod: the children of its supervisor (the one
    process whose parent is not the pod's) that multiprocessing spawned (not its resource
    tracker)."""
    processes = pod_processes(pod)
    (supervisor,) = [pid for pid, (parent, _) in processes.items() if parent not in processes]
    return {
        pid: inner
        for pid, (parent, inner) in processes.items()
        if parent == supervisor and b"spawn_main" in _command_line(pid)
    }


def _command_line(pid: int) -> bytes:
    """A process's command line; empty once it is gone."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def install(
    cluster: Cluster, name: str, namespace: str, values: Sequence[str] = (), wait: bool = True
) -> Release:
    """`helm install` the chart with its own values, the image's reference and pull policy,
    and `values` (more `--set`/`-f` flags)."""
    cluster.helm(
        "install",
        name,
        str(CHART_DIR),
        "--namespace",
        namespace,
        "--create-namespace",
        *CHART_IMAGE,
        *values,
        *(("--wait", "--timeout", HELM_TIMEOUT) if wait else ()),
        timeout=300,
    )
    return Release(cluster, name, namespace)


def uninstall_all(cluster: Cluster, seconds: float = 120.0) -> None:
    """Uninstall every release and wait until their pods are gone (their CPU is free)."""
    for found in json.loads(cluster.helm("list", "--all-namespaces", "-o", "json").stdout):
        cluster.helm("uninstall", found["name"], "--namespace", found["namespace"], "--wait")
    deadline = time.monotonic() + seconds
    selector = "app.kubernetes.io/name=basra-rules"
    while cluster.get("pods", "--all-namespaces", "-l", selector)["items"]:
        if time.monotonic() > deadline:
            raise TimeoutError(f"pods of uninstalled releases still there after {seconds} s")
        time.sleep(0.5)


def wait_settled(cluster: Cluster, seconds: float = 180.0) -> None:
    """Wait until every pod of the cluster (all namespaces, those being deleted aside) is
    Ready: what a fault left behind is mended before the next test reads the cluster."""
    deadline = time.monotonic() + seconds
    while True:
        pods = [
            p
            for p in cluster.get("pods", "--all-namespaces")["items"]
            if not p["metadata"].get("deletionTimestamp")
        ]
        unready = [
            f"{p['metadata']['namespace']}/{p['metadata']['name']}"
            for p in pods
            if not ready(p) and p.get("status", {}).get("phase") != "Succeeded"
        ]
        if not unready:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"pods not Ready within {seconds} s: {unready}")
        time.sleep(0.5)


def rollout_status(release: Release, seconds: int = 180) -> None:
    """`kubectl rollout status` of the release's Deployment, bounded."""
    release.kubectl(
        "rollout",
        "status",
        f"deployment/{release.name}",
        f"--timeout={seconds}s",
        timeout=seconds + 30,
    )


def wait_drained(release: Release, seconds: float = 90.0) -> None:
    """Wait until no pod of the release is being deleted (the last old pod of a rollout
    serves its open connections until its preStop pause and its drain are over)."""
    deadline = time.monotonic() + seconds
    while any(
        p["metadata"].get("deletionTimestamp")
        for p in release.get("pods", "-l", release.selector)["items"]
    ):
        if time.monotonic() > deadline:
            raise TimeoutError(f"pods of {release.name} still stopping after {seconds} s")
        time.sleep(0.5)


class CallsSeen:
    """The RulesService calls each pod of a release handled, read from the pods' counter
    files every `every` seconds on a thread of its own (a pod's files go with the pod, so its
    last reading stands for it); a context manager."""

    def __init__(self, release: Release, every: float = 1.0) -> None:
        self.release = release
        self.seen: dict[str, float] = {}
        self._every = every
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> CallsSeen:
        self.read()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(30)
        self.read()

    def read(self) -> None:
        """Read every pod's counters now."""
        found = self.release.get("pods", "-l", self.release.selector)["items"]
        for pod in found:
            with contextlib.suppress(OSError, ValueError):
                calls = sum(self.release.worker_calls(pod).values())
                name = pod["metadata"]["name"]
                self.seen[name] = max(calls, self.seen.get(name, 0.0))

    def _run(self) -> None:
        while not self._stop.wait(self._every):
            with contextlib.suppress(AssertionError, ValueError, subprocess.SubprocessError):
                self.read()
