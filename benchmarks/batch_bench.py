"""Apply items per server CPU-second through BatchApply, against unary Apply and the bare no-op.

In one run, round after round in turn: the bare grpcio server's health Check (the limit of
this stack: benchmarks.servers.bare_server), then `basra-rules serve` itself (the README's
defaults unless told: 1 worker, info logs, so one log line per call; but the admission bound
off, since it counts items: 4 batches of 64 in flight are 256 items, and a worker holding 64
refuses the items past them, in calls that still end OK) sent unary Apply and BatchApply of 1,
4, 16 and 64 items. The items are the 120 Apply requests of
deploy/ghz/data/apply.json, in turn (every one answered, not refused). A figure is the items
answered per server CPU-second (every server process's CPU-time clock), and its ratio to the
bare Check of the same round; latency is per item, and an item waits for its whole batch, so
its p50/p99 are its call's. Medians over the rounds. Then, paced: the items of unary Apply,
and of batches of 16 and 64, offered at 1x "capacity", read as the unary Apply's own
saturated rate of items per wall second in this run (what a worker carries today), each for
`--paced-items` items; the p50/p99 per item at that rate.

    flock /tmp/basra-bench.lock .venv/bin/python -m benchmarks.batch_bench --rounds 3
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from basra.v1 import rules_pb2 as pb

from benchmarks.measure import finish, header, machine, now
from benchmarks.servers import APPLY_PATH, HEALTH_PATH, apply_requests, bare_server, measure, served

BATCH_PATH = "/basra.v1.RulesService/BatchApply"
SIZES = (1, 4, 16, 64)
# Items in flight for unary calls and the no-op; a batch keeps about as many items in flight,
# and at least MIN_CALLS calls, so that a worker always has the next call waiting.
IN_FLIGHT = 16
MIN_CALLS = 4


def batches(applies: list[bytes], size: int, count: int) -> list[bytes]:
    """`count` encoded BatchApplyRequests of `size` items each, the requests taken in turn."""
    items = itertools.cycle([pb.ApplyRequest.FromString(a) for a in applies])
    return [
        pb.BatchApplyRequest(requests=list(itertools.islice(items, size))).SerializeToString()
        for _ in range(count)
    ]


def main(argv: list[str] | None = None) -> int:
    """Measure and print the table (and optionally save the rounds as JSON)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--items", type=int, default=6000, help="Apply items per variant")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--log-level", default="info")
    parser.add_argument("--connections", type=int, default=4)
    parser.add_argument("--paced-items", type=int, default=3000, help="0: no paced runs")
    parser.add_argument("--json-out", type=Path)
    args = parser.parse_args(argv)
    applies, _ = apply_requests()
    variants: dict[str, tuple[str, list[bytes], int, int]] = {
        "bare Check": (HEALTH_PATH, [b""], 1, IN_FLIGHT),
        "unary Apply": (APPLY_PATH, applies, 1, IN_FLIGHT),
    }
    for size in SIZES:
        count = len(applies)  # distinct bodies; a run sends them in turn
        calls = max(MIN_CALLS, IN_FLIGHT // size)
        variants[f"batch {size}"] = (BATCH_PATH, batches(applies, size, count), size, calls)
    started = now()
    rounds: list[dict[str, dict[str, float]]] = []
    with ExitStack() as running:
        bare = running.enter_context(bare_server())
        unbounded = ("--admission-limit", "0")
        service = running.enter_context(served(args.workers, args.log_level, flags=unbounded))
        for name, (path, bodies, size, in_flight) in variants.items():  # warm-up
            target = bare if name == "bare Check" else service
            measure(target, name, bodies, calls=max(50, args.items // size // 10),
                    concurrency=in_flight, connections=args.connections, path=path)  # fmt: skip
        for _ in range(args.rounds):
            row: dict[str, dict[str, float]] = {}
            for name, (path, bodies, size, in_flight) in variants.items():
                target = bare if name == "bare Check" else service
                got = measure(
                    target,
                    name,
                    bodies,
                    calls=max(20, args.items // size),
                    concurrency=in_flight,
                    connections=args.connections,
                    path=path,
                )
                assert got.errors == 0, f"{name}: {got.errors} calls failed"
                row[name] = {
                    "items_per_cpu_s": got.per_cpu_second * size,
                    "items_per_wall_s": got.per_wall_second * size,
                    "p50_ms": got.p50_ms,
                    "p99_ms": got.p99_ms,
                }
            rounds.append(row)
        capacity = statistics.median(r["unary Apply"]["items_per_wall_s"] for r in rounds)
        paced = {}
        for name in ("unary Apply", "batch 16", "batch 64") if args.paced_items else ():
            path, bodies, size, _ = variants[name]
            got = measure(
                service,
                name,
                bodies,
                calls=max(20, args.paced_items // size),
                concurrency=max(MIN_CALLS, 4 * IN_FLIGHT // size),  # room for the queue
                connections=args.connections,
                rps=capacity / size,
                path=path,
            )
            assert got.errors == 0, f"paced {name}: {got.errors} calls failed"
            paced[name] = {
                "offered_items_per_s": capacity,
                "achieved_items_per_s": got.per_wall_second * size,
                "p50_ms": got.p50_ms,
                "p99_ms": got.p99_ms,
            }
    print(
        f"{header('batch_bench', started, argv)}\n"
        f"machine: {json.dumps(machine())}\n"
        f"server: basra-rules serve --workers {args.workers} --log-level {args.log_level} "
        "--admission-limit 0; "
        f"{IN_FLIGHT} items in flight (batches: max({MIN_CALLS}, {IN_FLIGHT}/size) calls) over "
        f"{args.connections} connections; medians of {args.rounds} rounds"
    )
    print(_table(rounds, variants))
    if paced:
        print(f"\npaced at 1x = the unary Apply's {capacity:,.0f} items per wall second:")
        print("| variant | achieved items/s | p50 / p99 ms per item |")
        print("|---|---|---|")
        for name, seen in paced.items():
            print(
                f"| {name} | {seen['achieved_items_per_s']:,.0f} | "
                f"{seen['p50_ms']:.1f} / {seen['p99_ms']:.1f} |"
            )
    finish(args.json_out, started, argv, {"rounds": rounds, "paced": paced})
    return 0


def _table(rounds: list[dict[str, dict[str, float]]], variants: dict[str, Any]) -> str:
    lines = [
        "| variant | items in flight | Apply items / server CPU-s | x bare Check (per round) "
        "| x unary Apply | p50 / p99 ms per item |",
        "|---|---|---|---|---|---|",
    ]
    for name, (_, _, size, in_flight) in variants.items():
        rate = statistics.median(r[name]["items_per_cpu_s"] for r in rounds)
        ratios = [r[name]["items_per_cpu_s"] / r["bare Check"]["items_per_cpu_s"] for r in rounds]
        over_apply = [
            r[name]["items_per_cpu_s"] / r["unary Apply"]["items_per_cpu_s"] for r in rounds
        ]
        p50 = statistics.median(r[name]["p50_ms"] for r in rounds)
        p99 = statistics.median(r[name]["p99_ms"] for r in rounds)
        spread = f"{min(ratios):.2f}-{max(ratios):.2f}"
        lines.append(
            f"| {name} | {size * in_flight} | {rate:,.0f} | {statistics.median(ratios):.2f} "
            f"({spread}) | {statistics.median(over_apply):.2f} | {p50:.1f} / {p99:.1f} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
