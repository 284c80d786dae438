"""A call over HTTP is observed as the server observes any call, through its one outcome path:
its span continues the HTTP caller's trace (traceparent), its log line and its per-call series
say transport "http", its request id comes through, and its Grpc-Timeout is the deadline the
server's own deadline handling reads (docs/http.md)."""

from __future__ import annotations

import base64
import secrets
import time
from collections.abc import Iterator
from typing import Any

import pytest
from basra.v1 import rules_pb2 as pb
from basra.v1 import rules_pb2_grpc
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from service.config import Config
from testkit.calls import InProcess, traced_server
from testkit.http_gateway import call, gateway

SEED = b"observed over http"
RULES = "basra.v1.RulesService"
WAIT = 10.0


@pytest.fixture(scope="module")
def traced() -> Iterator[tuple[InProcess, InMemorySpanExporter, str]]:
    """An in-process server tracing into memory, and the gateway in front of it."""
    with traced_server(Config()) as (server, exporter), gateway(f"127.0.0.1:{server.port}") as url:
        yield server, exporter, url


def handled(server: InProcess, method: str, transport: str, code: str = "OK") -> float:
    """grpc_server_handled_total of one RulesService method, transport and code."""
    server.tally.flush()
    labels = {"grpc_type": "UNARY", "grpc_service": RULES, "grpc_method": method}
    value = server.registry.get_sample_value(
        "grpc_server_handled_total", {**labels, "transport": transport, "grpc_code": code}
    )
    return 0.0 if value is None else float(value)


def test_an_http_call_continues_the_callers_trace_and_is_counted_and_logged_as_http(
    traced: tuple[InProcess, InMemorySpanExporter, str],
) -> None:
    server, exporter, url = traced
    before = {t: handled(server, "NewMatch", t) for t in ("grpc", "http")}
    trace_id, parent_id = secrets.token_hex(16), secrets.token_hex(8)
    answer = call(
        url,
        "NewMatch",
        {"seed": base64.b64encode(SEED).decode()},
        f"traceparent: 00-{trace_id}-{parent_id}-01",
        "X-Request-Id: req-over-http",
        "Grpc-Timeout: 5S",
    )
    assert answer.status == 200, answer.body
    stub = rules_pb2_grpc.RulesServiceStub(server.channel)  # type: ignore[no-untyped-call]
    stub.NewMatch(pb.NewMatchRequest(seed=SEED), timeout=WAIT)

    spans = [s for s in exporter.get_finished_spans() if s.context.trace_id == int(trace_id, 16)]
    assert len(spans) == 1
    (span,) = spans
    assert span.parent is not None and span.parent.span_id == int(parent_id, 16)
    assert span.name == f"/{RULES}/NewMatch"

    lines = [line for line in server.log_lines() if line.get("event") == "rpc"]
    (by_http,) = [line for line in lines if line.get("trace_id") == trace_id]
    assert by_http["transport"] == "http" and by_http["request_id"] == "req-over-http"
    assert by_http["method"] == f"{RULES}/NewMatch" and by_http["code"] == "OK"
    assert lines[-1]["transport"] == "grpc" and lines[-1]["request_id"] is None

    assert handled(server, "NewMatch", "http") == before["http"] + 1
    assert handled(server, "NewMatch", "grpc") == before["grpc"] + 1


def test_the_grpc_timeout_header_is_the_deadline_the_server_refuses_a_search_by(
    traced: tuple[InProcess, InMemorySpanExporter, str],
) -> None:
    """Once the worker knows how long a search of the largest budget takes, a SuggestMove
    whose Grpc-Timeout cannot cover one is refused up front by the server (DEADLINE_TOO_SHORT),
    with the time left it saw: the header's deadline, less the trip."""
    server, _, url = traced
    started = call(url, "NewMatch", {"seed": base64.b64encode(SEED).decode()}).json()
    state: dict[str, Any] = started["state"]
    request = {
        "state": state,
        "seat": state.get("toMove", 0),
        "level": "BOT_LEVEL_STRONG",
        "budget": {"deals": 64, "nodes": 20_000},
    }
    took = time.monotonic()
    searched = call(url, "SuggestMove", request, "Grpc-Timeout: 20S")
    took = time.monotonic() - took
    assert searched.status == 200, searched.body
    # A quarter of the search's time: too short for a search, long enough for the trip.
    quarter = max(1, round(took * 1000 / 4))
    refused = call(url, "SuggestMove", request, f"Grpc-Timeout: {quarter}m")
    assert refused.status == 504, refused.body
    status = refused.json()
    assert status["code"] == 4  # DEADLINE_EXCEEDED
    (info,) = status["details"]
    assert info["reason"] == "DEADLINE_TOO_SHORT" and info["domain"] == "basra.v1"
    assert 0 <= int(info["metadata"]["secondsLeftMs"]) <= quarter
    assert handled(server, "SuggestMove", "http", "DEADLINE_EXCEEDED") >= 1
