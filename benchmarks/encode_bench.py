"""Apply per server CPU-second of this checkout against another, and the parts of writing one.

Two servers, `basra-rules serve` of each checkout (one worker, sync, info logs, metrics on: the
README's quick start), run side by side; each round sends the same Apply load (the mid-game
requests of deploy/ghz/data, 16 calls in flight) to one and then the other, in alternating
order, and counts each server's CPU seconds from /proc. It prints per checkout the median of
Apply calls per server CPU-second and the median of the ratios of the rounds:

    .venv/bin/python -m benchmarks.encode_bench --baseline ../before --rounds 7

With --parts it times instead, in this process, the parts of writing the 120 Apply answers of
the same requests from the engine's results: all of an answer's values as plain dicts and
lists, one constructor call of them with its serialization (the writer before events and
moves were kept as encoded entries), and the whole write as service/writing.py does it; CPU
time of the thread, the parts interleaved, medians:

    .venv/bin/python -m benchmarks.encode_bench --parts --repeats 41

With --passes N it only writes the same 120 answers N times and prints nothing: for an
instruction count that the machine's load does not move, per answer the difference of two
counts over 120 times the difference of N, with either checkout's writer first on the path
(run as a file, so that TREE's engine/, service/ and benchmarks/ are imported):

    PYTHONPATH=TREE valgrind --tool=callgrind \
        .venv/bin/python benchmarks/encode_bench.py --passes 10
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from basra.v1 import rules_pb2 as pb

import engine
from benchmarks import ghz_data
from benchmarks.measure import finish, header, now
from benchmarks.servers import ROOT, apply_requests, measure, served
from engine.rng import commitment
from service import reading, writing


def compare(args: argparse.Namespace) -> dict[str, Any]:
    """Rounds of the same Apply load on each checkout's server, in alternating order."""
    requests, _ = apply_requests()
    trees = {"baseline": args.baseline.resolve(), "here": args.tree.resolve()}
    options = {"concurrency": args.concurrency, "connections": args.connections}
    rates: dict[str, list[float]] = {name: [] for name in trees}
    errors = 0
    with (
        served(1, "info", metrics=True, tree=trees["baseline"]) as baseline,
        served(1, "info", metrics=True, tree=trees["here"]) as here,
    ):
        servers = {"baseline": baseline, "here": here}
        for server in servers.values():  # warm-up: imports, caches, connections
            measure(server, "Apply", requests, calls=args.calls // 4, **options)
        for number in range(args.rounds):
            order = list(servers) if number % 2 == 0 else list(servers)[::-1]
            for name in order:
                run = measure(servers[name], "Apply", requests, calls=args.calls, **options)
                errors += run.errors
                rates[name].append(run.per_cpu_second)
    ratios = [h / b for h, b in zip(rates["here"], rates["baseline"], strict=True)]
    print(f"baseline {trees['baseline']}, here {trees['here']}; {args.rounds} rounds")
    print("| checkout | Apply calls per server CPU-second (median) | rounds |")
    print("|---|---:|---|")
    for name, values in rates.items():
        shown = ", ".join(f"{v:.0f}" for v in values)
        print(f"| {name} | {statistics.median(values):.0f} | {shown} |")
    print(f"here / baseline, median of the rounds' ratios: {statistics.median(ratios):.3f}")
    print(f"errors: {errors}")
    return {"rates": rates, "ratios": ratios, "errors": errors, "trees": map_str(trees)}


def map_str(trees: dict[str, Path]) -> dict[str, str]:
    """The checkouts by name, as text (for the JSON)."""
    return {name: str(path) for name, path in trees.items()}


def parts(args: argparse.Namespace) -> dict[str, Any]:
    """The parts of writing the Apply answers of the ghz data, in microseconds an answer."""
    cases = []
    for request in ghz_data.read("apply.json", pb.ApplyRequest):
        state = reading.state_from_proto(request.state)
        after, events = engine.apply(state, reading.action_from_proto(request.action))
        cases.append((after, events, engine.legal_moves(after), commitment(after.seed)))

    def values(case: Any) -> object:
        after, events, moves, _ = case
        made = [writing.event_fields(e) for e in events]
        seats = [[writing.event_fields(e) for e in engine.seat_events(events, s)] for s in (0, 1)]
        public = [writing.event_fields(e) for e in engine.public_events(events)]
        listed = writing.moves_fields(after.to_move, moves)
        return writing.state_fields(after), listed, made, seats, public

    prepared = [values(c) for c in cases]

    def construct(item: Any) -> bytes:
        state, moves, made, seats, public = item
        return pb.ApplyResponse(
            state=state,
            events=made,
            legal_moves=moves,
            seat_events=[{"seat": s, "events": seats[s]} for s in (0, 1)],
            seed_commitment=b"\x00" * 32,
            public_events=public,
        ).SerializeToString()

    def whole(case: Any) -> bytes:
        after, events, moves, seal = case
        state, listed = writing.state_fields(after), writing.moves_bytes(after.to_move, moves)
        return writing.match_response_bytes(state, events, listed, seal, None)

    rows: dict[str, tuple[Callable[[Any], object], Sequence[Any]]] = {
        "values (engine results -> the constructor's dicts and lists)": (values, cases),
        "constructor and serialization": (construct, prepared),
        "whole write (writing.match_response_bytes with its values)": (whole, cases),
    }
    times: dict[str, list[float]] = {name: [] for name in rows}
    for _ in range(args.repeats):
        for name, (call, items) in rows.items():
            started = time.thread_time()
            for item in items:
                call(item)
            times[name].append((time.thread_time() - started) / len(items) * 1e6)
    print(f"{len(cases)} Apply answers, {args.repeats} repeats, thread CPU time")
    print("| part | µs an answer (median) |")
    print("|---|---:|")
    for name, values_ in times.items():
        print(f"| {name} | {statistics.median(values_):.1f} |")
    return {"parts_us": {name: statistics.median(v) for name, v in times.items()}}


def passes(count: int) -> None:
    """Write the Apply answers of the ghz data `count` times (after one pass to warm up)."""
    cases = []
    for request in ghz_data.read("apply.json", pb.ApplyRequest):
        state = reading.state_from_proto(request.state)
        after, events = engine.apply(state, reading.action_from_proto(request.action))
        cases.append((after, events, engine.legal_moves(after), commitment(after.seed)))
    # The hand writer took the state's encoding where the generated classes take its values;
    # the one-constructor writer took the moves' values.
    state_of: Callable[..., Any] = getattr(writing, "state_fields", None) or writing.state_bytes
    moves_of: Callable[..., Any] = getattr(writing, "moves_bytes", None) or writing.moves_fields
    for _ in range(count + 1):
        for after, events, moves, seal in cases:
            listed = moves_of(after.to_move, moves)
            writing.match_response_bytes(state_of(after), events, listed, seal, None)


def main(argv: Sequence[str] | None = None) -> int:
    """Compare Apply per server CPU-second with --baseline, or time the parts (--parts)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", type=Path, help="the other checkout (its gen/ generated)")
    parser.add_argument("--tree", type=Path, default=ROOT, help="this side's checkout")
    parser.add_argument("--rounds", type=int, default=7, help="rounds, each measuring both")
    parser.add_argument("--calls", type=int, default=3000, help="Apply calls per measurement")
    parser.add_argument("--concurrency", type=int, default=16, help="calls in flight")
    parser.add_argument("--connections", type=int, default=8, help="client connections")
    parser.add_argument("--parts", action="store_true", help="time the parts of a write")
    parser.add_argument("--repeats", type=int, default=41, help="--parts: repeats")
    parser.add_argument("--passes", type=int, help="only write the answers this many times")
    parser.add_argument("--json-out", type=Path, help="also write the figures as JSON")
    args = parser.parse_args(argv)
    if args.passes is not None:
        passes(args.passes)
        return 0
    started = now()
    print(header("encode_bench", started, argv))
    if not args.parts and args.baseline is None:
        parser.error("give --baseline TREE, or --parts")
    figures = parts(args) if args.parts else compare(args)
    finish(args.json_out, started, argv, figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
