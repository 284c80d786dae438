"""Prometheus for real: Debian's prometheus scrapes the release's pods on the cluster as an
operator's would (testkit/prometheus_on_cluster.py: targets from the EndpointSlices of the
Service's port `metrics`, relabelled to namespace, service, pod and release), loads the chart's
rule file, and answers what the pods counted.

The release is the session's default install (2 pods x 2 workers). Scrapes and rule
evaluations run every 2 s for the tests' speed. The shedding alert is read from the chart's
rule file by name (SHEDDING_ALERT) and its expression evaluated through the query API: its
`for:` (minutes) is not waited out; the rule's own evaluation is seen as the alert turning
pending.

The module's Prometheus starts empty, so every `[5m]` window below holds this module's traffic
only; the light load runs before the heavy one. The last test kills a worker of a pod, for the
alert on workers replaced.
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Iterator
from typing import Any

import pytest
from basra.v1 import rules_pb2 as pb
from google.protobuf import json_format

from service.handlers import Handlers
from service.outcomes import Facts
from testkit import ghz_tool
from testkit import prometheus_on_cluster as prom
from testkit.chart_on_cluster import RULES_SERVICE, Release, workers
from testkit.deployment import REPO

pytestmark = pytest.mark.timeout(600)

GHZ_DATA = REPO / "deploy" / "ghz" / "data"
# Workers write their counts every second; a scrape every 2 s: a few seconds settle them.
SETTLE_SECONDS = 30.0


@pytest.fixture(scope="module")
def prometheus(release: Release) -> Iterator[prom.Prometheus]:
    """Prometheus in the node, scraping every basra-rules Service's `metrics` port."""
    why = prom.unavailable()
    if why is not None:
        pytest.fail(f"Prometheus cannot run: {why}")
    with prom.started(release.cluster) as running:
        yield running


def _ghz(target: str, *arguments: str, timeout: float = 120.0) -> dict[str, Any]:
    """ghz's JSON report of one run against `target` (host:port)."""
    run = ghz_tool.ghz(["--insecure", "-O", "json", *arguments, target], timeout=timeout)
    return run.report()


def _first_request(name: str) -> dict[str, Any]:
    """The first request of a deploy/ghz data file."""
    requests = json.loads((GHZ_DATA / name).read_text())
    assert isinstance(requests, list) and isinstance(requests[0], dict)
    return requests[0]


def _plans_per_call(method: str, request: dict[str, Any]) -> int:
    """Observations one call with this request adds to basra_plan_generation_seconds: the
    service's own handlers, in process, counting each time they time a card's plans (one per
    card of the hand to move after NewMatch and Apply, in LegalMoves; none in SuggestMove,
    whose bot plans on its own)."""
    observed: list[float] = []
    handlers = Handlers(observe_plan_seconds=observed.append)
    if method == "Apply":
        handlers.apply(json_format.ParseDict(request, pb.ApplyRequest()), Facts())
    elif method == "LegalMoves":
        handlers.legal_moves(json_format.ParseDict(request, pb.LegalMovesRequest()), Facts())
    elif method == "SuggestMove":
        handlers.suggest_move(json_format.ParseDict(request, pb.SuggestMoveRequest()), Facts())
    else:
        raise ValueError(method)
    return len(observed)


def test_every_pod_is_scraped_through_the_services_metrics_port(
    release: Release, prometheus: prom.Prometheus
) -> None:
    """The Service publishes the metrics port as `metrics`; Prometheus, from its
    EndpointSlices, scrapes every pod (up == 1 each), labels the series with namespace,
    service, pod and release, and evaluates the chart's rules without error."""
    (port,) = [
        p for p in release.get("service", release.name)["spec"]["ports"] if p["name"] == "metrics"
    ]
    assert port["port"] == 9464 and port["targetPort"] == "metrics"
    pods = {p["metadata"]["name"] for p in release.wait_ready(2)}
    up = prometheus.wait(
        "every pod scraped",
        lambda: (
            (found := prometheus.scraped_pods(release.namespace)).keys() == pods
            and set(found.values()) == {1.0}
            and found
        ),
        60,
    )
    assert up == dict.fromkeys(pods, 1.0)
    for sample in prometheus.query(f'up{{namespace="{release.namespace}"}}'):
        labels = sample["metric"]
        assert labels["service"] == labels["release"] == release.name, labels
        assert labels["instance"].endswith(":9464") and labels["job"] == "basra-rules", labels
    limits = prometheus.values(
        f'sum by (pod) (basra_calls_held_limit{{namespace="{release.namespace}"}})', "pod"
    )
    assert limits == {(pod,): 2 * 64.0 for pod in pods}, "two workers' admission bounds a pod"
    groups = prometheus.api("rules")["groups"]
    rules = [r for g in groups for r in g["rules"]]
    assert rules and all(r["health"] == "ok" for r in rules), rules
    assert prom.SHEDDING_ALERT in {r["name"] for r in rules}


def test_at_light_load_the_shedding_alert_does_not_fire(
    release: Release, prometheus: prom.Prometheus
) -> None:
    """SuggestMove at 25 calls a second through the Service, all answered: the traffic shows
    in Prometheus, and the shedding alert's expression returns nothing (its ratio, where the
    refusal series exist, is below the threshold); the alert is not pending."""
    expression = prom.rule(prom.SHEDDING_ALERT)["expr"]
    ratio, threshold = prom.split_threshold(expression)
    started = (
        f'sum(grpc_server_handled_total{{namespace="{release.namespace}",'
        f'grpc_service="{RULES_SERVICE}"}})'
    )
    before = prom.sample_value(prometheus.query(started)) or 0.0
    report = _ghz(
        release.target(),
        "--config",
        str(REPO / "deploy" / "ghz" / "suggest_move.json"),
        "--rps",
        "25",
        "-n",
        "150",
        "-c",
        "4",
        "--connections",
        "4",
    )
    assert report["statusCodeDistribution"] == {"OK": 150}, report["statusCodeDistribution"]
    prometheus.wait(
        "the light load's 150 calls in Prometheus",
        lambda: (prom.sample_value(prometheus.query(started)) or 0.0) - before == 150,
        SETTLE_SECONDS,
    )
    arrived = prom.sample_value(
        prometheus.query(
            f'sum(rate(grpc_server_started_total{{grpc_service="{RULES_SERVICE}"}}[5m]))'
        )
    )
    assert arrived is not None and arrived > 0
    assert prometheus.query(expression) == [], prometheus.query(ratio)
    shed = prom.sample_value(prometheus.query(ratio))
    assert shed is None or shed <= threshold, shed
    time.sleep(4)  # two rule evaluations
    firing = [
        a
        for a in prometheus.api("alerts")["alerts"]
        if a["labels"]["alertname"] == prom.SHEDDING_ALERT
    ]
    assert firing == []


def test_under_4x_load_through_the_service_the_shedding_alert_fires(
    release: Release, prometheus: prom.Prometheus
) -> None:
    """ghz's SuggestMove from 400 callers over 40 connections for 10 s, 1 s deadlines (several
    times what the two pods answer): the shedding alert's expression returns a value over its
    threshold, and the rule, evaluated by Prometheus, turns the alert pending (its `for:` is
    not waited out). The server's OVERLOADED count agrees with the callers'
    RESOURCE_EXHAUSTED."""
    expression = prom.rule(prom.SHEDDING_ALERT)["expr"]
    _, threshold = prom.split_threshold(expression)
    overloaded = (
        f'sum(basra_refusals_total{{namespace="{release.namespace}",reason="OVERLOADED"}})'
        " or vector(0)"
    )
    before = prom.sample_value(prometheus.query(overloaded)) or 0.0
    report = _ghz(
        release.target(),
        "--config",
        str(REPO / "deploy" / "ghz" / "suggest_move.json"),
        "-c",
        "400",
        "--connections",
        "40",
        "-z",
        "10s",
        # The calls in flight at the end finish and count as what they were, not as errors.
        "--duration-stop",
        "wait",
        "--timeout",
        "1s",
    )
    codes = report["statusCodeDistribution"]
    refused = codes.get("ResourceExhausted", 0) + codes.get("Canceled", 0)
    assert codes.get("OK", 0) > 0 and refused / report["count"] > threshold, codes
    value = prometheus.wait(
        "the shedding alert's expression returning a value",
        lambda: prom.sample_value(prometheus.query(expression)),
        SETTLE_SECONDS,
    )
    assert value > threshold
    pending = prometheus.wait(
        "the shedding alert pending",
        lambda: [
            a
            for a in prometheus.api("alerts")["alerts"]
            if a["labels"]["alertname"] == prom.SHEDDING_ALERT
        ],
        SETTLE_SECONDS,
    )
    assert pending[0]["state"] in {"pending", "firing"}
    counted = prometheus.wait(
        "the OVERLOADED refusals settled",
        lambda: _settled(prometheus, overloaded),
        SETTLE_SECONDS,
    )
    server = counted - before
    callers = codes.get("ResourceExhausted", 0)
    print(f"4x: callers {codes}; server OVERLOADED {server:.0f}; shedding ratio {value:.3f}")
    # A refusal is counted when it is sent; a caller whose deadline passed meanwhile saw
    # DEADLINE_EXCEEDED instead, so the server may count a few more than callers saw.
    assert callers <= server <= callers + codes.get("DeadlineExceeded", 0) + 0.02 * callers


def _settled(prometheus: prom.Prometheus, expression: str) -> float | None:
    """The expression's one value once two scrapes apart agree (workers flush every second)."""
    first = prom.sample_value(prometheus.query(expression))
    time.sleep(4.5)
    second = prom.sample_value(prometheus.query(expression))
    return second if first == second and second is not None else None


def _by_pod(prometheus: prom.Prometheus, namespace: str) -> dict[tuple[str, str], float]:
    """RulesService calls by (pod, method), and plan-generation observations as
    (pod, "plans"), as Prometheus scraped them."""
    calls = prometheus.values(
        f'sum by (pod, grpc_method) (grpc_server_handled_total{{namespace="{namespace}",'
        f'grpc_service="{RULES_SERVICE}"}})',
        "pod",
        "grpc_method",
    )
    plans = prometheus.values(
        f'sum by (pod) (basra_plan_generation_seconds_count{{namespace="{namespace}"}})', "pod"
    )
    found = {(pod, method): value for (pod, method), value in calls.items()}
    found.update({(pod, "plans"): value for (pod,), value in plans.items()})
    return found


def test_each_pods_counters_and_plan_histogram_agree_with_its_callers(
    release: Release, prometheus: prom.Prometheus
) -> None:
    """ghz calls each pod on its own address, a different known number of Apply, LegalMoves
    and SuggestMove calls each (one request repeated, all OK). Each pod's
    grpc_server_handled_total by method, summed over its workers by its /metrics and scraped
    by Prometheus, grew by exactly its callers' counts; its basra_plan_generation_seconds_count
    by exactly the calls' plan generations (the service's handlers, run in process on the same
    requests, time one generation per card of the hand to move in Apply's answer and in
    LegalMoves, none in SuggestMove); and the workers' own counter files add up to what
    Prometheus scraped."""
    requests = {
        "Apply": _first_request("apply.json"),
        "LegalMoves": _first_request("legal_moves.json"),
        "SuggestMove": _first_request("suggest_move.json"),
    }
    plans = {method: _plans_per_call(method, request) for method, request in requests.items()}
    assert plans["Apply"] > 0 and plans["LegalMoves"] > 0 and plans["SuggestMove"] == 0
    pods = release.ready_pods()
    before = prometheus.wait(
        "the counters settled before",
        lambda: _stable(prometheus, release.namespace),
        SETTLE_SECONDS,
    )
    expected: dict[tuple[str, str], float] = {}
    for index, pod in enumerate(pods):
        name, address = pod["metadata"]["name"], pod["status"]["podIP"]
        counts = {
            "Apply": 300 + 100 * index,
            "LegalMoves": 200 + 50 * index,
            "SuggestMove": 40 + 10 * index,
        }
        for method, count in counts.items():
            report = _ghz(
                f"{address}:50051",
                "--call",
                f"{RULES_SERVICE}.{method}",
                "-d",
                json.dumps(requests[method]),
                "-n",
                str(count),
                "-c",
                "8",
                "--connections",
                "4",
                "--timeout",
                "5s",
            )
            assert report["statusCodeDistribution"] == {"OK": count}, (name, method, report)
            key = (name, method)
            expected[key] = before.get(key, 0.0) + count
        grown_plans = sum(counts[m] * plans[m] for m in counts)
        expected[(name, "plans")] = before.get((name, "plans"), 0.0) + grown_plans

    def grown() -> dict[tuple[str, str], float] | None:
        now = _stable(prometheus, release.namespace)
        return now if now and all(now.get(k) == v for k, v in expected.items()) else None

    after = prometheus.wait("each pod's counts as its callers counted", grown, SETTLE_SECONDS * 2)
    assert {k: after.get(k) for k in expected} == expected
    for pod in pods:
        name = pod["metadata"]["name"]
        for method in requests:
            in_files = sum(release.worker_calls(pod, method).values())
            assert in_files == after[(name, method)], (
                name,
                method,
                release.worker_calls(pod, method),
            )


def _stable(prometheus: prom.Prometheus, namespace: str) -> dict[tuple[str, str], float] | None:
    """The per-pod counts once two looks three scrapes apart agree."""
    first = _by_pod(prometheus, namespace)
    time.sleep(6.5)
    second = _by_pod(prometheus, namespace)
    return second if first == second and second else None


def test_a_worker_that_died_in_a_pod_fires_the_workers_replaced_alert(
    release: Release, prometheus: prom.Prometheus
) -> None:
    """SIGKILL, from the host, on one worker of one pod: its supervisor replaces it, and the
    chart's BasraWorkersReplaced alert, evaluated by Prometheus on the scraped series, fires
    naming that pod and reason `died`, and no other pod."""
    pods = release.wait_ready(2)
    victim_pod = pods[0]
    name = victim_pod["metadata"]["name"]
    replaced = (
        f'basra_workers_replaced_total{{namespace="{release.namespace}",pod="{name}",'
        f'reason="died"}}'
    )
    # A sample from before the kill, so that the window's increase sees it.
    scraped = prometheus.wait(
        "the pod's replacement count scraped", lambda: prometheus.query(replaced), SETTLE_SECONDS
    )
    before = prom.sample_value(scraped)
    assert before is not None, scraped
    found = workers(victim_pod)
    assert len(found) == 2, found
    os.kill(min(found), signal.SIGKILL)
    release.cluster.wait("a new worker in its place", lambda: len(workers(victim_pod)) == 2, 30)

    def firing() -> list[dict[str, str]] | None:
        alerts = [
            a["labels"]
            for a in prometheus.api("alerts")["alerts"]
            if a["labels"]["alertname"] == prom.WORKERS_REPLACED_ALERT and a["state"] == "firing"
        ]
        return alerts or None

    (labels,) = prometheus.wait("the alert firing", firing, SETTLE_SECONDS)
    assert (labels["namespace"], labels["pod"], labels["reason"]) == (
        release.namespace,
        name,
        "died",
    ), labels
    assert prom.sample_value(prometheus.query(replaced)) == before + 1
