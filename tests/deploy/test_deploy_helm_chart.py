"""The Helm chart, linted and rendered offline by the real Helm library (helm-python-sdk)."""

from __future__ import annotations

import base64
import copy
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import helm_python as helm
import kubernetes_validate
import pytest
import yaml

from testkit.deployment import (
    ALL_ON,
    CHART_DIR,
    CHART_OVERRIDES,
    CONTRACT_DEFAULTS,
    HEALTH_SERVICE,
    KUBE_VERSIONS,
    NAMESPACE,
    RELEASE,
    REPO,
    TEST_SIGNING_KEYS,
    check_references,
    container,
    env_map,
    manifests,
    one,
    render,
    validate_objects,
)

DEFAULT_KINDS = [
    "Deployment",
    "HorizontalPodAutoscaler",
    "PodDisruptionBudget",
    "Service",
    "ServiceAccount",
]
OPTIONAL_KINDS = ["NetworkPolicy", "Secret", "Service", "ServiceMonitor"]


@pytest.fixture(scope="module")
def default_objects() -> list[dict[str, Any]]:
    """The chart rendered with its default values."""
    return manifests(render())


@pytest.fixture(scope="module")
def all_on_objects() -> list[dict[str, Any]]:
    """The chart rendered with every optional part switched on."""
    return manifests(render(ALL_ON))


def merged(*layers: Mapping[str, Any]) -> dict[str, Any]:
    """Deep-merge value layers, later ones winning (as repeated -f files do)."""
    out: dict[str, Any] = {}
    for layer in layers:
        for key, value in layer.items():
            if isinstance(value, Mapping) and isinstance(out.get(key), dict):
                out[key] = merged(out[key], value)
            else:
                out[key] = copy.deepcopy(value)
    return out


def error_messages(report: Mapping[str, Any]) -> list[str]:
    """Lint findings at warning level or worse."""
    return [m["error"] for m in report["messages"] if m["severity"] >= 2] + list(report["errors"])


@pytest.mark.parametrize("values", [{}, ALL_ON], ids=["defaults", "all-on"])
def test_chart_lints_clean_in_strict_mode(values: Mapping[str, Any]) -> None:
    """helm lint --strict finds nothing beyond info level."""
    report = helm.lint(CHART_DIR, dict(values), strict=True, kube_version=f"v{KUBE_VERSIONS[0]}")
    assert report["total_charts_linted"] == 1
    assert error_messages(report) == []


def test_lint_reports_values_the_schema_refuses() -> None:
    """Lint is not blind: bad values show up as errors in its report."""
    report = helm.lint(CHART_DIR, {"server": {"workers": 0}})
    assert any("/server/workers" in message for message in error_messages(report))


@pytest.mark.parametrize("version", KUBE_VERSIONS)
def test_default_render_validates(default_objects: list[dict[str, Any]], version: str) -> None:
    """Every default object passes the strict Kubernetes schema of this version."""
    assert sorted(validate_objects(default_objects, version)) == DEFAULT_KINDS
    check_references(default_objects)


@pytest.mark.parametrize("version", KUBE_VERSIONS)
def test_all_on_render_validates(all_on_objects: list[dict[str, Any]], version: str) -> None:
    """With every option on, each object validates (ServiceMonitor structurally: it is a CRD)."""
    kinds = validate_objects(all_on_objects, version)
    assert sorted(kinds) == sorted(DEFAULT_KINDS + OPTIONAL_KINDS)
    check_references(all_on_objects)


def test_validation_catches_a_broken_object(default_objects: list[dict[str, Any]]) -> None:
    """The validator in use does refuse an unknown field (so a pass above means something)."""
    deployment = copy.deepcopy(one(default_objects, "Deployment"))
    deployment["spec"]["template"]["spec"]["containers"][0]["livenessProbe"]["grpc"]["host"] = "x"
    with pytest.raises(kubernetes_validate.ValidationError):
        validate_objects([deployment], KUBE_VERSIONS[0])


def test_probes_are_native_grpc_on_the_health_service(
    default_objects: list[dict[str, Any]],
) -> None:
    """On the health port, startup and liveness ask for the whole server, readiness for the
    rules service."""
    server = container(default_objects)
    assert server["startupProbe"]["grpc"] == {"port": 8081, "service": ""}
    assert server["livenessProbe"]["grpc"] == {"port": 8081, "service": ""}
    assert server["readinessProbe"]["grpc"] == {"port": 8081, "service": HEALTH_SERVICE}
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        assert 0 < server[probe]["timeoutSeconds"] <= server[probe]["periodSeconds"]


def test_ports_and_services(default_objects: list[dict[str, Any]]) -> None:
    """Container and Service ports are named, the gRPC one with appProtocol grpc."""
    server = container(default_objects)
    assert {(p["name"], p["containerPort"]) for p in server["ports"]} == {
        ("grpc", 50051),
        ("metrics", 9464),
        ("health", 8081),
    }
    service = one(default_objects, "Service")
    assert service["metadata"]["name"] == RELEASE
    assert service["spec"]["type"] == "ClusterIP"
    ports = {p["name"]: p for p in service["spec"]["ports"]}
    assert ports["grpc"]["port"] == 50051
    assert ports["grpc"]["appProtocol"] == "grpc"
    assert ports["grpc"]["targetPort"] == "grpc"
    assert ports["metrics"]["port"] == 9464
    assert ports["metrics"]["targetPort"] == "metrics"
    # Only the kubelet asks the health port, at the pod's own address: no Service publishes it.
    assert "health" not in ports


def test_env_matches_the_server_defaults(default_objects: list[dict[str, Any]]) -> None:
    """Each BASRA_* value is the server's default, except the documented chart overrides."""
    env = env_map(container(default_objects))
    expected = {**CONTRACT_DEFAULTS, **CHART_OVERRIDES}
    assert env == expected


def test_no_signing_or_tls_variables_by_default(default_objects: list[dict[str, Any]]) -> None:
    """Signing and TLS are off unless switched on."""
    names = {e["name"] for e in container(default_objects)["env"]}
    assert not {n for n in names if n.startswith(("BASRA_SIGNING", "BASRA_TLS"))}


def test_workers_match_the_cpu_limit(default_objects: list[dict[str, Any]]) -> None:
    """One worker process per CPU of the limit; requests and limits both set."""
    server = container(default_objects)
    resources = server["resources"]
    assert set(resources) == {"requests", "limits"}
    assert {"cpu", "memory"} <= resources["requests"].keys()
    assert {"cpu", "memory"} <= resources["limits"].keys()
    assert int(env_map(server)["BASRA_WORKERS"]) == int(resources["limits"]["cpu"])


def test_security_context_is_locked_down(default_objects: list[dict[str, Any]]) -> None:
    """Non-root, read-only root, no escalation, no capabilities, runtime seccomp profile."""
    pod = one(default_objects, "Deployment")["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] > 0
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert pod["automountServiceAccountToken"] is False
    context = container(default_objects)["securityContext"]
    assert context["runAsNonRoot"] is True
    assert context["readOnlyRootFilesystem"] is True
    assert context["allowPrivilegeEscalation"] is False
    assert context["privileged"] is False
    assert context["capabilities"] == {"drop": ["ALL"]}
    assert context["seccompProfile"] == {"type": "RuntimeDefault"}


def test_writable_dirs_are_empty_dirs(default_objects: list[dict[str, Any]]) -> None:
    """The metrics directory and /tmp, the only places the server writes, are emptyDirs."""
    pod = one(default_objects, "Deployment")["spec"]["template"]["spec"]
    server = container(default_objects)
    volumes = {v["name"]: v for v in pod["volumes"]}
    mounts = {m["mountPath"]: m["name"] for m in server["volumeMounts"]}
    for path in (env_map(server)["BASRA_METRICS_DIR"], "/tmp"):
        assert "emptyDir" in volumes[mounts[path]], path
        assert volumes[mounts[path]]["emptyDir"]["sizeLimit"]


def pre_stop_seconds(server: Mapping[str, Any]) -> int:
    """The preStop pause, from either the native sleep handler or a /bin/sleep exec."""
    handler = server["lifecycle"]["preStop"]
    if "sleep" in handler:
        return int(handler["sleep"]["seconds"])
    command = handler["exec"]["command"]
    assert command[0] == "/bin/sleep"
    return int(command[1])


@pytest.mark.parametrize("mode", ["sleep", "exec"])
def test_grace_period_covers_pre_stop_and_server_grace(mode: str) -> None:
    """The kubelet waits longer than the preStop pause plus the server's own grace period."""
    objects = manifests(render({"lifecycle": {"preStopMode": mode}}))
    pod = one(objects, "Deployment")["spec"]["template"]["spec"]
    server = container(objects)
    pause = pre_stop_seconds(server)
    assert pause > 0
    grace = int(env_map(server)["BASRA_GRACE_SECONDS"])
    assert pod["terminationGracePeriodSeconds"] > grace + pause


def test_hpa_scales_the_deployment_on_cpu(default_objects: list[dict[str, Any]]) -> None:
    """autoscaling/v2 on CPU utilisation; the Deployment starts with minReplicas (a render
    reads no cluster: an upgrade keeps the autoscaler's count, tests/cluster shows)."""
    hpa = one(default_objects, "HorizontalPodAutoscaler")
    assert hpa["apiVersion"] == "autoscaling/v2"
    (metric,) = hpa["spec"]["metrics"]
    assert metric["resource"]["name"] == "cpu"
    assert metric["resource"]["target"]["type"] == "Utilization"
    assert 0 < metric["resource"]["target"]["averageUtilization"] <= 100
    assert 2 <= hpa["spec"]["minReplicas"] <= hpa["spec"]["maxReplicas"]
    assert one(default_objects, "Deployment")["spec"]["replicas"] == hpa["spec"]["minReplicas"]


def test_fixed_replicas_without_hpa() -> None:
    """With autoscaling off, the Deployment carries replicaCount and no HPA is made."""
    objects = manifests(render({"autoscaling": {"enabled": False}, "replicaCount": 3}))
    assert one(objects, "Deployment")["spec"]["replicas"] == 3
    assert not [o for o in objects if o["kind"] == "HorizontalPodAutoscaler"]


def test_pdb_keeps_capacity(default_objects: list[dict[str, Any]]) -> None:
    """The default budget lets one pod go at a time; minAvailable is the alternative."""
    assert one(default_objects, "PodDisruptionBudget")["spec"]["maxUnavailable"] == 1
    objects = manifests(
        render({"podDisruptionBudget": {"maxUnavailable": None, "minAvailable": "50%"}})
    )
    spec = one(objects, "PodDisruptionBudget")["spec"]
    assert spec["minAvailable"] == "50%"
    assert "maxUnavailable" not in spec


def test_rollout_never_drops_capacity(default_objects: list[dict[str, Any]]) -> None:
    """Rolling updates add a pod before removing one."""
    strategy = one(default_objects, "Deployment")["spec"]["strategy"]
    assert strategy["rollingUpdate"]["maxUnavailable"] == 0


def test_headless_service_for_round_robin(all_on_objects: list[dict[str, Any]]) -> None:
    """The headless Service has no cluster IP, lists ready pods only and speaks grpc."""
    headless = one(all_on_objects, "Service", f"{RELEASE}-headless")
    assert headless["spec"]["clusterIP"] == "None"
    assert headless["spec"]["publishNotReadyAddresses"] is False
    (port,) = headless["spec"]["ports"]
    assert (port["name"], port["port"], port["appProtocol"]) == ("grpc", 50051, "grpc")


def test_max_connection_age_is_wired_to_env() -> None:
    """Connection-age values reach the server's variables."""
    values = {"server": {"maxConnectionAgeSeconds": 120, "maxConnectionAgeGraceSeconds": 15}}
    env = env_map(container(manifests(render(values))))
    assert env["BASRA_MAX_CONNECTION_AGE_SECONDS"] == "120"
    assert env["BASRA_MAX_CONNECTION_AGE_GRACE_SECONDS"] == "15"


def test_every_server_value_reaches_its_variable() -> None:
    """Non-default server values come through unchanged (large numbers not in float form)."""
    values = {
        "server": {
            "host": "0.0.0.0",
            "port": 6000,
            "metricsPort": 6001,
            "healthPort": 6002,
            "workers": 4,
            "logLevel": "debug",
            "logFormat": "console",
            "maxMessageBytes": 4194304,
            "reflection": False,
            "graceSeconds": 20,
            "planWorkLimit": 5000000,
            "maxReplayActions": 20000,
            "botLevel": "greedy",
            "botMaxDeals": 128,
            "botMaxNodes": 5000000,
            "metricsDir": "/var/run/m",
        },
        "terminationGracePeriodSeconds": 40,
    }
    objects = manifests(render(values))
    server = container(objects)
    env = env_map(server)
    assert env["BASRA_HOST"] == "0.0.0.0"
    assert env["BASRA_PORT"] == "6000"
    assert env["BASRA_METRICS_PORT"] == "6001"
    assert env["BASRA_HEALTH_PORT"] == "6002"
    assert env["BASRA_WORKERS"] == "4"
    assert env["BASRA_LOG_LEVEL"] == "debug"
    assert env["BASRA_LOG_FORMAT"] == "console"
    assert env["BASRA_MAX_MESSAGE_BYTES"] == "4194304"
    assert env["BASRA_REFLECTION"] == "false"
    assert env["BASRA_GRACE_SECONDS"] == "20"
    assert env["BASRA_PLAN_WORK_LIMIT"] == "5000000"
    assert env["BASRA_MAX_REPLAY_ACTIONS"] == "20000"
    assert env["BASRA_BOT_LEVEL"] == "greedy"
    assert env["BASRA_BOT_MAX_DEALS"] == "128"
    assert env["BASRA_BOT_MAX_NODES"] == "5000000"
    assert env["BASRA_METRICS_DIR"] == "/var/run/m"
    assert server["readinessProbe"]["grpc"]["port"] == 6002
    assert {p["name"]: p["containerPort"] for p in server["ports"]} == {
        "grpc": 6000,
        "metrics": 6001,
        "health": 6002,
    }
    check_references(objects)


def test_metrics_off_removes_the_metrics_port() -> None:
    """metricsPort 0 turns the exporter off, and no port is published for it."""
    objects = manifests(render({"server": {"metricsPort": 0}}))
    assert [p["name"] for p in container(objects)["ports"]] == ["grpc", "health"]
    assert [p["name"] for p in one(objects, "Service")["spec"]["ports"]] == ["grpc"]
    assert env_map(container(objects))["BASRA_METRICS_PORT"] == "0"


@pytest.mark.parametrize("tls", [False, True], ids=["plaintext", "tls"])
def test_health_port_off_probes_the_grpc_port(tls: bool) -> None:
    """healthPort 0: no health port or variable value but 0; the probes ask the gRPC port, by
    gRPC in plaintext, by TCP with TLS (the kubelet's gRPC probe speaks no TLS)."""
    values: dict[str, Any] = {"server": {"healthPort": 0}}
    if tls:
        values["tls"] = {"enabled": True, "secretName": "basra-tls"}
    objects = manifests(render(values))
    server = container(objects)
    assert env_map(server)["BASRA_HEALTH_PORT"] == "0"
    assert [p["name"] for p in server["ports"]] == ["grpc", "metrics"]
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        if tls:
            assert server[probe]["tcpSocket"] == {"port": "grpc"}
            assert "grpc" not in server[probe]
        else:
            assert server[probe]["grpc"]["port"] == 50051
    check_references(objects)


def test_signing_keys_from_the_chart_made_secret(all_on_objects: list[dict[str, Any]]) -> None:
    """The keys file is mounted read-only from a Secret, in key order (first signs)."""
    server = container(all_on_objects)
    path = env_map(server)["BASRA_SIGNING_KEYS_FILE"]
    secret = one(all_on_objects, "Secret")
    (file_name, content) = next(iter(secret["stringData"].items()))
    assert path.endswith("/" + file_name)
    assert content == ",".join(f"{k['id']}:{k['key']}" for k in TEST_SIGNING_KEYS)
    for key in TEST_SIGNING_KEYS:
        assert len(base64.b64decode(key["key"], validate=True)) >= 16
    mount = next(m for m in server["volumeMounts"] if path.startswith(m["mountPath"] + "/"))
    assert mount["readOnly"] is True
    pod = one(all_on_objects, "Deployment")["spec"]["template"]
    volume = next(v for v in pod["spec"]["volumes"] if v["name"] == mount["name"])
    assert volume["secret"]["secretName"] == secret["metadata"]["name"]
    assert pod["metadata"]["annotations"]["checksum/signing-keys"]


def test_signing_keys_from_an_existing_secret() -> None:
    """With existingSecret the chart mounts it and makes no Secret of its own."""
    objects = manifests(render({"signing": {"enabled": True, "existingSecret": "my-keys"}}))
    assert not [o for o in objects if o["kind"] == "Secret"]
    pod = one(objects, "Deployment")["spec"]["template"]["spec"]
    secrets = [v["secret"]["secretName"] for v in pod["volumes"] if "secret" in v]
    assert secrets == ["my-keys"]
    assert env_map(container(objects))["BASRA_SIGNING_KEYS_FILE"] == (
        "/etc/basra/signing/signing-keys"
    )


def test_tls_mounts_the_certificate_and_probes_the_plaintext_health_port(
    all_on_objects: list[dict[str, Any]],
) -> None:
    """TLS files come from the tls Secret; the probes stay gRPC probes, on the health port,
    which is plaintext whatever the gRPC port speaks (the kubelet's gRPC probe speaks no TLS)."""
    server = container(all_on_objects)
    env = env_map(server)
    assert env["BASRA_TLS_CERT"] == "/etc/basra/tls/tls.crt"
    assert env["BASRA_TLS_KEY"] == "/etc/basra/tls/tls.key"
    assert env["BASRA_TLS_CLIENT_CA"] == "/etc/basra/client-ca/ca.crt"
    pod = one(all_on_objects, "Deployment")["spec"]["template"]["spec"]
    by_name = {v["name"]: v for v in pod["volumes"]}
    assert by_name["tls"]["secret"]["secretName"] == "basra-tls"
    assert {i["key"] for i in by_name["tls"]["secret"]["items"]} == {"tls.crt", "tls.key"}
    # The client CA defaults to the same Secret's ca.crt.
    assert by_name["client-ca"]["secret"]["secretName"] == "basra-tls"
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        assert server[probe]["grpc"]["port"] == 8081
        assert "tcpSocket" not in server[probe]


def test_network_policy_admits_only_the_service_ports(
    all_on_objects: list[dict[str, Any]],
) -> None:
    """Ingress to grpc from the given peers, to metrics from the scrapers; egress to the
    trace collector's port in its peers, and DNS, only."""
    policy = one(all_on_objects, "NetworkPolicy")["spec"]
    assert policy["policyTypes"] == ["Ingress", "Egress"]
    rules = {r["ports"][0]["port"]: r for r in policy["ingress"]}
    assert set(rules) == {"grpc", "metrics"}
    # The health port, from the same peers as gRPC (and the kubelet's probes, from the node).
    assert [p["port"] for p in rules["grpc"]["ports"]] == ["grpc", "health"]
    assert rules["grpc"]["from"] == ALL_ON["networkPolicy"]["grpcFrom"]
    assert rules["metrics"]["from"] == ALL_ON["networkPolicy"]["metricsFrom"]
    collector, dns = policy["egress"]
    assert collector == {
        "ports": [{"port": 4317, "protocol": "TCP"}],
        "to": ALL_ON["networkPolicy"]["collectorTo"],
    }
    assert dns == {"ports": [{"port": 53, "protocol": "UDP"}, {"port": 53, "protocol": "TCP"}]}


def test_denied_egress_without_tracing_allows_nothing_out() -> None:
    """The service calls nothing when it does not trace: denyEgress leaves no egress rule."""
    values = merged(ALL_ON, {"tracing": {"enabled": False}})
    policy = one(manifests(render(values)), "NetworkPolicy")["spec"]
    assert policy["policyTypes"] == ["Ingress", "Egress"]
    assert policy["egress"] == []


def test_tracing_sets_the_standard_opentelemetry_variables(
    all_on_objects: list[dict[str, Any]],
) -> None:
    """tracing.* reach BASRA_TRACING and the OTEL_* variables; the spans name the pod."""
    server = container(all_on_objects)
    env = env_map(server)
    assert env["BASRA_TRACING"] == "true"
    assert env["OTEL_EXPORTER_OTLP_ENDPOINT"] == ALL_ON["tracing"]["endpoint"]
    assert env["OTEL_SERVICE_NAME"] == RELEASE  # the release's full name by default
    assert env["OTEL_TRACES_SAMPLER"] == "parentbased_traceidratio"
    assert env["OTEL_TRACES_SAMPLER_ARG"] == "0.25"
    names = [e["name"] for e in server["env"]]
    # $(VAR) expands only variables defined earlier in the list.
    for variable in ("K8S_POD_NAME", "K8S_NAMESPACE_NAME"):
        assert f"$({variable})" in env["OTEL_RESOURCE_ATTRIBUTES"]
        assert names.index(variable) < names.index("OTEL_RESOURCE_ATTRIBUTES")
    fields = {
        e["name"]: e["valueFrom"]["fieldRef"]["fieldPath"]
        for e in server["env"]
        if "valueFrom" in e
    }
    assert fields == {"K8S_POD_NAME": "metadata.name", "K8S_NAMESPACE_NAME": "metadata.namespace"}
    named = env_map(
        container(manifests(render(merged(ALL_ON, {"tracing": {"serviceName": "rules"}}))))
    )
    assert named["OTEL_SERVICE_NAME"] == "rules"


def test_no_opentelemetry_variables_by_default(default_objects: list[dict[str, Any]]) -> None:
    """Tracing is off unless switched on, and then nothing of it is configured."""
    env = env_map(container(default_objects))
    assert env["BASRA_TRACING"] == "false"
    assert not [name for name in env if name.startswith(("OTEL_", "K8S_"))]


def test_notes_tell_how_to_reach_the_service() -> None:
    """NOTES.txt names the in-cluster address, port-forward, and the headless address."""
    plain = render()[f"{RELEASE}/templates/NOTES.txt"]
    assert f"{RELEASE}.{NAMESPACE}.svc.cluster.local:50051" in plain
    assert f"port-forward service/{RELEASE} 50051:50051" in plain
    assert "grpcurl -plaintext" in plain
    notes = render(ALL_ON)[f"{RELEASE}/templates/NOTES.txt"]
    assert f"dns:///{RELEASE}-headless.{NAMESPACE}.svc.cluster.local:50051" in notes
    assert "round_robin" in notes


def test_values_yaml_matches_the_contract() -> None:
    """values.yaml documents the same defaults the Deployment passes on."""
    values = yaml.safe_load((CHART_DIR / "values.yaml").read_text())
    server = values["server"]
    assert str(server["port"]) == CONTRACT_DEFAULTS["BASRA_PORT"]
    assert str(server["metricsPort"]) == CONTRACT_DEFAULTS["BASRA_METRICS_PORT"]
    assert str(server["healthPort"]) == CHART_OVERRIDES["BASRA_HEALTH_PORT"]
    assert str(server["graceSeconds"]) == CONTRACT_DEFAULTS["BASRA_GRACE_SECONDS"]
    assert values["service"]["port"] == server["port"]
    assert values["service"]["metricsPort"] == server["metricsPort"]


BAD_VALUES: list[tuple[str, dict[str, Any], str]] = [
    ("unknown key", {"replicas": 2}, "additional properties"),
    ("zero workers", {"server": {"workers": 0}}, "/server/workers"),
    ("port out of range", {"server": {"port": 70000}}, "/server/port"),
    ("port as text", {"service": {"port": "grpc"}}, "/service/port"),
    ("bad log level", {"server": {"logLevel": "loud"}}, "/server/logLevel"),
    ("bad log format", {"server": {"logFormat": "xml"}}, "/server/logFormat"),
    ("negative grace", {"server": {"graceSeconds": -1}}, "/server/graceSeconds"),
    ("relative metrics dir", {"server": {"metricsDir": "metrics"}}, "/server/metricsDir"),
    ("root user", {"podSecurityContext": {"runAsUser": 0}}, "/podSecurityContext/runAsUser"),
    ("bad cpu", {"resources": {"limits": {"cpu": "two"}}}, "/resources/limits/cpu"),
    ("bad preStop mode", {"lifecycle": {"preStopMode": "wait"}}, "/lifecycle/preStopMode"),
    ("no preStop pause", {"lifecycle": {"preStopSleepSeconds": 0}}, "preStopSleepSeconds"),
    ("hpa over 100%", {"autoscaling": {"targetCPUUtilizationPercentage": 150}}, "/autoscaling"),
    ("bad interval", {"serviceMonitor": {"interval": "often"}}, "/serviceMonitor/interval"),
    ("bad pull policy", {"image": {"pullPolicy": "Sometimes"}}, "/image/pullPolicy"),
    ("signing without keys", {"signing": {"enabled": True}}, "/signing"),
    (
        "key id with a colon",
        {"signing": {"enabled": True, "keys": [{"id": "a:b", "key": "A" * 24}]}},
        "/signing/keys/0/id",
    ),
    (
        "key not base64",
        {"signing": {"enabled": True, "keys": [{"id": "k", "key": "not base64 at all!!!!!!!"}]}},
        "/signing/keys/0/key",
    ),
    ("tls without secret", {"tls": {"enabled": True}}, "/tls"),
    ("client CA without tls", {"tls": {"clientCA": {"enabled": True}}}, "/tls"),
    ("network peer empty", {"networkPolicy": {"grpcFrom": [{}]}}, "/networkPolicy/grpcFrom"),
    ("tracing without endpoint", {"tracing": {"enabled": True}}, "/tracing"),
    (
        "collector without port",
        {"tracing": {"enabled": True, "endpoint": "http://otel-collector"}},
        "/tracing/endpoint",
    ),
    (
        "collector not a URL",
        {"tracing": {"endpoint": "otel-collector:4317"}},
        "/tracing/endpoint",
    ),
    ("sampler ratio over 1", {"tracing": {"samplerRatio": 1.5}}, "/tracing/samplerRatio"),
    ("sampler ratio as text", {"tracing": {"samplerRatio": "all"}}, "/tracing/samplerRatio"),
    (
        "service name with a comma",
        {"tracing": {"serviceName": "a,b"}},
        "/tracing/serviceName",
    ),
]


@pytest.mark.parametrize(
    ("values", "where"), [(v, w) for _, v, w in BAD_VALUES], ids=[n for n, _, _ in BAD_VALUES]
)
def test_schema_refuses_bad_values(values: dict[str, Any], where: str) -> None:
    """values.schema.json refuses the value, naming where, and rendering refuses it too."""
    with helm.Chart.load(CHART_DIR) as chart:
        with pytest.raises(helm.HelmValuesError) as refused:
            chart.validate_schema(values)
        assert where in str(refused.value)
        with pytest.raises(helm.HelmError):
            chart.render(values, name=RELEASE, namespace=NAMESPACE)


def test_schema_accepts_every_documented_setting() -> None:
    """The all-on values and the chart defaults both pass the schema."""
    with helm.Chart.load(CHART_DIR) as chart:
        chart.validate_schema({})
        chart.validate_schema(dict(ALL_ON))
        chart.validate_schema(merged(chart.values, ALL_ON))


BAD_COMBINATIONS: list[tuple[str, dict[str, Any], str]] = [
    ("grace too short", {"terminationGracePeriodSeconds": 15}, "terminationGracePeriodSeconds"),
    (
        "grace equal to the sum",
        {"terminationGracePeriodSeconds": 25, "server": {"graceSeconds": 20}},
        "terminationGracePeriodSeconds",
    ),
    (
        "min above max replicas",
        {"autoscaling": {"minReplicas": 5, "maxReplicas": 3}},
        "minReplicas",
    ),
    (
        "both PDB bounds",
        {"podDisruptionBudget": {"minAvailable": 1}},
        "exactly one",
    ),
]


@pytest.mark.parametrize(
    ("values", "where"),
    [(v, w) for _, v, w in BAD_COMBINATIONS],
    ids=[n for n, _, _ in BAD_COMBINATIONS],
)
def test_render_refuses_inconsistent_values(values: dict[str, Any], where: str) -> None:
    """Rules across keys, which a schema cannot state, stop the render with a clear message."""
    with pytest.raises(helm.HelmRenderError) as refused:
        render(values)
    assert where in str(refused.value)


def test_packaged_chart_renders_like_the_directory(tmp_path: Path) -> None:
    """helm package keeps every template and file: the archive renders the same objects."""
    archive = helm.package(CHART_DIR, destination=tmp_path)
    with helm.Chart.load(archive) as packaged:
        assert packaged.name == "basra-rules"
        assert {f["name"] for f in packaged.files} >= {"README.md"}
        assert packaged.schema is not None
        rendered = packaged.render(dict(ALL_ON), name=RELEASE, namespace=NAMESPACE)
    assert manifests(rendered) == manifests(render(ALL_ON))


def test_app_version_is_the_project_version(default_objects: list[dict[str, Any]]) -> None:
    """The chart's appVersion, hence the default image tag, is the Python project's version."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    chart = yaml.safe_load((CHART_DIR / "Chart.yaml").read_text())
    assert chart["appVersion"] == project
    assert container(default_objects)["image"] == f"basra-rules:{project}"
