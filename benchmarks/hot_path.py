"""In-process cost of one call: the service's handlers and bookkeeping against the old path.

Run from the repository root, pinned to one core:
    taskset -c 1 .venv/bin/python benchmarks/hot_path.py --repeats 15

Requests are the realistic mid-game ones the load benchmark sends (deploy/ghz/data: Apply,
LegalMoves; PlayerView asks for the seat to move of the same states). Each row times one part
of a call over every request, `--repeats` times, old and new interleaved in each repeat so
that drift hits both alike, and reports the median per call in microseconds. "old" is
benchmarks/reference_path.py (the conversion path and per-call bookkeeping as they were);
"new" is the service as it is. Both run on the same engine, and both write their metrics in
prometheus-client's multiprocess mode, as a worker does, and their log lines to a file.

Rows:
- whole call: request bytes to response bytes through the interceptor (new: the wrapped
  handler a worker runs, its log line and metric updates; old: the same steps of the old path)
- handler: request bytes to response bytes, plan timing on, no log line or call metrics
- read: parse the request and read its state and action into engine values
- rules: engine.check_state, engine.apply and engine.legal_moves (shared by both)
- write: the response's bytes from the engine's results (state, events as each seat sees
  them, legal moves, seed commitment)
- plan observations: one plan-timing observation per card of the seat to move
- call metrics: the per-call updates (started, handled, handling time)
- log line: the interceptor's one line per call
- interceptor: finding the method's handler and wrapping it (old: rebuilt on every call)

With --tracing it measures instead what tracing costs a call, in the same way (rows
interleaved in each repeat, each repeat starting at the next row; medians), on the same
Apply requests, every call going through
the interceptors as grpc calls them (intercept_service, then the wrapped behaviour):
    taskset -c 1 .venv/bin/python benchmarks/hot_path.py --tracing --repeats 15
- absent: the service's interceptor as it was before tracing existed (service/interceptors.py
  of --absent-rev, default 0205e52, read from git), on the same handlers, metrics and logger;
- absent, a second copy: the same code loaded once more, the control: how far two copies of
  identical code measure apart here;
- off: the service as it is, tracing off (the default);
- on, sampled: tracing on, the caller's traceparent sampled: opentelemetry-instrumentation-grpc's
  interceptor outside the service's, a span per call, batched and encoded as OTLP protobuf by
  the exporter's own encoder (only the send is left out: no collector);
- on, unsampled: the same, the caller's traceparent not sampled (the span is not recorded);
- child span: one more span started and ended inside a call's span, what a span around the
  plan generation of a call would cost;
- plan generation: the legal moves of the Apply's answer, one timed plan generation per
  card (what such a child span would measure).
"""

from __future__ import annotations

import argparse
import datetime
import gc
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import types
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

# Multiprocess mode, as every worker runs it: set before prometheus-client is imported.
os.environ.setdefault("PROMETHEUS_MULTIPROC_DIR", tempfile.mkdtemp(prefix="basra-hot-"))

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import grpc  # noqa: E402
import reference_path as old  # noqa: E402
from basra.v1 import rules_pb2 as pb  # noqa: E402
from google.protobuf import json_format  # noqa: E402

import engine  # noqa: E402
from engine.rng import commitment  # noqa: E402
from service import reading, writing  # noqa: E402
from service.config import Config  # noqa: E402
from service.interceptors import CallObserver, ObservingInterceptor  # noqa: E402
from service.logs import make_logger  # noqa: E402
from service.metrics import Metrics, Tally  # noqa: E402
from service.server import make_handlers  # noqa: E402
from service.servicer import SERVICE_NAME, RulesServicer, _reader, add_to_server  # noqa: E402

DATA = ROOT / "deploy" / "ghz" / "data"
# The last commit before tracing existed: --tracing's "absent" runs its interceptor.
ABSENT_REV = "0205e52"


class _Context:
    """The parts of a grpc servicer context that an answered call touches."""

    def __init__(self, metadata: tuple[Any, ...] = ()) -> None:
        self._metadata = metadata

    def code(self) -> None:
        return None

    def trailing_metadata(self) -> tuple[()]:
        return ()

    def invocation_metadata(self) -> tuple[Any, ...]:
        return self._metadata

    def peer(self) -> str:
        return "ipv4:127.0.0.1:50000"


class _Registrar:
    """Collects the method handlers add_to_server registers, as a grpc server would."""

    def __init__(self) -> None:
        self.handlers: dict[str, Any] = {}

    def add_generic_rpc_handlers(self, generic: Sequence[Any]) -> None:
        """Ignored: the registered handlers below are the same."""

    def add_registered_method_handlers(self, service: str, handlers: dict[str, Any]) -> None:
        """Keep the handlers by method name."""
        self.handlers.update(handlers)


def _requests(name: str, kind: type[Any]) -> list[Any]:
    items = json.loads((DATA / name).read_text(encoding="utf-8"))
    return [json_format.ParseDict(item, kind()) for item in items]


def per_call(run: Callable[[Any], object], inputs: Sequence[Any]) -> float:
    """Microseconds per call of `run` over every input, once."""
    started = time.perf_counter()
    for item in inputs:
        run(item)
    return (time.perf_counter() - started) / len(inputs) * 1e6


def main(argv: Sequence[str] | None = None) -> int:
    """Measure every row, old and new interleaved; print a markdown table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--json-out", type=Path, help="also write the figures as JSON")
    parser.add_argument("--tracing", action="store_true", help="what tracing costs (see above)")
    parser.add_argument("--absent-rev", default=ABSENT_REV, help="--tracing: the code before it")
    args = parser.parse_args(argv)
    if args.tracing:
        return tracing_costs(args)

    applies = _requests("apply.json", pb.ApplyRequest)
    apply_bytes = [r.SerializeToString() for r in applies]
    listing = [r.SerializeToString() for r in _requests("legal_moves.json", pb.LegalMovesRequest)]
    views = [
        pb.PlayerViewRequest(state=r.state, seat=r.state.to_move).SerializeToString()
        for r in applies
    ]

    logs = Path(tempfile.mkdtemp(prefix="basra-hot-logs-"))
    old_stream = open(logs / "old.log", "w")  # noqa: SIM115 (open for the whole run)
    new_stream = open(logs / "new.log", "w")  # noqa: SIM115
    old_metrics = Metrics.create(None)
    old_logger = old.make_logger(old_stream).bind(worker=os.getpid())
    tally = Tally(Metrics.create(None))
    new_logger = make_logger("info", "json", new_stream).bind(worker=os.getpid())
    handlers = make_handlers(Config(), tally)
    registrar = _Registrar()
    add_to_server(RulesServicer(handlers), registrar, Config().max_message_bytes)
    interceptor = ObservingInterceptor(CallObserver(tally, new_logger))

    class _Details:
        method = f"/{SERVICE_NAME}/Apply"
        invocation_metadata = ()

    wrapped = interceptor.intercept_service(lambda d: registrar.handlers["Apply"], _Details())
    context = _Context()
    observe_old = old_metrics.plan_seconds.observe

    def new_call(data: bytes) -> bytes:
        answer: bytes = wrapped.unary_unary(wrapped.request_deserializer(data), context)
        return answer

    apply_handler = registrar.handlers["Apply"]
    apply_path = f"/{SERVICE_NAME}/Apply"

    def old_call(data: bytes) -> bytes:
        old.rebuild(apply_handler, apply_path)
        start = old.started(old_metrics)
        request = pb.ApplyRequest.FromString(data)  # what the old interceptor's facts read
        answer: bytes = old.apply(data, observe_old)
        duration = old.finished_metrics(old_metrics, start)
        old.log_line(old_logger, duration, request.state.seq, request.action.seat)
        return answer

    read_apply = _reader(pb.ApplyRequest)
    read_listing = _reader(pb.LegalMovesRequest)
    read_view = _reader(pb.PlayerViewRequest)

    def new_apply(data: bytes) -> bytes:
        return handlers.apply(read_apply(data))  # type: ignore[arg-type]

    def new_listing(data: bytes) -> bytes:
        return handlers.legal_moves(read_listing(data))  # type: ignore[arg-type]

    def new_view(data: bytes) -> bytes:
        return handlers.player_view(read_view(data))  # type: ignore[arg-type]

    # The same answers, byte for byte, before anything is timed.
    for data in apply_bytes:
        assert new_call(data) == old_call(data) == new_apply(data) == old.apply(data, observe_old)
    for data in listing:
        assert new_listing(data) == old.legal_moves(data, observe_old)
    for data in views:
        assert new_view(data) == old.player_view(data, observe_old)

    # Inputs of the parts.
    states = [reading.state_from_proto(r.state) for r in applies]
    actions = [reading.action_from_proto(r.action) for r in applies]
    results = [engine.apply(s, a, check=False) for s, a in zip(states, actions, strict=True)]
    after_moves = [engine.legal_moves(s) for s, _ in results]
    cards = [len(m) for m in after_moves]
    work = list(zip(states, actions, strict=True))
    writes = list(zip(results, after_moves, strict=True))

    def old_read(data: bytes) -> object:
        request = pb.ApplyRequest.FromString(data)
        return old.state_from_proto(request.state), old.action_from_proto(request.action)

    def new_read(data: bytes) -> object:
        request = read_apply(data)
        return reading.state_from_proto(request.state), reading.action_from_proto(request.action)  # type: ignore[union-attr]

    def rules(pair: tuple[engine.State, engine.Action]) -> object:
        engine.check_state(pair[0])
        after, _ = engine.apply(pair[0], pair[1], check=False)
        return engine.legal_moves(after)

    def old_write(item: Any) -> bytes:
        (state, events), moves = item
        messages = old.events_to_proto(events)
        message = old.state_to_proto(state)
        response = pb.ApplyResponse(
            state=message,
            events=messages,
            legal_moves=old.moves_to_proto(state.to_move, moves),
            seat_events=old.seat_events_to_proto(events, messages),
            seed_commitment=commitment(state.seed),
        )
        response.ByteSize()
        return response.SerializeToString()

    def new_write(item: Any) -> bytes:
        (state, events), moves = item
        encoded = writing.state_bytes(state)
        return writing.match_response_bytes(
            encoded, events, writing.moves_bytes(state.to_move, moves), commitment(state.seed), None
        )

    def old_plans(count: int) -> None:
        for _ in range(count):
            observe_old(3e-6)

    observe_new = tally.observe_plan

    def new_plans(count: int) -> None:
        for _ in range(count):
            observe_new(3e-6)

    def old_metrics_call(_: object) -> None:
        old.finished_metrics(old_metrics, old.started(old_metrics))

    method = tally.method("UNARY", SERVICE_NAME, "Apply")

    def new_metrics_call(_: object) -> None:
        tally.started(method)
        tally.finished(method, "OK", 2e-4, None)

    def old_log(_: object) -> None:
        old.log_line(old_logger, 2e-4, 5, 1)

    def new_log(_: object) -> None:
        new_logger.info(
            "rpc",
            method="basra.v1.RulesService/Apply",
            code="OK",
            reason=None,
            duration_ms=0.2,
            request_id=None,
            seq=5,
            seat=1,
        )

    def old_intercept(_: object) -> object:
        return old.rebuild(apply_handler, apply_path)

    def new_intercept(_: object) -> object:
        return interceptor.intercept_service(lambda d: apply_handler, _Details())

    calls = apply_bytes
    rows: list[tuple[str, Callable[[Any], object], Callable[[Any], object], Sequence[Any]]] = [
        ("whole call: Apply through the interceptor", old_call, new_call, calls),
        (
            "handler: Apply, bytes to bytes, plan timing on",
            lambda d: old.apply(d, observe_old),
            new_apply,
            calls,
        ),
        ("handler: LegalMoves", lambda d: old.legal_moves(d, observe_old), new_listing, listing),
        (
            "handler: PlayerView (seat to move)",
            lambda d: old.player_view(d, observe_old),
            new_view,
            views,
        ),
        ("read: request and state into engine values", old_read, new_read, calls),
        ("rules: check_state + apply + legal_moves (shared)", rules, rules, work),
        ("write: the Apply response's bytes", old_write, new_write, writes),
        ("plan observations, one per card", old_plans, new_plans, cards),
        (
            "call metrics: started, handled, handling time",
            old_metrics_call,
            new_metrics_call,
            calls,
        ),
        ("log line", old_log, new_log, calls),
        ("interceptor: the method's observed handler", old_intercept, new_intercept, calls),
    ]
    gc.collect()
    gc.freeze()
    for _, before, after, inputs in rows:  # warm-up
        per_call(before, inputs)
        per_call(after, inputs)
    samples: dict[str, tuple[list[float], list[float]]] = {name: ([], []) for name, *_ in rows}
    for _ in range(args.repeats):
        for name, before, after, inputs in rows:
            samples[name][0].append(per_call(before, inputs))
            samples[name][1].append(per_call(after, inputs))
    tally.flush()

    when = datetime.datetime.now(datetime.UTC)
    print(
        f"# hot_path {when:%Y-%m-%d %H:%M} UTC, python {platform.python_version()}, "
        f"grpcio {grpc.__version__}, {args.repeats} repeats, medians per call (µs); "
        f"{len(calls)} Apply requests (mean {statistics.mean(map(len, calls)):.0f} B), "
        f"{statistics.mean(cards):.1f} cards to time per Apply"
    )
    print("| part | old µs | new µs | old / new |")
    print("|---|---|---|---|")
    medians: dict[str, tuple[float, float]] = {}
    for name, (before_us, after_us) in samples.items():
        b, a = statistics.median(before_us), statistics.median(after_us)
        medians[name] = (b, a)
        print(f"| {name} | {b:.2f} | {a:.2f} | {b / a:.2f}x |")
    cards_per_call = statistics.mean(cards)
    plans_old, plans_new = medians["plan observations, one per card"]
    calls_new = medians["call metrics: started, handled, handling time"][1]
    print(
        f"# per card: old {plans_old / cards_per_call:.2f} µs, new "
        f"{plans_new / cards_per_call:.2f} µs; all per-call metric updates of an Apply, new: "
        f"{plans_new + calls_new:.2f} µs"
    )
    if args.json_out:
        out = {name: {"old": b, "new": a} for name, (b, a) in medians.items()}
        args.json_out.write_text(json.dumps({"when": when.isoformat(), "rows": out}, indent=1))
    old_stream.close()
    new_stream.close()
    return 0


class _Metadatum(NamedTuple):
    """One item of call metadata, as grpc hands it to a server (key and value, or a pair)."""

    key: str
    value: str


def _absent_interceptors(rev: str, name: str) -> Any:
    """service/interceptors.py as it was at `rev`, loaded as a module of its own, `name`."""
    source = subprocess.run(
        ["git", "show", f"{rev}:service/interceptors.py"],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    module = types.ModuleType(name)
    module.__file__ = f"{rev}:service/interceptors.py"
    sys.modules[module.__name__] = module  # dataclasses look their module up
    exec(compile(source, module.__file__, "exec"), module.__dict__)
    return module


def tracing_costs(args: argparse.Namespace) -> int:
    """--tracing: one Apply call absent, off, on (sampled, unsampled); a child span; plans."""
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.trace import ReadableSpan
    from opentelemetry.sdk.trace.export import (
        BatchSpanProcessor,
        SpanExporter,
        SpanExportResult,
    )

    from service.tracing import Tracing

    class _EncodingExporter(SpanExporter):
        """Encodes each batch as the OTLP exporter does, and sends it nowhere."""

        def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
            encode_spans(spans).SerializeToString()
            return SpanExportResult.SUCCESS

    applies = _requests("apply.json", pb.ApplyRequest)
    calls = [r.SerializeToString() for r in applies]
    logs = Path(tempfile.mkdtemp(prefix="basra-trace-logs-"))
    stream = open(logs / "calls.log", "w")  # noqa: SIM115 (open for the whole run)
    tally = Tally(Metrics.create(None))
    logger = make_logger("info", "json", stream).bind(worker=os.getpid())
    handlers = make_handlers(Config(), tally)
    registrar = _Registrar()
    add_to_server(RulesServicer(handlers), registrar, Config().max_message_bytes)
    apply_handler = registrar.handlers["Apply"]
    tracing = Tracing.start(logger, BatchSpanProcessor(_EncodingExporter()))
    absent = _absent_interceptors(args.absent_rev, "absent_interceptors")
    control = _absent_interceptors(args.absent_rev, "absent_interceptors_control")
    chains = {
        "absent": [absent.ObservingInterceptor(absent.CallObserver(tally, logger))],
        "control": [control.ObservingInterceptor(control.CallObserver(tally, logger))],
        "off": [ObservingInterceptor(CallObserver(tally, logger))],
        "on": [tracing.interceptor(), ObservingInterceptor(CallObserver(tally, logger, tracing))],
    }
    trace_id, parent = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"

    def context(flags: str) -> _Context:
        return _Context((_Metadatum("traceparent", f"00-{trace_id}-{parent}-{flags}"),))

    # Every caller sends a traceparent; only its sampled flag differs.
    sampled, unsampled = context("01"), context("00")

    class _Details:
        method = f"/{SERVICE_NAME}/Apply"
        invocation_metadata = sampled.invocation_metadata()

    details = _Details()

    def through(chain: list[Any], call_context: _Context) -> Callable[[bytes], bytes]:
        def find(index: int) -> Any:
            if index == len(chain):
                return apply_handler
            return chain[index].intercept_service(lambda d: find(index + 1), details)

        def call(data: bytes) -> bytes:
            handler = find(0)  # what grpc does for every call
            answer: bytes = handler.unary_unary(handler.request_deserializer(data), call_context)
            return answer

        return call

    tracer = tracing.provider.get_tracer("benchmark")

    def child_span(_: object) -> None:
        with tracer.start_as_current_span("parent"), tracer.start_as_current_span("plans"):
            pass

    def parent_span(_: object) -> None:
        with tracer.start_as_current_span("parent"):
            pass

    states = [reading.state_from_proto(r.state) for r in applies]
    actions = [reading.action_from_proto(r.action) for r in applies]
    afters = [engine.apply(s, a, check=False)[0] for s, a in zip(states, actions, strict=True)]

    def plans(state: engine.State) -> object:
        return handlers._moves(state)

    flush = tracing.provider.force_flush

    def nothing() -> object:
        return None

    # (name, one call, its inputs, what ends the row: the spans' export is charged to it)
    rows: list[tuple[str, Callable[[Any], object], Sequence[Any], Callable[[], object]]] = [
        ("whole Apply call, tracing absent", through(chains["absent"], sampled), calls, nothing),
        (
            "whole Apply call, tracing absent, a second copy (control)",
            through(chains["control"], sampled),
            calls,
            nothing,
        ),
        ("whole Apply call, tracing off", through(chains["off"], sampled), calls, nothing),
        ("whole Apply call, tracing on, sampled", through(chains["on"], sampled), calls, flush),
        ("whole Apply call, tracing on, unsampled", through(chains["on"], unsampled), calls, flush),
        ("a span alone (started and ended)", parent_span, calls, flush),
        ("a span with one child span", child_span, calls, flush),
        ("plan generation of the answer (timed per card)", plans, afters, nothing),
    ]

    def timed(
        run: Callable[[Any], object], inputs: Sequence[Any], end: Callable[[], object]
    ) -> float:
        started = time.perf_counter()
        for item in inputs:
            run(item)
        end()
        return (time.perf_counter() - started) / len(inputs) * 1e6

    for _, run, inputs, end in rows:  # warm-up; the same answers on every path
        timed(run, inputs, end)
    for data in calls:
        answers = {through(chains[name], sampled)(data) for name in chains}
        assert len(answers) == 1
    flush()
    gc.collect()
    gc.freeze()
    samples: dict[str, list[float]] = {name: [] for name, *_ in rows}
    for repeat in range(args.repeats):
        shift = repeat % len(rows)  # each row takes each place in turn: no position bias
        for name, run, inputs, end in rows[shift:] + rows[:shift]:
            samples[name].append(timed(run, inputs, end))
    tracing.stop()
    tally.flush()
    stream.close()

    when = datetime.datetime.now(datetime.UTC)
    print(
        f"# hot_path --tracing {when:%Y-%m-%d %H:%M} UTC, python {platform.python_version()}, "
        f"grpcio {grpc.__version__}, absent = {args.absent_rev}, {args.repeats} repeats, "
        f"medians per call (µs); {len(calls)} Apply requests"
    )
    print("| measure | µs per call | / absent |")
    print("|---|---|---|")
    medians = {name: statistics.median(values) for name, values in samples.items()}
    base = samples["whole Apply call, tracing absent"]
    for name, values in samples.items():
        ratio = statistics.median(v / b for v, b in zip(values, base, strict=True))
        print(f"| {name} | {medians[name]:.2f} | {ratio:.3f} |")
    if args.json_out:
        out = {"when": when.isoformat(), "medians": medians, "samples": samples}
        args.json_out.write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
