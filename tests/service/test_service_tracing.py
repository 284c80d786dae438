"""OpenTelemetry tracing: server spans under the caller's trace, their ids in the log lines.

In process, spans go to an in-memory exporter; through `basra-rules serve --workers 2` they go
by OTLP/gRPC to a real receiver on loopback (testkit.otlp), configured by the standard OTEL_*
variables only. Spans carry the RPC, its status code, a refusal's reason, seq and seat, and
never a card or the seed.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import grpc
import pytest
from basra.v1 import rules_pb2 as pb
from basra.v1 import rules_pb2_grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

import engine
from clients.refusals import error_infos
from service.config import Config
from service.interceptors import CallKind, CallObserver, MethodObserver
from service.logs import make_logger
from service.server import build_server
from service.tracing import Tracing
from testkit import harness, otlp
from testkit.calls import REPO, InProcess, traced_server
from testkit.ports import reserved_port

SEED = b"Zq81-seed-of-a-traced-match"
EVERY_CARD = frozenset(engine.codes(range(52)))
APPLY = "/basra.v1.RulesService/Apply"
RULES = "basra.v1.RulesService"


def traceparent(sampled: bool = True) -> tuple[str, str, tuple[tuple[str, str], ...]]:
    """A fresh caller's trace id and span id, and the call metadata that carries them."""
    trace_id, parent_id = secrets.token_hex(16), secrets.token_hex(8)
    header = f"00-{trace_id}-{parent_id}-{'01' if sampled else '00'}"
    return trace_id, parent_id, (("traceparent", header),)


def metadata_trace(metadata: tuple[tuple[str, str], ...]) -> str:
    """The trace id of a traceparent in call metadata."""
    return dict(metadata)["traceparent"].split("-")[1]


def assert_no_card_or_seed(values: Iterable[Any], seed: bytes) -> None:
    """No value is or holds a card code (as a word of its text), the seed, or its hex."""
    for value in values:
        text = str(value)
        assert not EVERY_CARD & set(re.split(r"[^0-9A-Za-z]+", text)), text
        assert seed.decode() not in text and seed.hex() not in text, text


def new_match(channel: grpc.Channel, metadata: Any, seed: bytes = SEED) -> pb.NewMatchResponse:
    """NewMatch over `channel` with the given metadata."""
    stub = rules_pb2_grpc.RulesServiceStub(channel)  # type: ignore[no-untyped-call]
    reply: pb.NewMatchResponse = stub.NewMatch(
        pb.NewMatchRequest(seed=seed), metadata=metadata, timeout=10
    )
    return reply


def apply(channel: grpc.Channel, request: pb.ApplyRequest, metadata: Any) -> grpc.RpcError | None:
    """Apply over `channel`; return the error of a refused call (None when answered)."""
    stub = rules_pb2_grpc.RulesServiceStub(channel)  # type: ignore[no-untyped-call]
    try:
        stub.Apply(request, metadata=metadata, timeout=10)
    except grpc.RpcError as error:
        return error
    return None


def legal_apply(state: pb.State) -> pb.ApplyRequest:
    """An Apply of the first card of the seat to move (legal: it trails or has one plan)."""
    seat = state.to_move
    for card in state.seats[seat].hand:
        request = pb.ApplyRequest(state=state, action=pb.Action(seat=seat, card=card))
        return request
    raise AssertionError("no card in hand")


def out_of_turn(state: pb.State) -> pb.ApplyRequest:
    """An Apply by the seat that is not to move: refused, NOT_YOUR_TURN."""
    other = 1 - state.to_move
    card = state.seats[other].hand[0]
    return pb.ApplyRequest(state=state, action=pb.Action(seat=other, card=card))


# ---- in process: spans to memory ----


@pytest.fixture
def traced() -> Iterator[tuple[InProcess, InMemorySpanExporter]]:
    """An in-process server, tracing into memory."""
    with traced_server(Config()) as traced_one:
        yield traced_one


def finished(
    server: InProcess, exporter: InMemorySpanExporter, trace_id: str, timeout: float = 10.0
) -> tuple[ReadableSpan, dict[str, Any]]:
    """Wait (bounded in time) for the one span of a trace and its call's log line."""
    deadline = time.monotonic() + timeout
    while True:
        spans = [
            s
            for s in exporter.get_finished_spans()
            if format(s.context.trace_id, "032x") == trace_id
        ]
        lines = [line for line in server.log_lines() if line.get("trace_id") == trace_id]
        if spans and lines:
            (span,), (line,) = spans, lines
            return span, line
        if time.monotonic() > deadline:
            raise TimeoutError(f"no finished span and log line of trace {trace_id}")
        time.sleep(0.01)


def test_a_rules_call_gets_a_server_span_under_the_callers_trace(
    traced: tuple[InProcess, InMemorySpanExporter],
) -> None:
    """The span's parent is the caller's span; it names the RPC, its code and seq; the call's
    log line carries the span's ids."""
    server, exporter = traced
    trace_id, parent_id, metadata = traceparent()
    new_match(server.channel, metadata)
    span, line = finished(server, exporter, trace_id)
    assert span.kind is SpanKind.SERVER
    assert span.name == "/basra.v1.RulesService/NewMatch"
    assert span.parent is not None and format(span.parent.span_id, "016x") == parent_id
    attributes = dict(span.attributes or {})
    assert attributes["rpc.system"] == "grpc"
    assert (attributes["rpc.service"], attributes["rpc.method"]) == (RULES, "NewMatch")
    assert attributes["rpc.grpc.status_code"] == grpc.StatusCode.OK.value[0]
    assert attributes["basra.seq"] == 0 and "basra.seat" not in attributes
    assert "basra.reason" not in attributes and span.status.status_code is StatusCode.UNSET
    assert line["event"] == "rpc" and line["method"] == f"{RULES}/NewMatch"
    assert line["span_id"] == format(span.context.span_id, "016x")
    assert line["trace_sampled"] is True


def test_a_refusal_span_carries_its_code_and_reason(
    traced: tuple[InProcess, InMemorySpanExporter],
) -> None:
    """Refusals (sent with abort_with_status) give the span their gRPC code and ErrorInfo
    reason; status stays Unset: the caller erred, not the server."""
    server, exporter = traced
    state = new_match(server.channel, ()).state
    stale = legal_apply(state)
    stale.expected_seq = state.seq + 5
    trace_id, _, metadata = traceparent()
    error = apply(server.channel, stale, metadata)
    assert error is not None and error.code() is grpc.StatusCode.ABORTED
    malformed_trace, _, malformed_metadata = traceparent()
    raw = server.channel.unary_unary(APPLY, None, None)
    with pytest.raises(grpc.RpcError) as raised:
        raw(b"\xff\xff", metadata=malformed_metadata, timeout=10)
    (info,) = error_infos(raised.value.trailing_metadata())
    expected = {
        trace_id: (grpc.StatusCode.ABORTED, "SEQ_MISMATCH"),
        malformed_trace: (grpc.StatusCode.INVALID_ARGUMENT, info.reason),
    }
    for trace, (code, reason) in expected.items():
        span, line = finished(server, exporter, trace)
        attributes = dict(span.attributes or {})
        assert attributes["rpc.grpc.status_code"] == code.value[0]
        assert attributes["basra.reason"] == reason
        assert span.status.status_code is StatusCode.UNSET
        assert span.events == ()  # no stack trace of grpc's abort, no refusal sentence
        assert (line["code"], line["reason"]) == (code.name, reason)
        assert line["span_id"] == format(span.context.span_id, "016x")
    span, _ = finished(server, exporter, trace_id)
    assert dict(span.attributes or {})["basra.seat"] == state.to_move


def test_health_and_reflection_calls_get_no_span(
    traced: tuple[InProcess, InMemorySpanExporter],
) -> None:
    """Probes would drown the traces: only RulesService calls are traced."""
    server, exporter = traced
    _, _, metadata = traceparent()
    health = health_pb2_grpc.HealthStub(server.channel)
    health.Check(health_pb2.HealthCheckRequest(), metadata=metadata, timeout=10)
    new_match(server.channel, metadata)
    finished(server, exporter, metadata_trace(metadata))
    assert [span.name for span in exporter.get_finished_spans()] == [
        "/basra.v1.RulesService/NewMatch"
    ]


class _CountingObserver(CallObserver):
    """A CallObserver that counts how often a method's observer is built."""

    def method(self, kind: CallKind) -> MethodObserver:
        BUILT.append(kind.grpc_method)
        return super().method(kind)


BUILT: list[str] = []


def test_with_tracing_each_methods_observer_is_still_built_once() -> None:
    """The instrumentation's interceptor sits outside the servicer, which builds each method's
    observer once: ten traced calls, one observer of NewMatch built."""
    exporter = InMemorySpanExporter()
    tracing = Tracing.start(make_logger("warning"), SimpleSpanProcessor(exporter))
    observer = _CountingObserver(None, make_logger("warning"), tracing)
    BUILT.clear()
    server = build_server(Config(host="127.0.0.1"), observer, 0)
    server.start()
    try:
        with grpc.insecure_channel(f"127.0.0.1:{server.port}") as channel:
            for _ in range(10):
                new_match(channel, traceparent()[2])
    finally:
        server.stop(0)
        tracing.stop()
    assert BUILT.count("NewMatch") == 1
    assert len(exporter.get_finished_spans()) == 10


def test_with_tracing_off_opentelemetry_is_not_even_imported() -> None:
    """A server built and called with the default configuration imports no OpenTelemetry."""
    script = textwrap.dedent(
        """
        import sys
        import grpc
        from basra.v1 import rules_pb2 as pb, rules_pb2_grpc
        from service import cli, workers
        from service.config import Config
        from service.interceptors import CallObserver
        from service.logs import make_logger
        from service.server import build_server

        server = build_server(Config(host="127.0.0.1"), CallObserver(None, make_logger()), 0)
        server.start()
        with grpc.insecure_channel(f"127.0.0.1:{server.port}") as channel:
            rules_pb2_grpc.RulesServiceStub(channel).NewMatch(pb.NewMatchRequest(), timeout=10)
        server.stop(0)
        loaded = sorted(m for m in sys.modules if m.startswith("opentelemetry"))
        print("loaded:", loaded)
        sys.exit(1 if loaded else 0)
        """
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    done = subprocess.run(
        [sys.executable, "-c", script],
        check=False,
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "loaded: []" in done.stdout


# ---- basra-rules serve --workers 2, exporting by OTLP to a real receiver ----


def serve_env(receiver: otlp.Receiver, **more: str) -> dict[str, str]:
    """This environment without its OTEL_* variables, pointed at `receiver` by the standard ones."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env.update(
        {
            "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
            "OTEL_SERVICE_NAME": "basra-rules-under-test",
            "OTEL_TRACES_SAMPLER": "parentbased_always_on",
            "OTEL_BSP_SCHEDULE_DELAY": "100",
        }
    )
    env.update(more)
    return env


def spans_of(receiver: otlp.Receiver, trace_ids: Iterable[str]) -> dict[str, otlp.ReceivedSpan]:
    """Wait for one span of each trace id; return them by trace id."""
    wanted = set(trace_ids)
    found = receiver.wait_for(lambda s: s.trace_id in wanted, count=len(wanted))
    by_trace = {span.trace_id: span for span in found}
    assert len(by_trace) == len(found) == len(wanted)
    return by_trace


def check_log_line(server: harness.ServedProcess, span: otlp.ReceivedSpan) -> dict[str, Any]:
    """The call's log line names the span's trace and span ids, and the worker that sent it."""
    (line,) = server.find("rpc", trace_id=span.trace_id)
    assert line["span_id"] == span.span_id and line["trace_sampled"] is True
    assert line["worker"] == span.resource["process.pid"]
    return line


# How long to keep calling until both workers of a two-worker server have answered.
BOTH_WORKERS_SECONDS = 60.0


def test_spans_reach_a_real_collector_with_the_callers_trace_through_two_workers() -> None:
    """Every worker exports its own spans: the callers' trace ids and parents, the RPC, code,
    reason, seq and seat, the service name from OTEL_SERVICE_NAME, no card and no seed; each
    log line carries its span's ids."""
    with otlp.receiving() as receiver:
        server = harness.start(
            ["--workers", "2", "--tracing"], env=serve_env(receiver), inherit_env=False
        )
        try:
            # One connection per call: SO_REUSEPORT spreads connections over the workers that
            # are listening. On a busy machine the second may bind a while after the first
            # serves, and log lines arrive late: go on until both have answered, by a deadline.
            parents: dict[str, str] = {}
            states: list[pb.State] = []
            deadline = time.monotonic() + BOTH_WORKERS_SECONDS
            while len(states) < 8 or (
                len({line["worker"] for line in server.find("rpc")}) < 2
                and time.monotonic() < deadline
            ):
                trace_id, parent_id, metadata = traceparent()
                parents[trace_id] = parent_id
                with grpc.insecure_channel(server.target) as channel:
                    states.append(new_match(channel, metadata, SEED + bytes([len(states)])).state)
            state = states[0]
            calls: dict[str, tuple[pb.ApplyRequest, grpc.StatusCode, str | None]] = {}
            with grpc.insecure_channel(server.target) as channel:
                for request, code, reason in (
                    (legal_apply(state), grpc.StatusCode.OK, None),
                    (out_of_turn(state), grpc.StatusCode.FAILED_PRECONDITION, "NOT_YOUR_TURN"),
                ):
                    trace_id, parent_id, metadata = traceparent()
                    parents[trace_id] = parent_id
                    error = apply(channel, request, metadata)
                    assert (error.code() if error else grpc.StatusCode.OK) is code
                    calls[trace_id] = (request, code, reason)
            spans = spans_of(receiver, parents)
        finally:
            workers = set(server.workers())
            server.stop()
    assert len(workers) == 2
    assert {span.resource["process.pid"] for span in spans.values()} == workers
    for trace_id, span in spans.items():
        assert span.parent_span_id == parents[trace_id]
        assert span.kind == otlp.SERVER and span.name.startswith(f"/{RULES}/")
        assert span.attributes["rpc.system"] == "grpc"
        assert span.attributes["rpc.service"] == RULES
        assert span.resource["service.name"] == "basra-rules-under-test"
        assert span.status_code == otlp.STATUS_UNSET and span.events == ()
        line = check_log_line(server, span)
        assert line["seq"] == span.attributes["basra.seq"]
        assert_no_card_or_seed(span.values(), SEED)
    for trace_id, (request, code, reason) in calls.items():
        attributes = spans[trace_id].attributes
        assert attributes["rpc.method"] == "Apply"
        assert attributes["rpc.grpc.status_code"] == code.value[0]
        assert attributes.get("basra.reason") == reason
        assert attributes["basra.seat"] == request.action.seat
        assert attributes["basra.seq"] == request.state.seq


def test_an_unsampled_callers_call_sends_no_span_but_logs_its_trace_id() -> None:
    """The default sampler follows the caller: a traceparent flagged unsampled sends no span,
    yet the log line still joins the caller's trace (trace_sampled false)."""
    with otlp.receiving() as receiver:
        env = serve_env(receiver)
        del env["OTEL_TRACES_SAMPLER"]  # the SDK's default: parent-based, always on
        server = harness.start(["--tracing"], env=env, inherit_env=False)
        try:
            unsampled, _, quiet = traceparent(sampled=False)
            sampled, _, loud = traceparent()
            with grpc.insecure_channel(server.target) as channel:
                new_match(channel, quiet)
                new_match(channel, loud)
            # One worker, one queue in call order: once the second span is in, the first
            # would be too.
            spans_of(receiver, [sampled])
            assert [s for s in receiver.spans() if s.trace_id == unsampled] == []
            (line,) = server.find("rpc", trace_id=unsampled)
            assert line["trace_sampled"] is False and len(line["span_id"]) == 16
        finally:
            server.stop()


def test_spans_still_queued_are_sent_when_the_server_stops() -> None:
    """SIGTERM: each worker drains its calls, then sends the spans it still holds before it
    exits (here the batch delay is ten minutes, so only the stop can send them)."""
    with otlp.receiving() as receiver:
        env = serve_env(receiver, OTEL_BSP_SCHEDULE_DELAY="600000")
        flags = ["--workers", "2", "--tracing"]
        server = harness.start(flags, env=env, inherit_env=False)
        trace_ids = []
        try:
            for _ in range(6):
                trace_id, _, metadata = traceparent()
                trace_ids.append(trace_id)
                with grpc.insecure_channel(server.target) as channel:
                    new_match(channel, metadata)
        finally:
            assert server.stop() == 0
        received = {span.trace_id for span in receiver.spans()}
    assert received == set(trace_ids)


def test_with_tracing_off_nothing_is_sent_and_log_lines_carry_no_ids() -> None:
    """The OTEL_* variables alone turn nothing on: without --tracing the collector hears
    nothing, even after the workers stopped, and the log lines have no trace fields."""
    with otlp.receiving() as receiver:
        flags = ["--workers", "2"]
        server = harness.start(flags, env=serve_env(receiver), inherit_env=False)
        try:
            for _ in range(4):
                with grpc.insecure_channel(server.target) as channel:
                    state = new_match(channel, traceparent()[2]).state
                    apply(channel, out_of_turn(state), traceparent()[2])
        finally:
            assert server.stop() == 0
        assert receiver.spans() == []
    lines = server.find("rpc")
    assert len(lines) == 8
    assert not [line for line in lines if {"trace_id", "span_id"} & line.keys()]


def test_with_the_sdk_disabled_lines_claim_no_span_and_nothing_is_sent() -> None:
    """OTEL_SDK_DISABLED=true with --tracing: no span is made or sent, a warning line says so,
    and a call's line carries its caller's trace id alone, no span id and no sampled flag
    (the caller's own span id and flag would otherwise pass for the server's)."""
    with otlp.receiving() as receiver:
        env = serve_env(receiver, OTEL_SDK_DISABLED="true")
        server = harness.start(["--tracing"], env=env, inherit_env=False)
        try:
            trace_id, parent_id, metadata = traceparent()
            with grpc.insecure_channel(server.target) as channel:
                new_match(channel, metadata)
                new_match(channel, ())
            warning = server.wait_for("tracing")
        finally:
            assert server.stop() == 0
        assert receiver.spans() == []
    assert "OTEL_SDK_DISABLED" in warning["message"]
    traced, untraced = server.find("rpc", method=f"{RULES}/NewMatch")
    assert traced["trace_id"] == trace_id
    assert not {"span_id", "trace_sampled"} & traced.keys()
    assert parent_id not in json.dumps(traced)
    assert not {"trace_id", "span_id", "trace_sampled"} & untraced.keys()


def test_an_unreachable_collector_is_a_warning_line_and_holds_neither_calls_nor_the_stop() -> None:
    """Spans for a collector nobody serves: calls are answered as ever, the exporter's
    complaint is a JSON log line (event "tracing"), and SIGTERM still ends the server in time,
    giving up the spans it cannot send."""
    with otlp.receiving() as receiver, reserved_port() as closed:
        env = serve_env(receiver, OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{closed}")
        server = harness.start(["--tracing", "--grace-seconds", "1"], env=env, inherit_env=False)
        try:
            with grpc.insecure_channel(server.target) as channel:
                for _ in range(3):
                    assert new_match(channel, traceparent()[2]).state.seq == 0
            complaint = server.wait_for("tracing")
        finally:
            assert server.stop(timeout=1 + 5 + 10) == 0
    assert complaint["level"] in ("warning", "error")
    assert complaint["logger"].startswith("opentelemetry")
    assert str(closed) in complaint["message"]
    assert receiver.spans() == []


def test_the_receiver_sees_every_value_a_span_carries() -> None:
    """The card-and-seed check reads names, attributes, events and the resource alike, so a
    card in any of them would be caught."""
    span = otlp.ReceivedSpan(
        trace_id="0" * 32,
        span_id="1" * 16,
        parent_span_id="",
        name="n",
        kind=otlp.SERVER,
        attributes={"a": 1},
        status_code=otlp.STATUS_UNSET,
        status_message="",
        events=(("e", {"card": "10D"}),),
        resource={"service.name": "s"},
    )
    with pytest.raises(AssertionError):
        assert_no_card_or_seed(span.values(), SEED)
    leaked: Mapping[str, Any] = {"x": f"seed {SEED.hex()}"}
    with pytest.raises(AssertionError):
        assert_no_card_or_seed(leaked.values(), SEED)
    assert_no_card_or_seed(["grpc-python/1.85 grpc-c/53.0.0", 127, "127.0.0.1"], SEED)
