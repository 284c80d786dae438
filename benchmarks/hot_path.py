"""In-process cost of one call of the service, part by part; against another checkout if asked.

Run from the repository root, pinned to one core:
    taskset -c 1 .venv/bin/python -m benchmarks.hot_path --repeats 15

Requests are the realistic mid-game ones the load benchmark sends (deploy/ghz/data: Apply,
LegalMoves; PlayerView asks for the seat to move of the same states). Each row times one part
of a call over every request, `--repeats` times, the rows interleaved in each repeat (each
repeat starting at the next row) so that drift hits all alike, and reports the median per
call in microseconds. The service writes its metrics in prometheus-client's multiprocess
mode, as a worker does, and its log lines to a file.

Rows:
- whole call: request bytes to response bytes through the interceptor (the wrapped handler
  a worker runs, its log line and metric updates)
- handler: request bytes to response bytes, plan timing on, no log line or call metrics
- read: parse the request and read its state and action into engine values
- rules: engine.check_state, engine.apply and engine.legal_moves
- write: the response's bytes from the engine's results (state, events as each seat sees
  them, legal moves, seed commitment)
- plan observations: one plan-timing observation per card of the seat to move
- call metrics: the per-call updates (started, handled, handling time)
- log line: the interceptor's one line per call
- interceptor: finding the method's handler and wrapping it

With --tracing it measures instead what tracing costs a call, the same way, on the same Apply
requests, every call going through the interceptors as grpc calls them (intercept_service,
then the wrapped behaviour):
    taskset -c 1 .venv/bin/python -m benchmarks.hot_path --tracing --repeats 15
- off: the service as it is, tracing off (the default);
- off, a second chain (control): the same again, how far two identical rows measure apart;
- on, sampled: tracing on, the caller's traceparent sampled: opentelemetry-instrumentation-grpc's
  interceptor outside the service's, a span per call, batched and encoded as OTLP protobuf by
  the exporter's own encoder (only the send is left out: no collector);
- on, unsampled: the same, the caller's traceparent not sampled (the span is not recorded);
- a span alone, a span with one child span: what a span around a part of a call would cost;
- plan generation: the legal moves of the Apply's answer, one timed plan generation per
  card (what such a child span would measure).

With --baseline TREE it compares this checkout with another one (a `git worktree` of main,
say, to measure a change before it is merged) in the same run: it runs this benchmark in each
checkout in turn, `--rounds` times in alternating order, each run a process of its own started
from that checkout's root (so it imports that checkout's engine/ and service/; its --json-out
must hold "rows", as this one's does), and prints per row the median of each checkout's runs
and the median of the ratios of the runs paired by round:
    taskset -c 1 .venv/bin/python -m benchmarks.hot_path --baseline ../before --rounds 5
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from time import perf_counter
from typing import Any, NamedTuple, TextIO

from benchmarks.measure import scratch

# Multiprocess mode, as every worker runs it: set before prometheus-client is imported.
os.environ.setdefault("PROMETHEUS_MULTIPROC_DIR", scratch("basra-hot-"))

import grpc
from basra.v1 import rules_pb2 as pb

import engine
from benchmarks.measure import finish, header, now, pass_us
from engine.rng import commitment
from service import reading, writing
from service.config import Config
from service.interceptors import CallObserver, ObservingInterceptor
from service.logs import make_logger
from service.metrics import Metrics, Tally
from service.outcomes import Facts
from service.server import make_handlers
from service.servicer import SERVICE_NAME, RulesServicer
from testkit import ghz_data
from testkit.registered import method_handlers, request_reader
from wire.actions import action_from_proto

ROOT = Path(__file__).resolve().parent.parent
APPLY_METHOD = f"/{SERVICE_NAME}/Apply"


class Row(NamedTuple):
    """One measured part: its name, one call, the inputs of a pass, what ends a pass."""

    name: str
    call: Callable[[Any], object]
    inputs: Sequence[Any]
    end: Callable[[], object] = lambda: None


class _Context:
    """The parts of a grpc servicer context that an answered call touches."""

    def __init__(self, metadata: tuple[Any, ...] = ()) -> None:
        self._metadata = metadata

    def code(self) -> None:
        return None

    def is_active(self) -> bool:
        return True

    def trailing_metadata(self) -> tuple[()]:
        return ()

    def invocation_metadata(self) -> tuple[Any, ...]:
        return self._metadata

    def peer(self) -> str:
        return "ipv4:127.0.0.1:50000"

    def time_remaining(self) -> None:
        return None  # a call without a deadline


class _Details:
    """The handler call details grpc hands an interceptor for an Apply call."""

    def __init__(self, metadata: tuple[Any, ...] = ()) -> None:
        self.method = APPLY_METHOD
        self.invocation_metadata = metadata


class _Served(NamedTuple):
    """The service as one worker holds it, with its log stream and metrics."""

    handlers: Any
    registered: dict[str, Any]
    tally: Tally
    logger: Any
    log: TextIO
    """The logger's file (the logger writes to its descriptor: kept open by holding it)."""


def _serving(logs: Path) -> _Served:
    tally = Tally(Metrics.create(None))
    stream = open(logs, "w")  # noqa: SIM115 (open for the whole run)
    logger = make_logger("info", "json", stream).bind(worker=os.getpid())
    handlers = make_handlers(Config(), tally)
    servicer = RulesServicer(handlers, CallObserver(tally, logger))
    registered = method_handlers(servicer, Config().max_message_bytes)
    return _Served(handlers, registered, tally, logger, stream)


def call_rows(served: _Served) -> list[Row]:
    """The parts of one call of the service as it is."""
    applies = ghz_data.read("apply.json", pb.ApplyRequest)
    calls = [r.SerializeToString() for r in applies]
    listing = [
        r.SerializeToString() for r in ghz_data.read("legal_moves.json", pb.LegalMovesRequest)
    ]
    views = [
        pb.PlayerViewRequest(state=r.state, seat=r.state.to_move).SerializeToString()
        for r in applies
    ]
    handlers, registered, tally, logger, _ = served
    interceptor = ObservingInterceptor(CallObserver(tally, logger))
    apply_handler = registered["Apply"]
    wrapped = interceptor.intercept_service(lambda d: apply_handler, _Details())
    context = _Context()
    read_apply = request_reader(apply_handler)
    read_listing = request_reader(registered["LegalMoves"])
    read_view = request_reader(registered["PlayerView"])

    def whole_call(data: bytes) -> bytes:
        answer: bytes = wrapped.unary_unary(wrapped.request_deserializer(data), context)
        return answer

    def apply(data: bytes) -> bytes:
        return handlers.apply(read_apply(data), Facts())  # type: ignore[no-any-return]

    for data in calls:  # the whole call answers what the handler does
        assert whole_call(data) == apply(data)

    states = [reading.state_from_proto(r.state) for r in applies]
    actions = [action_from_proto(r.action) for r in applies]
    results = [engine.apply(s, a, check=False) for s, a in zip(states, actions, strict=True)]
    after_moves = [engine.legal_moves(s) for s, _ in results]
    cards = [len(m) for m in after_moves]

    def read(data: bytes) -> object:
        request = read_apply(data)
        return reading.state_from_proto(request.state), action_from_proto(request.action)

    def rules(pair: tuple[engine.State, engine.Action]) -> object:
        engine.check_state(pair[0])
        after, _ = engine.apply(pair[0], pair[1], check=False)
        return engine.legal_moves(after)

    def write(item: Any) -> bytes:
        (state, events), moves = item
        fields = writing.state_fields(state)
        moves_fields = writing.moves_bytes(state.to_move, moves)
        return writing.match_response_bytes(
            fields, events, moves_fields, commitment(state.seed), None
        )

    def plan_observations(count: int) -> None:
        for _ in range(count):
            tally.observe_plan(3e-6)

    method = tally.method("UNARY", SERVICE_NAME, "Apply")

    def call_metrics(_: object) -> None:
        tally.started(method)
        tally.finished(method, "OK", 2e-4, None)

    def log_line(_: object) -> None:
        logger.info(
            "rpc",
            method="basra.v1.RulesService/Apply",
            code="OK",
            reason=None,
            duration_ms=0.2,
            request_id=None,
            seq=5,
            seat=1,
        )

    def intercept(_: object) -> object:
        return interceptor.intercept_service(lambda d: apply_handler, _Details())

    return [
        Row("whole call: Apply through the interceptor", whole_call, calls),
        Row("handler: Apply, bytes to bytes, plan timing on", apply, calls),
        Row(
            "handler: LegalMoves", lambda d: handlers.legal_moves(read_listing(d), Facts()), listing
        ),
        Row(
            "handler: PlayerView (seat to move)",
            lambda d: handlers.player_view(read_view(d), Facts()),
            views,
        ),
        Row("read: request and state into engine values", read, calls),
        Row(
            "rules: check_state + apply + legal_moves",
            rules,
            list(zip(states, actions, strict=True)),
        ),
        Row(
            "write: the Apply response's bytes", write, list(zip(results, after_moves, strict=True))
        ),
        Row("plan observations, one per card", plan_observations, cards),
        Row("call metrics: started, handled, handling time", call_metrics, calls),
        Row("log line", log_line, calls),
        Row("interceptor: the method's observed handler", intercept, calls),
    ]


class _Metadatum(NamedTuple):
    """One item of call metadata, as grpc hands it to a server (key and value, or a pair)."""

    key: str
    value: str


def tracing_rows(served: _Served) -> tuple[list[Row], Callable[[], object]]:
    """The rows of --tracing, and what stops the tracing they started."""
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

    applies = ghz_data.read("apply.json", pb.ApplyRequest)
    calls = [r.SerializeToString() for r in applies]
    handlers, _, tally, logger, _ = served
    tracing = Tracing.start(logger, BatchSpanProcessor(_EncodingExporter()))
    # Each chain's observer: the servicer's (RulesService calls) and the interceptor's.
    observers = {
        "off": CallObserver(tally, logger),
        "control": CallObserver(tally, logger),
        "on": CallObserver(tally, logger, tracing),
    }
    applies_of = {
        name: method_handlers(RulesServicer(handlers, observer))["Apply"]
        for name, observer in observers.items()
    }
    chains = {name: [ObservingInterceptor(observer)] for name, observer in observers.items()}
    chains["on"].insert(0, tracing.interceptor())
    trace_id, parent = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"

    def context(flags: str) -> _Context:
        return _Context((_Metadatum("traceparent", f"00-{trace_id}-{parent}-{flags}"),))

    # Every caller sends a traceparent; only its sampled flag differs.
    sampled, unsampled = context("01"), context("00")
    details = _Details(sampled.invocation_metadata())

    def through(name: str, call_context: _Context) -> Callable[[bytes], bytes]:
        chain, apply_handler = chains[name], applies_of[name]

        def find(index: int) -> Any:
            if index == len(chain):
                return apply_handler
            return chain[index].intercept_service(lambda d: find(index + 1), details)

        def call(data: bytes) -> bytes:
            handler = find(0)  # what grpc does for every call
            answer: bytes = handler.unary_unary(handler.request_deserializer(data), call_context)
            return answer

        return call

    for data in calls:  # the same answers on every path
        assert len({through(name, sampled)(data) for name in chains}) == 1

    tracer = tracing.provider.get_tracer("benchmark")

    def child_span(_: object) -> None:
        with tracer.start_as_current_span("parent"), tracer.start_as_current_span("plans"):
            pass

    def parent_span(_: object) -> None:
        with tracer.start_as_current_span("parent"):
            pass

    states = [reading.state_from_proto(r.state) for r in applies]
    actions = [action_from_proto(r.action) for r in applies]
    afters = [engine.apply(s, a, check=False)[0] for s, a in zip(states, actions, strict=True)]

    def timed_plans(card: int, floor: int, limit: int) -> tuple[engine.Plan, ...]:
        started = perf_counter()
        plans = engine.plans_for(card, floor, limit)
        tally.observe_plan(perf_counter() - started)
        return plans

    def plans(state: engine.State) -> object:
        return engine.legal_moves(state, engine.DEFAULT_WORK_LIMIT, timed_plans)

    flush = tracing.provider.force_flush
    rows = [
        Row("whole Apply call, tracing off", through("off", sampled), calls),
        Row(
            "whole Apply call, tracing off, a second chain (control)",
            through("control", sampled),
            calls,
        ),
        Row("whole Apply call, tracing on, sampled", through("on", sampled), calls, flush),
        Row(
            "whole Apply call, tracing on, unsampled",
            through("on", unsampled),
            calls,
            flush,
        ),
        Row("a span alone (started and ended)", parent_span, calls, flush),
        Row("a span with one child span", child_span, calls, flush),
        Row("plan generation of the answer (timed per card)", plans, afters),
    ]
    return rows, tracing.stop


def timed(rows: Sequence[Row], repeats: int) -> dict[str, list[float]]:
    """µs per call of each row, one pass a repeat, each repeat starting at the next row."""
    for row in rows:  # warm-up
        pass_us(row.call, row.inputs, row.end)
    gc.collect()
    gc.freeze()
    samples: dict[str, list[float]] = {row.name: [] for row in rows}
    for repeat in range(repeats):
        shift = repeat % len(rows)  # each row takes each place in turn: no position bias
        for row in [*rows[shift:], *rows[:shift]]:
            samples[row.name].append(pass_us(row.call, row.inputs, row.end))
    return samples


def measure_here(args: argparse.Namespace, argv: Sequence[str] | None) -> int:
    """Measure this checkout's rows; print a markdown table."""
    started = now()
    logs = Path(scratch("basra-hot-logs-")) / "calls.log"
    served = _serving(logs)
    if args.tracing:
        rows, stop = tracing_rows(served)
        samples = timed(rows, args.repeats)
        stop()
    else:
        rows = call_rows(served)
        samples = timed(rows, args.repeats)
    served.tally.flush()
    served.log.close()
    medians = {name: statistics.median(values) for name, values in samples.items()}
    print(
        f"# {header('hot_path', started, argv)}; python {sys.version.split()[0]}, grpcio "
        f"{grpc.__version__}, {args.repeats} repeats, medians per call (µs) over "
        f"{len(rows[0].inputs)} Apply requests"
    )
    if args.tracing:
        base = samples[rows[0].name]
        print(f"| measure | µs per call | / {rows[0].name.rsplit(', ', 1)[-1]} |")
        print("|---|---|---|")
        for name, values in samples.items():
            ratio = statistics.median(v / b for v, b in zip(values, base, strict=True))
            print(f"| {name} | {medians[name]:.2f} | {ratio:.3f} |")
    else:
        print("| part | µs per call |")
        print("|---|---|")
        for name, value in medians.items():
            print(f"| {name} | {value:.2f} |")
    finish(args.json_out, started, argv, {"rows": medians, "samples": samples})
    return 0


def compare(args: argparse.Namespace, argv: Sequence[str] | None) -> int:
    """--baseline: this checkout and another in alternating processes; per row the ratio."""
    started = now()
    trees = {"baseline": args.baseline.resolve(), "here": ROOT}
    child = ["-m", "benchmarks.hot_path", "--repeats", str(args.repeats)]
    child += ["--tracing"] if args.tracing else []
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in trees}
    with tempfile.TemporaryDirectory(prefix="basra-hot-compare-") as directory:
        for number in range(args.rounds):
            for name in list(trees) if number % 2 == 0 else list(trees)[::-1]:
                out = Path(directory) / f"{name}-{number}.json"
                done = subprocess.run(
                    [sys.executable, *child, "--json-out", str(out)],
                    cwd=trees[name],
                    capture_output=True,
                    text=True,
                    check=False,
                )
                if done.returncode != 0:
                    print(f"{name} ({trees[name]}) failed:\n{done.stderr}", file=sys.stderr)
                    return 1
                runs[name].append(json.loads(out.read_text())["rows"])
    print(
        f"# {header('hot_path', started, argv)}; {args.rounds} runs per checkout of "
        f"{args.repeats} repeats, alternating; baseline {trees['baseline']}"
    )
    print("| part | baseline µs | here µs | here / baseline |")
    print("|---|---|---|---|")
    figures: dict[str, dict[str, float]] = {}
    for name in runs["here"][0]:
        if name not in runs["baseline"][0]:
            print(f"| {name} | - | {statistics.median(r[name] for r in runs['here']):.2f} | - |")
            continue
        before = [r[name] for r in runs["baseline"]]
        after = [r[name] for r in runs["here"]]
        ratio = statistics.median(a / b for a, b in zip(after, before, strict=True))
        was, is_now = statistics.median(before), statistics.median(after)
        figures[name] = {"baseline": was, "here": is_now, "ratio": ratio}
        print(f"| {name} | {was:.2f} | {is_now:.2f} | {ratio:.3f} |")
    finish(args.json_out, started, argv, {"baseline": str(trees["baseline"]), "rows": figures})
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Measure this checkout, or compare it with --baseline."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--json-out", type=Path, help="also write the figures as JSON")
    parser.add_argument("--tracing", action="store_true", help="what tracing costs (see above)")
    parser.add_argument(
        "--baseline", type=Path, metavar="TREE", help="compare with this checkout (see above)"
    )
    parser.add_argument("--rounds", type=int, default=5, help="--baseline: runs per checkout")
    args = parser.parse_args(argv)
    if args.baseline:
        return compare(args, argv)
    return measure_here(args, argv)


if __name__ == "__main__":
    sys.exit(main())
