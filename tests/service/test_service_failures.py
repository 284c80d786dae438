"""A bug of ours shows as one: INTERNAL to the caller, a traceback in the log, a count, a span."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from basra.v1 import rules_pb2 as pb
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from service.config import Config
from service.errors import INTERNAL_MESSAGE
from service.handlers import Handlers
from service.outcomes import Facts
from testkit.calls import (
    REPO,
    InProcess,
    grpc_testing_caller,
    start_server,
    traced_server,
)

SEED = b"a seed for a broken server"
BUG = "a secret the caller must not read"
TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
TRACE_ID = "0af7651916cd43dd8448eb211c80319c"


def _boom(seconds: float) -> None:
    raise KeyError(BUG)


BROKEN = Handlers(observe_plan_seconds=_boom)


@pytest.fixture
def broken() -> Iterator[tuple[InProcess, InMemorySpanExporter]]:
    """An in-process server whose NewMatch fails (its plan timing raises), tracing to memory."""
    with traced_server(Config(), BROKEN) as traced:
        yield traced


def _span(exporter: InMemorySpanExporter, timeout: float = 10.0) -> ReadableSpan:
    deadline = time.monotonic() + timeout
    while not exporter.get_finished_spans():
        assert time.monotonic() < deadline, "no span finished"
        time.sleep(0.01)
    (span,) = exporter.get_finished_spans()
    return span


def test_an_unanticipated_exception_ends_the_call_internal_and_leaves_every_trace(
    broken: tuple[InProcess, InMemorySpanExporter],
) -> None:
    """INTERNAL with a message naming nothing internal; an error line with the traceback and
    the request id; counted INTERNAL; the span marked Error with the exception's type."""
    server, exporter = broken
    new_match = server.channel.unary_unary(
        "/basra.v1.RulesService/NewMatch",
        request_serializer=pb.NewMatchRequest.SerializeToString,
        response_deserializer=pb.NewMatchResponse.FromString,
    )
    metadata = (("x-request-id", "req-bug"), ("traceparent", TRACEPARENT))
    with pytest.raises(grpc.RpcError) as raised:
        new_match(pb.NewMatchRequest(seed=SEED), metadata=metadata, timeout=10)
    error = raised.value
    assert error.code() is grpc.StatusCode.INTERNAL
    assert error.details() == INTERNAL_MESSAGE
    details = str(error.details())
    assert BUG not in details and "KeyError" not in details

    (line,) = [line for line in server.log_lines() if line["event"] == "rpc"]
    assert (line["level"], line["code"], line["reason"]) == ("error", "INTERNAL", None)
    assert line["request_id"] == "req-bug" and line["trace_id"] == TRACE_ID
    assert line["exception"].startswith("Traceback (most recent call last):")
    assert "_boom" in line["exception"] and f"KeyError: '{BUG}'" in line["exception"]

    server.tally.flush()
    labels = {"grpc_type": "UNARY", "grpc_service": "basra.v1.RulesService", "transport": "grpc"}
    handled = server.registry.get_sample_value(
        "grpc_server_handled_total", {**labels, "grpc_method": "NewMatch", "grpc_code": "INTERNAL"}
    )
    assert handled == 1

    span = _span(exporter)
    assert span.status.status_code is StatusCode.ERROR
    assert dict(span.attributes or {})["rpc.grpc.status_code"] == grpc.StatusCode.INTERNAL.value[0]
    (event,) = span.events
    attributes = dict(event.attributes or {})
    assert (event.name, attributes["exception.type"]) == ("exception", "KeyError")
    assert "_boom" in str(attributes["exception.stacktrace"])
    assert BUG not in str(attributes)  # the message stays in the log


def test_without_a_server_the_servicer_ends_a_failure_internal_too() -> None:
    """Through grpc_testing (the servicer alone, no observer): the same status."""
    outcome = grpc_testing_caller(BROKEN)("NewMatch", pb.NewMatchRequest(seed=SEED))
    assert outcome.code is grpc.StatusCode.INTERNAL
    assert outcome.details == INTERNAL_MESSAGE


def test_the_published_retry_policy_never_retries_a_failure() -> None:
    """The same request would fail the same way: INTERNAL (and UNKNOWN) are not retried."""
    config = json.loads((REPO / "deploy/grpc-service-config.json").read_text())
    for method in config["methodConfig"]:
        codes = set(method["retryPolicy"]["retryableStatusCodes"])
        assert codes.isdisjoint({"INTERNAL", "UNKNOWN"}), codes


def _failing_batch(server: InProcess, metadata: tuple[tuple[str, str], ...]) -> Any:
    """A batch of one Apply that fails on BROKEN's handlers (its plan timing raises)."""
    begun = pb.NewMatchResponse.FromString(
        Handlers().new_match(pb.NewMatchRequest(seed=SEED), Facts())
    )
    move = begun.legal_moves.moves[0]
    action = pb.Action(seat=begun.legal_moves.seat, card=move.card)
    if move.plans:
        action.plan_id = move.plans[0].id
    batch = server.channel.unary_unary(
        "/basra.v1.RulesService/BatchApply",
        request_serializer=pb.BatchApplyRequest.SerializeToString,
        response_deserializer=pb.BatchApplyResponse.FromString,
    )
    request = pb.BatchApplyRequest(requests=[pb.ApplyRequest(state=begun.state, action=action)])
    return batch(request, metadata=metadata, timeout=10)


def test_a_batch_item_that_fails_ends_internal_and_is_logged_with_its_traceback() -> None:
    """In a batch, the item's status is INTERNAL; an error line carries its traceback and the
    call's request id; the batch's line counts it under INTERNAL."""
    server = start_server(Config(), BROKEN)
    try:
        answer = _failing_batch(server, (("x-request-id", "req-batch"),))
    finally:
        server.close()
    (result,) = answer.results
    assert result.status.code == grpc.StatusCode.INTERNAL.value[0]
    assert result.status.message == INTERNAL_MESSAGE
    lines = server.log_lines()
    (failed,) = [line for line in lines if line["event"] == "batch item failed"]
    assert (failed["level"], failed["request_id"]) == ("error", "req-batch")
    assert f"KeyError: '{BUG}'" in failed["exception"]
    (call,) = [line for line in lines if line.get("method") == "basra.v1.RulesService/BatchApply"]
    assert (call["code"], call["outcomes"]) == ("OK", {"INTERNAL": 1})


def test_a_batch_item_that_fails_leaves_its_calls_span_ok_and_its_line_in_the_trace(
    broken: tuple[InProcess, InMemorySpanExporter],
) -> None:
    """The call ended OK: its span says code 0, status Unset, no exception event; the item's
    error line carries the call's trace id, the call's line counts the item INTERNAL."""
    server, exporter = broken
    answer = _failing_batch(server, (("traceparent", TRACEPARENT),))
    (result,) = answer.results
    assert result.status.code == grpc.StatusCode.INTERNAL.value[0]
    span = _span(exporter)
    assert span.status.status_code is StatusCode.UNSET
    assert dict(span.attributes or {})["rpc.grpc.status_code"] == grpc.StatusCode.OK.value[0]
    assert not span.events
    lines = server.log_lines()
    (failed,) = [line for line in lines if line["event"] == "batch item failed"]
    assert (failed["level"], failed["trace_id"]) == ("error", TRACE_ID)
    assert failed["span_id"] == format(span.context.span_id, "016x")
    (call,) = [line for line in lines if line["event"] == "rpc"]
    assert (call["code"], call["outcomes"], call["trace_id"]) == ("OK", {"INTERNAL": 1}, TRACE_ID)
