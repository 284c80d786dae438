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
"""

from __future__ import annotations

import argparse
import datetime
import gc
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

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
from service import convert  # noqa: E402
from service.config import Config  # noqa: E402
from service.interceptors import CallObserver, ObservingInterceptor  # noqa: E402
from service.logs import make_logger  # noqa: E402
from service.metrics import Metrics, Tally  # noqa: E402
from service.server import make_handlers  # noqa: E402
from service.servicer import SERVICE_NAME, RulesServicer, _reader, add_to_server  # noqa: E402

DATA = ROOT / "deploy" / "ghz" / "data"


class _Context:
    """The parts of a grpc servicer context that an answered call touches."""

    def code(self) -> None:
        return None

    def trailing_metadata(self) -> tuple[()]:
        return ()

    def invocation_metadata(self) -> tuple[()]:
        return ()


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
    args = parser.parse_args(argv)

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
    states = [convert.state_from_proto(r.state) for r in applies]
    actions = [convert.action_from_proto(r.action) for r in applies]
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
        return convert.state_from_proto(request.state), convert.action_from_proto(request.action)  # type: ignore[union-attr]

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
        encoded = convert.state_bytes(state)
        return convert.match_response_bytes(
            encoded, events, convert.moves_bytes(state.to_move, moves), commitment(state.seed), None
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


if __name__ == "__main__":
    sys.exit(main())
