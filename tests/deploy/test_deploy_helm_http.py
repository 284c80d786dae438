"""The chart's HTTP/JSON part (http.enabled): the gateway container, its Service port, its
NetworkPolicy rule and its stop timing, rendered offline by the real Helm library.

The gateway is a second container of the pod running the same image's basra-gateway; what it
does with its flags is tests/deploy/test_deploy_image.py's (the image run as the chart runs it)
and tests/cluster/test_cluster_http.py's (through the Service, and a rollout).
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from typing import Any

import helm_python as helm
import pytest

from testkit.deployment import (
    ALL_ON,
    CHART_DIR,
    KUBE_VERSIONS,
    NAMESPACE,
    RELEASE,
    check_references,
    container,
    env_map,
    manifests,
    one,
    render,
    validate_objects,
)

GATEWAY = "/opt/basra-gateway/basra-gateway"
# deploy/grpc-service-config.json, which the image carries beside the gateway.
SERVICE_CONFIG = "/opt/basra-gateway/grpc-service-config.json"
# Every option of the chart that can go with HTTP (TLS cannot: the render refuses it).
HTTP_ON: Mapping[str, Any] = {
    **{k: v for k, v in ALL_ON.items() if k != "tls"},
    "http": {"enabled": True},
    "networkPolicy": {
        **ALL_ON["networkPolicy"],
        "httpFrom": [{"namespaceSelector": {"matchLabels": {"purpose": "web"}}}],
    },
}


@pytest.fixture(scope="module")
def http_objects() -> list[dict[str, Any]]:
    """The chart rendered with HTTP on, beside every other option but TLS."""
    return manifests(render(HTTP_ON))


def flags(gateway: Mapping[str, Any]) -> dict[str, str]:
    """The gateway's --name=value flags, after its binary."""
    command = list(gateway["command"])
    assert command[0] == GATEWAY and "args" not in gateway
    found = {}
    for word in command[1:]:
        name, _, value = word.partition("=")
        assert name.startswith("--") and value, word
        found[name] = value
    return found


def pre_stop_seconds(server: Mapping[str, Any]) -> int:
    """The server's preStop pause: the native sleep handler's, or /bin/sleep's (exec mode)."""
    handler = server["lifecycle"]["preStop"]
    if "sleep" in handler:
        return int(handler["sleep"]["seconds"])
    assert handler["exec"]["command"][0] == "/bin/sleep"
    return int(handler["exec"]["command"][1])


def test_http_is_off_by_default() -> None:
    """Default render: one container, no http port anywhere (the README says why)."""
    objects = manifests(render())
    pod = one(objects, "Deployment")["spec"]["template"]["spec"]
    assert [c["name"] for c in pod["containers"]] == ["server"]
    assert "http" not in {p["name"] for p in one(objects, "Service")["spec"]["ports"]}
    notes = render()[f"{RELEASE}/templates/NOTES.txt"]
    assert "HTTP/JSON" not in notes


def test_lints_clean_with_http_on() -> None:
    """helm lint --strict finds nothing beyond info level with HTTP on."""
    report = helm.lint(CHART_DIR, dict(HTTP_ON), strict=True, kube_version=f"v{KUBE_VERSIONS[0]}")
    assert report["total_charts_linted"] == 1
    found = [m["error"] for m in report["messages"] if m["severity"] >= 2] + report["errors"]
    assert found == []


@pytest.mark.parametrize("version", KUBE_VERSIONS)
def test_http_render_validates(http_objects: list[dict[str, Any]], version: str) -> None:
    """Every object passes the strict Kubernetes schema; Services and the policy name ports
    the pod declares."""
    assert "Deployment" in validate_objects(http_objects, version)
    check_references(http_objects)


def test_the_gateway_runs_the_servers_image_as_locked_down(
    http_objects: list[dict[str, Any]],
) -> None:
    """Same image and pull policy as the server, the same security context, no volume, no
    environment, resources of its own, a port named http."""
    server, gateway = container(http_objects), container(http_objects, "gateway")
    for key in ("image", "imagePullPolicy", "securityContext"):
        assert gateway[key] == server[key], key
    assert gateway["securityContext"]["readOnlyRootFilesystem"] is True
    assert "volumeMounts" not in gateway and "env" not in gateway
    assert gateway["ports"] == [{"name": "http", "containerPort": 8080, "protocol": "TCP"}]
    assert gateway["resources"] == {
        "requests": {"cpu": "100m", "memory": "32Mi"},
        "limits": {"cpu": "1", "memory": "128Mi"},
    }
    pod = one(http_objects, "Deployment")["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsUser"] == 10001


def test_the_gateway_calls_the_server_on_the_pods_loopback(
    http_objects: list[dict[str, Any]],
) -> None:
    """Its flags: every address on the http port, the server's gRPC port on 127.0.0.1 (in
    plaintext: the server's own port, which the chart's TLS would cover) with the published
    service config, the body limit, the drain and the server's log level in the gateway's
    words."""
    server, gateway = container(http_objects), container(http_objects, "gateway")
    assert flags(gateway) == {
        "--listen": ":8080",
        "--backend": f"127.0.0.1:{env_map(server)['BASRA_PORT']}",
        "--service-config": SERVICE_CONFIG,
        "--max-body-bytes": "4194304",
        "--drain-seconds": "3",
        "--log-level": "info",
    }
    values = {
        "http": {"enabled": True, "port": 9090, "maxBodyBytes": 16777216, "drainSeconds": 8},
        "server": {"port": 6000, "logLevel": "warning"},
        "lifecycle": {"preStopSleepSeconds": 10},
        "service": {"httpPort": 80},
        "terminationGracePeriodSeconds": 40,
    }
    objects = manifests(render(values))
    gateway = container(objects, "gateway")
    assert flags(gateway) == {
        "--listen": ":9090",
        "--backend": "127.0.0.1:6000",
        "--service-config": SERVICE_CONFIG,
        "--max-body-bytes": "16777216",
        "--drain-seconds": "8",
        "--log-level": "warn",
    }
    assert gateway["ports"][0]["containerPort"] == 9090
    port = {p["name"]: p for p in one(objects, "Service")["spec"]["ports"]}["http"]
    assert (port["port"], port["targetPort"]) == (80, "http")
    check_references(objects)


def test_the_server_container_and_its_probes_are_unchanged(
    http_objects: list[dict[str, Any]],
) -> None:
    """Turning HTTP on adds a container and changes nothing of the server's: its probes,
    ports, preStop pause and environment are those of the same values without HTTP."""
    without = manifests(render({**HTTP_ON, "http": {"enabled": False}}))
    assert container(http_objects) == container(without)
    gateway = container(http_objects, "gateway")
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        assert probe not in gateway, probe


def test_the_gateway_drains_within_the_servers_pre_stop_pause(
    http_objects: list[dict[str, Any]],
) -> None:
    """No preStop for the gateway (its drain starts at SIGTERM); its drain ends before the
    server's pause does, so every request it took reaches a server still taking calls, and the
    kubelet's grace covers the pause and the server's grace after it."""
    server, gateway = container(http_objects), container(http_objects, "gateway")
    assert "lifecycle" not in gateway
    drain = int(flags(gateway)["--drain-seconds"])
    pause = pre_stop_seconds(server)
    assert 0 < drain < pause
    pod = one(http_objects, "Deployment")["spec"]["template"]["spec"]
    grace = int(env_map(server)["BASRA_GRACE_SECONDS"])
    assert pod["terminationGracePeriodSeconds"] > pause + grace


def test_the_service_publishes_http_by_name(http_objects: list[dict[str, Any]]) -> None:
    """The ClusterIP Service gets a port named http; the headless one (for gRPC clients that
    balance calls themselves) keeps its one gRPC port."""
    service = one(http_objects, "Service", RELEASE)
    ports = {p["name"]: p for p in service["spec"]["ports"]}
    assert set(ports) == {"grpc", "metrics", "http"}
    assert ports["http"] == {
        "name": "http",
        "port": 8080,
        "targetPort": "http",
        "protocol": "TCP",
        "appProtocol": "http",
    }
    assert ports["grpc"]["port"] == 50051
    headless = one(http_objects, "Service", f"{RELEASE}-headless")
    assert [p["name"] for p in headless["spec"]["ports"]] == ["grpc"]


def test_the_network_policy_admits_http_from_its_own_peers(
    http_objects: list[dict[str, Any]],
) -> None:
    """A rule of its own for the http port, from networkPolicy.httpFrom; without peers, any."""
    policy = one(http_objects, "NetworkPolicy")["spec"]
    rules = {r["ports"][0]["port"]: r for r in policy["ingress"]}
    assert set(rules) == {"grpc", "metrics", "http"}
    assert rules["http"] == {
        "ports": [{"port": "http", "protocol": "TCP"}],
        "from": HTTP_ON["networkPolicy"]["httpFrom"],
    }
    assert rules["grpc"]["from"] == ALL_ON["networkPolicy"]["grpcFrom"]
    anyone = manifests(render({"http": {"enabled": True}, "networkPolicy": {"enabled": True}}))
    rules = {r["ports"][0]["port"]: r for r in one(anyone, "NetworkPolicy")["spec"]["ingress"]}
    assert rules["http"] == {"ports": [{"port": "http", "protocol": "TCP"}]}


def test_notes_show_the_http_address_and_a_curl() -> None:
    """NOTES.txt names the in-cluster URL and a curl through port-forward."""
    notes = render({"http": {"enabled": True}})[f"{RELEASE}/templates/NOTES.txt"]
    assert f"http://{RELEASE}.{NAMESPACE}.svc.cluster.local:8080" in notes
    assert f"port-forward service/{RELEASE} 8080:8080" in notes
    (curl,) = [line.strip() for line in notes.splitlines() if line.strip().startswith("curl ")]
    words = shlex.split(curl)
    assert words[-1] == "http://localhost:8080/basra.v1.RulesService/NewMatch"
    assert "Content-Type: application/json" in words
    assert "plus the gateway's 100m CPU, 32Mi" in notes


BAD_HTTP_VALUES: list[tuple[str, dict[str, Any], str]] = [
    ("unknown key", {"http": {"enabled": True, "tls": True}}, "additional properties"),
    ("port out of range", {"http": {"port": 0}}, "/http/port"),
    ("negative drain", {"http": {"drainSeconds": -1}}, "/http/drainSeconds"),
    ("drain as text", {"http": {"drainSeconds": "3s"}}, "/http/drainSeconds"),
    ("tiny body limit", {"http": {"maxBodyBytes": 10}}, "/http/maxBodyBytes"),
    ("bad cpu", {"http": {"resources": {"limits": {"cpu": "one"}}}}, "/http/resources"),
    ("service port as text", {"service": {"httpPort": "http"}}, "/service/httpPort"),
    ("empty peer", {"networkPolicy": {"httpFrom": [{}]}}, "/networkPolicy/httpFrom"),
]


@pytest.mark.parametrize(
    ("values", "where"),
    [(v, w) for _, v, w in BAD_HTTP_VALUES],
    ids=[n for n, _, _ in BAD_HTTP_VALUES],
)
def test_schema_refuses_bad_http_values(values: dict[str, Any], where: str) -> None:
    """values.schema.json refuses the value, naming where."""
    with helm.Chart.load(CHART_DIR) as chart:
        with pytest.raises(helm.HelmValuesError) as refused:
            chart.validate_schema(values)
        assert where in str(refused.value)


BAD_HTTP_COMBINATIONS: list[tuple[str, dict[str, Any], str]] = [
    (
        "drain as long as the pause",
        {"http": {"enabled": True, "drainSeconds": 5}},
        "http.drainSeconds (5) must be less than lifecycle.preStopSleepSeconds (5)",
    ),
    (
        "drain longer than the pause",
        {"http": {"enabled": True, "drainSeconds": 3}, "lifecycle": {"preStopSleepSeconds": 2}},
        "http.drainSeconds (3) must be less than lifecycle.preStopSleepSeconds (2)",
    ),
    (
        "with TLS",
        {"http": {"enabled": True}, "tls": {"enabled": True, "secretName": "basra-tls"}},
        "http.enabled needs tls.enabled false",
    ),
]


@pytest.mark.parametrize(
    ("values", "where"),
    [(v, w) for _, v, w in BAD_HTTP_COMBINATIONS],
    ids=[n for n, _, _ in BAD_HTTP_COMBINATIONS],
)
def test_render_refuses_inconsistent_http_values(values: dict[str, Any], where: str) -> None:
    """Rules across keys stop the render with a clear message; with HTTP off they do not
    apply (the same values render)."""
    with pytest.raises(helm.HelmRenderError) as refused:
        render(values)
    assert where in str(refused.value)
    assert manifests(render({**values, "http": {**values["http"], "enabled": False}}))
