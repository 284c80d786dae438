"""Shared helpers for the deployment tests: chart rendering, manifest loading, validation."""

from __future__ import annotations

import json
import re
import shlex
import shutil
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import helm_python as helm
import kubernetes_validate
import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO = Path(__file__).resolve().parents[1]
CHART_DIR = REPO / "helm" / "basra-rules"
K8S_DIR = REPO / "deploy" / "k8s"
DOCKERFILE = REPO / "deploy" / "Dockerfile"
# The one ignore file of the build context, read by BuildKit and the legacy builder alike.
DOCKERIGNORE = REPO / ".dockerignore"
RUNTIME_LOCK = REPO / "deploy" / "requirements.lock"
BUILD_LOCK = REPO / "deploy" / "build-requirements.lock"

RELEASE = "basra-rules"
NAMESPACE = "games"

# The newest Kubernetes the validator knows, and the oldest the chart's kubeVersion admits.
KUBE_VERSIONS = (kubernetes_validate.latest_version(), "1.30.0")

# The server's documented defaults (the configuration contract: flag, BASRA_* variable, default).
# The chart passes each one explicitly, so a drift between the two shows up here.
CONTRACT_DEFAULTS: Mapping[str, str] = {
    "BASRA_HOST": "[::]",
    "BASRA_PORT": "50051",
    "BASRA_METRICS_PORT": "9464",
    "BASRA_HEALTH_PORT": "0",
    "BASRA_WORKERS": "1",
    "BASRA_WORKER_PROBE_SECONDS": "1",
    "BASRA_WORKER_PROBE_TIMEOUT_SECONDS": "2",
    "BASRA_LOG_LEVEL": "info",
    "BASRA_LOG_FORMAT": "json",
    "BASRA_MAX_MESSAGE_BYTES": "1048576",
    "BASRA_REFLECTION": "true",
    "BASRA_GRACE_SECONDS": "10",
    "BASRA_MAX_CONNECTION_AGE_SECONDS": "300",
    "BASRA_MAX_CONNECTION_AGE_GRACE_SECONDS": "30",
    "BASRA_PLAN_WORK_LIMIT": "10000",
    "BASRA_MAX_REPLAY_ACTIONS": "10000",
    "BASRA_BOT_LEVEL": "strong",
    "BASRA_BOT_MAX_DEALS": "64",
    "BASRA_BOT_MAX_NODES": "20000",
    "BASRA_ADMISSION_LIMIT": "64",
    "BASRA_MAX_BATCH_ITEMS": "64",
    "BASRA_TRACING": "false",
}
# Where the chart deliberately departs from the server's defaults, and why.
CHART_OVERRIDES: Mapping[str, str] = {
    "BASRA_WORKERS": "2",  # one worker per CPU of the default limit
    "BASRA_HEALTH_PORT": "8081",  # the probes' port: they never wait behind the work
    "BASRA_METRICS_DIR": "/var/run/basra/metrics",  # an emptyDir; the root fs is read-only
}
HEALTH_SERVICE = "basra.v1.RulesService"

# Two keys of 24 random-looking bytes each, base64; test data only, never used by a server.
TEST_SIGNING_KEYS = (
    {"id": "k2", "key": "q83vEjRWeJCrze8SNFZ4kKvN7xI0VniQ"},
    {"id": "k1", "key": "AAECAwQFBgcICQoLDA0ODxAREhMUFRYX"},
)

ALL_ON: Mapping[str, Any] = {
    "headlessService": {"enabled": True},
    "serviceMonitor": {"enabled": True, "labels": {"release": "prometheus"}},
    "networkPolicy": {
        "enabled": True,
        "denyEgress": True,
        "grpcFrom": [{"podSelector": {"matchLabels": {"app": "lobby"}}}],
        "metricsFrom": [
            {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}
        ],
        "collectorTo": [
            {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "observability"}}}
        ],
    },
    "tracing": {
        "enabled": True,
        "endpoint": "http://otel-collector.observability:4317",
        "samplerRatio": 0.25,
    },
    "signing": {"enabled": True, "keys": [dict(k) for k in TEST_SIGNING_KEYS]},
    "tls": {"enabled": True, "secretName": "basra-tls", "clientCA": {"enabled": True}},
    "lifecycle": {"preStopMode": "exec"},
    "extraEnv": [{"name": "EXTRA", "value": "1"}],
}

# Labels only Helm sets; the plain manifests leave them out.
HELM_ONLY_LABELS = ("helm.sh/chart", "app.kubernetes.io/managed-by")


def render(values: Mapping[str, Any] | None = None) -> dict[str, str]:
    """Render the chart offline with the real Helm engine; template path -> text."""
    with helm.Chart.load(CHART_DIR) as chart:
        return chart.render(dict(values or {}), name=RELEASE, namespace=NAMESPACE)


def manifests(rendered: Mapping[str, str]) -> list[dict[str, Any]]:
    """Every Kubernetes object in a render (NOTES.txt and empty templates left out)."""
    objects: list[dict[str, Any]] = []
    for path, text in sorted(rendered.items()):
        if path.endswith(".yaml"):
            objects.extend(doc for doc in yaml.safe_load_all(text) if doc)
    return objects


def load_yaml_objects(paths: Iterable[Path]) -> list[dict[str, Any]]:
    """Every object in the given YAML files, in order."""
    objects: list[dict[str, Any]] = []
    for path in paths:
        objects.extend(doc for doc in yaml.safe_load_all(path.read_text()) if doc)
    return objects


def kustomize_resources(directory: Path) -> list[Path]:
    """The resource files a kustomization.yaml lists (no kustomize binary needed)."""
    spec = yaml.safe_load((directory / "kustomization.yaml").read_text())
    return [directory / entry for entry in spec.get("resources", [])]


def kustomize_patches(directory: Path) -> list[Path]:
    """The patch files a kustomization.yaml lists."""
    spec = yaml.safe_load((directory / "kustomization.yaml").read_text())
    return [directory / entry["path"] for entry in spec.get("patches", [])]


def one(objects: Iterable[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    """The single object of this kind (and name, if given)."""
    found = [
        o for o in objects if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)
    ]
    assert len(found) == 1, f"expected one {kind} {name or ''}, found {len(found)}"
    return found[0]


def container(objects: Iterable[dict[str, Any]], name: str = "server") -> dict[str, Any]:
    """A container of the Deployment: the server's, or the one named (http.enabled adds the
    gateway's)."""
    pod = one(objects, "Deployment")["spec"]["template"]["spec"]
    (found,) = [c for c in pod["containers"] if c["name"] == name]
    assert isinstance(found, dict)
    return found


def env_map(server: Mapping[str, Any]) -> dict[str, str]:
    """The container's literal environment as a dict."""
    return {e["name"]: e["value"] for e in server["env"] if "value" in e}


_DURATION = re.compile(r"^(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$")


def duration_seconds(text: str) -> int:
    """Seconds in a Prometheus duration such as 1m30s."""
    match = _DURATION.match(text)
    assert match and text, f"not a duration: {text!r}"
    hours, minutes, seconds = (int(g or 0) for g in match.groups())
    return hours * 3600 + minutes * 60 + seconds


def check_service_monitor(monitor: Mapping[str, Any], services: list[dict[str, Any]]) -> None:
    """Structural check of a ServiceMonitor, a CRD the Kubernetes schemas do not cover.

    It checks what the Prometheus operator needs: the API group and version, a selector that
    matches a Service in the same render, endpoints naming a port that Service has, and
    durations the operator accepts with the timeout inside the interval.
    """
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert set(monitor) == {"apiVersion", "kind", "metadata", "spec"}
    spec = monitor["spec"]
    assert set(spec) <= {"selector", "endpoints", "namespaceSelector", "jobLabel"}
    wanted = spec["selector"]["matchLabels"]
    matching = [s for s in services if wanted.items() <= s["metadata"]["labels"].items()]
    assert matching, "ServiceMonitor selects no Service"
    port_names = {p["name"] for s in matching for p in s["spec"]["ports"]}
    assert spec["endpoints"], "ServiceMonitor has no endpoints"
    for endpoint in spec["endpoints"]:
        assert set(endpoint) <= {"port", "path", "scheme", "interval", "scrapeTimeout"}
        assert endpoint["port"] in port_names
        assert endpoint["path"] == "/metrics"
        assert endpoint["scheme"] in {"http", "https"}
        interval = duration_seconds(endpoint["interval"])
        timeout = duration_seconds(endpoint["scrapeTimeout"])
        assert 0 < timeout <= interval


def validate_objects(objects: Iterable[dict[str, Any]], version: str) -> list[str]:
    """Validate each object against the Kubernetes schemas; returns the kinds checked.

    Strict mode refuses unknown fields. ServiceMonitor is a CRD with no schema in the
    validator, so it gets the structural check above instead.
    """
    objects = list(objects)
    services = [o for o in objects if o["kind"] == "Service"]
    checked = []
    for obj in objects:
        if obj["kind"] == "ServiceMonitor":
            check_service_monitor(obj, services)
        else:
            kubernetes_validate.validate(obj, version, strict=True)
        checked.append(obj["kind"])
    return checked


def check_references(objects: list[dict[str, Any]]) -> None:
    """Cross-object links a schema cannot see: selectors, named ports, volumes, targets."""
    deployment = one(objects, "Deployment")
    pod_template = deployment["spec"]["template"]
    pod_labels = pod_template["metadata"]["labels"]
    assert deployment["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    server = container(objects)
    containers = pod_template["spec"]["containers"]
    # A Service or policy may name a port of any container of the pod (the gateway's http).
    port_names = {p["name"]: p["containerPort"] for c in containers for p in c["ports"]}
    assert len(port_names) == sum(len(c["ports"]) for c in containers), "a port name twice"
    volumes = {v["name"] for v in pod_template["spec"]["volumes"]}
    assert {m["name"] for c in containers for m in c.get("volumeMounts", [])} <= volumes
    for obj in objects:
        spec = obj.get("spec", {})
        if obj["kind"] == "Service":
            assert spec["selector"].items() <= pod_labels.items()
            assert {p["targetPort"] for p in spec["ports"]} <= port_names.keys()
        elif obj["kind"] in {"PodDisruptionBudget", "NetworkPolicy"}:
            key = "selector" if obj["kind"] == "PodDisruptionBudget" else "podSelector"
            assert spec[key]["matchLabels"].items() <= pod_labels.items()
        elif obj["kind"] == "HorizontalPodAutoscaler":
            target = spec["scaleTargetRef"]
            assert (target["kind"], target["name"]) == (
                "Deployment",
                deployment["metadata"]["name"],
            )
        if obj["kind"] == "NetworkPolicy":
            for rule in spec["ingress"]:
                assert {p["port"] for p in rule["ports"]} <= port_names.keys()
    # Each probe asks a port the container declares (a gRPC probe takes a number only).
    own = {p["name"]: p["containerPort"] for p in server["ports"]}
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        action = server[probe]
        if "grpc" in action:
            assert action["grpc"]["port"] in own.values(), probe
        else:
            assert action["tcpSocket"]["port"] in own, probe


def strip_helm_labels(obj: Any) -> Any:
    """A copy of an object without Helm's own labels, for comparing with the plain manifests."""
    if isinstance(obj, dict):
        return {k: strip_helm_labels(v) for k, v in obj.items() if k not in HELM_ONLY_LABELS}
    if isinstance(obj, list):
        return [strip_helm_labels(v) for v in obj]
    return obj


@dataclass(frozen=True)
class Instruction:
    """One Dockerfile instruction: its keyword (upper case) and the raw rest of the line."""

    keyword: str
    args: str


@dataclass(frozen=True)
class Stage:
    """One build stage: its base, its name and its instructions after FROM."""

    base: str
    name: str
    instructions: tuple[Instruction, ...]

    def all(self, keyword: str) -> list[str]:
        """The arguments of every instruction with this keyword."""
        return [i.args for i in self.instructions if i.keyword == keyword]


def parse_dockerfile(text: str) -> tuple[dict[str, str], list[Stage]]:
    """Global ARG defaults and the stages, with line continuations joined."""
    logical: list[str] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1].rstrip() + " "
            continue
        logical.append(pending + line)
        pending = ""
    assert not pending, "dangling line continuation"

    global_args: dict[str, str] = {}
    stages: list[Stage] = []
    current: list[Instruction] | None = None
    for line in logical:
        keyword, _, args = line.partition(" ")
        keyword = keyword.upper()
        args = args.strip()
        if keyword == "FROM":
            words = args.split()
            base = words[0]
            name = words[2] if len(words) == 3 and words[1].upper() == "AS" else str(len(stages))
            current = []
            stages.append(Stage(base=base, name=name, instructions=()))
        elif current is None:
            assert keyword == "ARG", f"{keyword} before the first FROM"
            name, _, default = args.partition("=")
            global_args[name] = default
        else:
            current.append(Instruction(keyword, args))
            stages[-1] = Stage(stages[-1].base, stages[-1].name, tuple(current))
    return global_args, stages


def copy_parts(args: str) -> tuple[dict[str, str], list[str], str]:
    """A COPY's --flags, its sources and its destination (shell or JSON form)."""
    words = json.loads(args) if args.startswith("[") else shlex.split(args)
    flags = {}
    while words and words[0].startswith("--"):
        flag, _, value = words.pop(0)[2:].partition("=")
        flags[flag] = value
    assert len(words) >= 2, f"COPY needs a source and a destination: {args}"
    return flags, words[:-1], words[-1]


def ignore_pattern(pattern: str) -> re.Pattern[str]:
    """A .dockerignore pattern as a regex over slash-separated context paths."""
    out = ""
    i = 0
    pattern = pattern.strip("/")
    while i < len(pattern):
        if pattern.startswith("**", i):
            out += ".*"
            i += 2
        elif pattern[i] == "*":
            out += "[^/]*"
            i += 1
        elif pattern[i] == "?":
            out += "[^/]"
            i += 1
        else:
            out += re.escape(pattern[i])
            i += 1
    # A pattern that matches a directory also covers everything below it.
    return re.compile(f"^{out}(?:/.*)?$")


def is_ignored(path: str, rules: list[tuple[bool, re.Pattern[str]]]) -> bool:
    """Docker's rule: the last matching pattern wins, '!' patterns re-include."""
    ignored = False
    for include, regex in rules:
        if regex.match(path):
            ignored = not include
    return ignored


def ignore_rules() -> list[tuple[bool, re.Pattern[str]]]:
    """The rules of the root .dockerignore, in order."""
    rules = []
    for raw in DOCKERIGNORE.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        include = line.startswith("!")
        rules.append((include, ignore_pattern(line.lstrip("!"))))
    return rules


def context_files(root: Path = REPO) -> list[str]:
    """Every file of the working tree that the build context keeps, relative and sorted."""
    rules = ignore_rules()
    kept = []
    for path in root.rglob("*"):
        relative = path.relative_to(root).as_posix()
        if path.is_file() and not path.is_symlink() and not is_ignored(relative, rules):
            kept.append(relative)
    return sorted(kept)


def build_stage_sources() -> list[str]:
    """The context paths the Dockerfile's first stage COPYs, in order."""
    _, stages = parse_dockerfile(DOCKERFILE.read_text())
    sources: list[str] = []
    for args in stages[0].all("COPY"):
        flags, paths, _ = copy_parts(args)
        if "from" not in flags:
            sources.extend(path.rstrip("/") for path in paths)
    return sources


def copy_build_sources(destination: Path) -> list[str]:
    """Copy what the build stage copies from the context into `destination`, as docker would
    (ignored files left out); return the files copied, relative."""
    rules = ignore_rules()
    copied = []
    for source in build_stage_sources():
        origin = REPO / source
        paths = [origin] if origin.is_file() else sorted(p for p in origin.rglob("*"))
        for path in paths:
            relative = path.relative_to(REPO).as_posix()
            if path.is_file() and not is_ignored(relative, rules):
                target = destination / relative
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(path, target)
                copied.append(relative)
    return copied


@dataclass(frozen=True)
class Pin:
    """One locked package: its version, the hashes allowed for its files and its marker."""

    version: str
    hashes: frozenset[str]
    marker: str | None
    via: frozenset[str]
    """What asked for it: other pins by name, or the input (e.g. "basra-rules (pyproject.toml)")."""


def read_lock(path: Path) -> tuple[str, dict[str, Pin]]:
    """The command recorded in a lock's header, and its pins by canonical name."""
    text = path.read_text()
    header = re.search(r"^#    (uv pip compile .*)$", text, re.MULTILINE)
    assert header, f"{path.name} does not say which command wrote it"
    pins: dict[str, Pin] = {}
    # One entry: "name==version [; marker] \" then "--hash=..." lines, then "# via" comments.
    for entry in re.split(r"\n(?=[A-Za-z0-9])", text.split("\n", 2)[2]):
        lines = [line.strip() for line in entry.splitlines() if line.strip()]
        if not lines or lines[0].startswith("#"):
            continue
        requirement = Requirement(lines[0].rstrip("\\").strip())
        (specifier,) = requirement.specifier
        assert specifier.operator == "==", f"{path.name}: {lines[0]} is not pinned"
        hashes = frozenset(
            line.removeprefix("--hash=sha256:").rstrip("\\").strip()
            for line in lines[1:]
            if line.startswith("--hash=")
        )
        name = canonicalize_name(requirement.name)
        assert name not in pins, f"{path.name} pins {name} twice"
        marker = str(requirement.marker) if requirement.marker else None
        comments = [line.removeprefix("#").strip() for line in lines if line.startswith("#")]
        via = [c.removeprefix("via").strip() for c in comments if c.startswith("via")]
        via += [c for c in comments if not c.startswith("via")]
        pins[name] = Pin(specifier.version, hashes, marker, frozenset(v for v in via if v))
    return header.group(1), pins
