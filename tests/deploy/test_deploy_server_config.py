"""The chart's environment, read by the server's own configuration code."""

from __future__ import annotations

import json
import re
from dataclasses import fields
from typing import Any

import pytest

from service.config import SETTINGS, Config, Setting, env_name, resolve
from testkit.deployment import (
    ALL_ON,
    CHART_DIR,
    CHART_OVERRIDES,
    CONTRACT_DEFAULTS,
    container,
    env_map,
    manifests,
    render,
)


def server_schema() -> dict[str, Any]:
    """The schema of the chart's server.* values, each with its $ref resolved."""
    schema = json.loads((CHART_DIR / "values.schema.json").read_text())
    server: dict[str, Any] = schema["properties"]["server"]["properties"]
    for key, rule in server.items():
        if "$ref" in rule:
            name = rule["$ref"].removeprefix("#/definitions/")
            server[key] = {**schema["definitions"][name], **rule}
    return server


# Settings the chart sets from other values than server.*, or not at all.
ELSEWHERE = {
    "signing_keys": "signing.keys (as the keys file)",
    "signing_keys_file": "signing.enabled",
    "signing_accept_unsigned": "signing.acceptUnsigned",
    "tls_cert": "tls.enabled",
    "tls_key": "tls.enabled",
    "tls_client_ca": "tls.clientCA.enabled",
    "tracing": "tracing.enabled",
}


def _setting_of(key: str) -> Setting:
    """The server setting a server.* value sets (metricsPort: metrics_port)."""
    name = re.sub(r"(?<!^)(?=[A-Z])", "_", key).lower()
    return next(s for s in SETTINGS if s.name == name)


def narrows(chart: dict[str, Any], server: dict[str, Any]) -> list[str]:
    """How a chart value's schema lets through what the server's own would refuse."""
    problems = []
    if "enum" in server and chart.get("enum") != server["enum"]:
        problems.append(f"choices {chart.get('enum')} are not {server['enum']}")
    kinds = {"integer": {"integer"}, "number": {"integer", "number"}}
    wanted = server.get("type")
    if wanted is not None and chart.get("type") not in kinds.get(wanted, {wanted}):
        problems.append(f"type {chart.get('type')} is not {wanted}")
    if "minimum" in server and chart.get("minimum", float("-inf")) < server["minimum"]:
        problems.append(f"minimum {chart.get('minimum')} is below {server['minimum']}")
    if "maximum" in server and chart.get("maximum", float("inf")) > server["maximum"]:
        problems.append(f"maximum {chart.get('maximum')} is above {server['maximum']}")
    if server.get("minLength", 0) > chart.get("minLength", 0) and "pattern" not in chart:
        problems.append("an empty string is let through")
    return problems


def test_every_chart_setting_is_a_server_setting_no_looser_than_the_server() -> None:
    """Each server.* value names its BASRA_* variable and the setting's help, and its schema
    admits no value the server's declaration refuses (it may admit fewer)."""
    schema = server_schema()
    for key, rule in schema.items():
        setting = _setting_of(key)
        assert rule.get("description") == f"{setting.env}: {setting.described}.", key
        assert narrows(rule, setting.parse.schema()) == [], key
    covered = {_setting_of(key).name for key in schema}
    assert covered | ELSEWHERE.keys() == {s.name for s in SETTINGS}
    assert not covered & ELSEWHERE.keys()


@pytest.mark.parametrize(
    ("chart", "server"),
    [
        ({"type": "integer", "minimum": 0}, {"type": "integer", "minimum": 1}),
        ({"type": "integer", "minimum": 1}, {"type": "integer", "minimum": 1, "maximum": 9}),
        ({"enum": ["a"]}, {"enum": ["a", "b"]}),
        ({"type": "number"}, {"type": "integer", "minimum": 0}),
        ({"type": "string"}, {"type": "string", "minLength": 1}),
    ],
)
def test_a_looser_chart_schema_is_found(chart: dict[str, Any], server: dict[str, Any]) -> None:
    """The check above can fail: a lower minimum, no maximum, other choices, another type."""
    assert narrows(chart, server)


def test_contract_defaults_are_the_server_defaults() -> None:
    """The defaults the deployment relies on are the ones the server really has."""
    defaults = Config()
    for field in fields(Config):
        name = env_name(field.name)
        if name not in CONTRACT_DEFAULTS:
            continue
        value = getattr(defaults, field.name)
        expected = resolve({}, {name: CONTRACT_DEFAULTS[name]})
        assert getattr(expected, field.name) == value, name
    assert {env_name(f.name) for f in fields(Config)} >= CONTRACT_DEFAULTS.keys()


@pytest.mark.parametrize("values", [{}, ALL_ON], ids=["defaults", "all-on"])
def test_server_accepts_the_chart_environment(values: dict[str, Any]) -> None:
    """Every BASRA_* value the chart sets parses, and means what the chart intends."""
    env = env_map(container(manifests(render(values))))
    config = resolve({}, env)
    assert config.workers == int(CHART_OVERRIDES["BASRA_WORKERS"])
    assert config.metrics_dir == CHART_OVERRIDES["BASRA_METRICS_DIR"]
    assert config.health_port == int(CHART_OVERRIDES["BASRA_HEALTH_PORT"])
    assert config.tracing is bool(values.get("tracing", {}).get("enabled"))
    untouched = {k for k in CONTRACT_DEFAULTS if k not in CHART_OVERRIDES} - {"BASRA_TRACING"}
    default = Config()
    for field in fields(Config):
        if env_name(field.name) in untouched:
            assert getattr(config, field.name) == getattr(default, field.name), field.name


@pytest.mark.parametrize("bound", ["minimum", "maximum"])
def test_schema_bounds_are_values_the_server_accepts(bound: str) -> None:
    """No number the chart's schema lets through is one the server would refuse at start."""
    schema = server_schema()
    values: dict[str, Any] = {}
    for key, rule in schema.items():
        if rule.get("type") == "integer" and bound in rule:
            values[key] = rule[bound]
    assert {"workers", "maxConnectionAgeSeconds", "graceSeconds"} <= values.keys()
    # Keep the shutdown arithmetic valid whatever the grace bound is.
    chart_values = {
        "server": values,
        "terminationGracePeriodSeconds": int(values.get("graceSeconds", 10)) + 600 + 1,
        "lifecycle": {"preStopSleepSeconds": 600 if bound == "maximum" else 1},
    }
    env = env_map(container(manifests(render(chart_values))))
    config = resolve({}, env)
    assert config.workers == values["workers"]
    assert config.max_connection_age_seconds == values["maxConnectionAgeSeconds"]


def test_the_chart_tracing_variables_mean_to_opentelemetry_what_the_chart_says(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Read by the OpenTelemetry SDK as a worker reads them: the sampler keeps the caller's
    decision and records the configured share of the rest; the resource names the service
    and the pod (as the kubelet expands the $(VAR) references)."""
    from opentelemetry.sdk.trace import TracerProvider

    from service.tracing import resource

    server = container(manifests(render(ALL_ON)))
    pod = {"K8S_POD_NAME": "basra-rules-7d9f-abcde", "K8S_NAMESPACE_NAME": "games"}
    for name, text in env_map(server).items():
        if name.startswith("OTEL_"):
            for variable, given in pod.items():
                text = text.replace(f"$({variable})", given)  # noqa: PLW2901
            monkeypatch.setenv(name, text)
    described = TracerProvider(shutdown_on_exit=False).sampler.get_description()
    assert described.startswith("ParentBased{root:TraceIdRatioBased{0.25},")
    assert "remoteParentSampled:AlwaysOnSampler" in described
    assert "remoteParentNotSampled:AlwaysOffSampler" in described
    attributes = resource().attributes
    assert attributes["service.name"] == "basra-rules"
    assert attributes["k8s.pod.name"] == pod["K8S_POD_NAME"]
    assert attributes["k8s.namespace.name"] == "games"
