"""Debian's Prometheus scraping a test cluster (testkit/cluster.py) as an operator's would.

Debian's build (2.42) has no Kubernetes service discovery compiled in, so the targets come
from a file (file_sd) that a thread here keeps current from the cluster's EndpointSlices,
Services and Pods, every `REFRESH_SECONDS`. Each target carries the `__meta_kubernetes_*`
labels that `kubernetes_sd_configs` with `role: endpointslice` gives it, so the scrape job's
`relabel_configs` (RELABEL) are the ones an operator writes for that discovery: keep the
chart's Services' port `metrics`, and name each series' namespace, pod, service and release.

Prometheus runs in the node's network namespace (Cluster.start) and listens on the node's
address, which the host reaches; it loads the chart's rule file, `files/prometheus-rules.yaml`,
from the chart itself. Scrapes and rule evaluations run every `INTERVAL` (2 s; an operator's
are 15-60 s) so that the tests take seconds.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import yaml

from testkit.cluster import Cluster
from testkit.deployment import CHART_DIR

PROMETHEUS = Path("/usr/bin/prometheus")
RULES = CHART_DIR / "files" / "prometheus-rules.yaml"
PORT = 9090
INTERVAL = "2s"
REFRESH_SECONDS = 2.0
START_SECONDS = 60.0
SHEDDING_ALERT = "BasraShedding"
"""The name of the shedding alert in RULES that the tests evaluate."""
WORKERS_REPLACED_ALERT = "BasraWorkersReplaced"
"""The name of the alert in RULES on workers replaced, which a test fires."""

# What an operator writes under `kubernetes_sd_configs: [{role: endpointslice}]`: the chart's
# Services (label app.kubernetes.io/name=basra-rules) on their port named `metrics`, and the
# series labelled with where they come from.
RELABEL: list[dict[str, Any]] = [
    {
        "action": "keep",
        "source_labels": [
            "__meta_kubernetes_service_label_app_kubernetes_io_name",
            "__meta_kubernetes_endpointslice_port_name",
        ],
        "regex": "basra-rules;metrics",
    },
    {"source_labels": ["__meta_kubernetes_namespace"], "target_label": "namespace"},
    {"source_labels": ["__meta_kubernetes_service_name"], "target_label": "service"},
    {"source_labels": ["__meta_kubernetes_pod_name"], "target_label": "pod"},
    {
        "source_labels": ["__meta_kubernetes_pod_label_app_kubernetes_io_instance"],
        "target_label": "release",
    },
]

T = TypeVar("T")
# The node's address is reached directly, whatever proxy the environment names.
_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def unavailable() -> str | None:
    """Why Prometheus cannot run here, or None."""
    for path in (PROMETHEUS, Path("/usr/bin/promtool")):
        if not path.exists():
            return f"{path} is missing (Debian's prometheus package)"
    if not RULES.exists():
        return f"the chart's rule file {RULES.relative_to(CHART_DIR.parent.parent)} is missing"
    return None


def rule(name: str) -> dict[str, Any]:
    """One alerting rule of the chart's rule file, by its alert name."""
    groups = yaml.safe_load(RULES.read_text())["groups"]
    found = [r for g in groups for r in g["rules"] if r.get("alert") == name]
    assert len(found) == 1, f"{len(found)} alerts named {name} in {RULES}"
    return dict(found[0])


def split_threshold(expression: str) -> tuple[str, float]:
    """An alert expression of the form `RATIO > THRESHOLD`: the ratio and the threshold."""
    matched = re.fullmatch(r"(?s)\s*(.*\S)\s*>\s*([0-9.eE+-]+)\s*", expression)
    assert matched, f"not of the form `expression > threshold`: {expression}"
    return matched.group(1), float(matched.group(2))


def _label(name: str) -> str:
    """A Kubernetes label or name as Prometheus' discovery spells it in a label name."""
    return re.sub(r"[^a-zA-Z0-9_]", "_", name)


def targets(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """file_sd target groups, one per endpoint and port of every EndpointSlice, with the
    labels kubernetes_sd's endpointslice role gives them, from a `kubectl get
    endpointslices,services,pods -A -o json` list."""
    services = {
        (o["metadata"]["namespace"], o["metadata"]["name"]): o
        for o in objects
        if o["kind"] == "Service"
    }
    pods = {
        (o["metadata"]["namespace"], o["metadata"]["name"]): o
        for o in objects
        if o["kind"] == "Pod"
    }
    groups = []
    for piece in (o for o in objects if o["kind"] == "EndpointSlice"):
        meta = piece["metadata"]
        namespace = meta["namespace"]
        base = {
            "__meta_kubernetes_namespace": namespace,
            "__meta_kubernetes_endpointslice_name": meta["name"],
        }
        service_name = meta.get("labels", {}).get("kubernetes.io/service-name")
        service = services.get((namespace, service_name or ""))
        if service is not None:
            base["__meta_kubernetes_service_name"] = service_name
            for key, value in service["metadata"].get("labels", {}).items():
                base[f"__meta_kubernetes_service_label_{_label(key)}"] = value
        for endpoint in piece.get("endpoints") or []:
            labels = dict(base)
            conditions = endpoint.get("conditions", {})
            labels["__meta_kubernetes_endpointslice_endpoint_conditions_ready"] = str(
                bool(conditions.get("ready"))
            ).lower()
            reference = endpoint.get("targetRef") or {}
            if reference.get("kind") == "Pod":
                labels["__meta_kubernetes_endpointslice_address_target_kind"] = "Pod"
                labels["__meta_kubernetes_endpointslice_address_target_name"] = reference["name"]
                pod = pods.get((namespace, reference["name"]))
                if pod is not None:
                    labels["__meta_kubernetes_pod_name"] = pod["metadata"]["name"]
                    labels["__meta_kubernetes_pod_ip"] = pod["status"].get("podIP", "")
                    labels["__meta_kubernetes_pod_node_name"] = pod["spec"].get("nodeName", "")
                    for key, value in pod["metadata"].get("labels", {}).items():
                        labels[f"__meta_kubernetes_pod_label_{_label(key)}"] = value
            for port in piece.get("ports") or []:
                for address in endpoint["addresses"]:
                    groups.append(
                        {
                            "targets": [f"{address}:{port['port']}"],
                            "labels": {
                                **labels,
                                "__meta_kubernetes_endpointslice_port_name": port.get("name", ""),
                                "__meta_kubernetes_endpointslice_port": str(port["port"]),
                                "__meta_kubernetes_endpointslice_port_protocol": port.get(
                                    "protocol", "TCP"
                                ),
                            },
                        }
                    )
    return groups


def config(targets_file: Path) -> dict[str, Any]:
    """The Prometheus configuration: one scrape job from the targets file, the chart's rules."""
    return {
        "global": {"scrape_interval": INTERVAL, "evaluation_interval": INTERVAL},
        "rule_files": [str(RULES)],
        "scrape_configs": [
            {
                "job_name": "basra-rules",
                "scrape_timeout": INTERVAL,
                "metrics_path": "/metrics",
                "file_sd_configs": [{"files": [str(targets_file)], "refresh_interval": "5s"}],
                "relabel_configs": RELABEL,
            }
        ],
    }


@dataclass
class Prometheus:
    """A running Prometheus on the cluster, and the thread that keeps its targets current."""

    cluster: Cluster
    root: Path
    stop: threading.Event = field(default_factory=threading.Event)
    errors: list[str] = field(default_factory=list)

    @property
    def url(self) -> str:
        """Prometheus' address, reachable from the host."""
        return f"http://{self.cluster.addresses.node}:{PORT}"

    @property
    def targets_file(self) -> Path:
        return self.root / "targets" / "basra.json"

    def write_targets(self) -> None:
        """The targets file from the cluster as it is now, replaced in one step."""
        listed = self.cluster.get("endpointslices,services,pods", "--all-namespaces")
        text = json.dumps(targets(listed["items"]), indent=1)
        scratch = self.targets_file.with_suffix(".tmp")
        scratch.write_text(text)
        os.replace(scratch, self.targets_file)

    def _keep_targets(self) -> None:
        while not self.stop.wait(REFRESH_SECONDS):
            try:
                self.write_targets()
            except (subprocess.SubprocessError, AssertionError, ValueError, OSError) as error:
                self.errors.append(str(error)[-500:])

    def api(self, path: str, **params: str) -> Any:
        """GET /api/v1/PATH; its `data`."""
        query = urllib.parse.urlencode(params)
        with _DIRECT.open(f"{self.url}/api/v1/{path}?{query}", timeout=10) as answer:
            body = json.load(answer)
        assert body["status"] == "success", body
        return body["data"]

    def query(self, expression: str) -> list[dict[str, Any]]:
        """An instant query now: the vector's samples (empty: no data)."""
        data = self.api("query", query=expression)
        assert data["resultType"] == "vector", data
        return list(data["result"])

    def values(self, expression: str, *by: str) -> dict[tuple[str, ...], float]:
        """An instant query's samples as {(label values of `by`): value}."""
        return {
            tuple(s["metric"].get(label, "") for label in by): float(s["value"][1])
            for s in self.query(expression)
        }

    def scraped_pods(self, namespace: str) -> dict[str, float]:
        """`up` of each target of the namespace, by pod."""
        return {
            pod: value
            for (pod,), value in self.values(f'up{{namespace="{namespace}"}}', "pod").items()
        }

    def wait(self, what: str, ready: Callable[[], T | None], seconds: float) -> T:
        """Poll `ready()` until it returns something true, for at most `seconds`."""
        deadline = time.monotonic() + seconds
        last: Any = None
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError, ValueError, AssertionError):
                last = ready()
                if last:
                    return last  # type: ignore[no-any-return]
            time.sleep(0.5)
        raise TimeoutError(
            f"{what} not within {seconds} s (last: {last!r}); target errors: {self.errors[-3:]}\n"
            f"{self.cluster.log('prometheus')}"
        )


@contextlib.contextmanager
def started(cluster: Cluster) -> Iterator[Prometheus]:
    """Start Prometheus in the node with the chart's rules and targets kept from the cluster;
    stop it (and the thread) after."""
    root = cluster.root / "prometheus"
    prometheus = Prometheus(cluster, root)
    (root / "targets").mkdir(parents=True, exist_ok=True)
    prometheus.write_targets()
    # JSON is YAML.
    (root / "prometheus.yml").write_text(json.dumps(config(prometheus.targets_file), indent=1))
    cluster.start(
        "prometheus",
        str(PROMETHEUS),
        f"--config.file={root / 'prometheus.yml'}",
        f"--storage.tsdb.path={root / 'data'}",
        "--storage.tsdb.retention.time=2h",
        f"--web.listen-address={cluster.addresses.node}:{PORT}",
        "--log.level=warn",
    )
    keeper = threading.Thread(target=prometheus._keep_targets, name="file-sd", daemon=True)
    keeper.start()
    try:
        cluster.wait(
            "Prometheus ready with the chart's rules",
            lambda: _rules_loaded(prometheus),
            START_SECONDS,
            ["prometheus"],
        )
        yield prometheus
    finally:
        prometheus.stop.set()
        keeper.join(30)
        cluster.stop_component("prometheus")


def _rules_loaded(prometheus: Prometheus) -> bool:
    try:
        groups = prometheus.api("rules")["groups"]
    except OSError:
        return False
    return any(r.get("name") == SHEDDING_ALERT for g in groups for r in g["rules"])


def sample_value(samples: Sequence[Mapping[str, Any]]) -> float | None:
    """The one sample's value of an instant query, or None when it returned no data."""
    if not samples:
        return None
    assert len(samples) == 1, samples
    return float(samples[0]["value"][1])
