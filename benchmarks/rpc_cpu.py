"""Server CPU per call of every RPC with realistic data, beside a no-op, in one run.

Against one benchmark server (benchmarks.bench_server: the service's own server with its
interceptors, metrics, health and reflection, plus a raw-bytes no-op method), this sends each
RPC its ghz data (deploy/ghz/data/*.json: NewMatch, Apply, LegalMoves, SuggestMove at the
server's default level and budget) and the no-op the Apply request bytes, round after round
in turn, and reports the server's CPU microseconds per call (CPU-time clocks, every server
process) and the latency, medians over the rounds.

    .venv/bin/python -m benchmarks.rpc_cpu                       # 3 rounds
    .venv/bin/python -m benchmarks.rpc_cpu --rounds 5 --workers 2
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

from basra.v1 import rules_pb2 as pb

from benchmarks.measure import finish, header, machine, now
from benchmarks.servers import apply_requests, bench_server, measure
from testkit import ghz_data

# (RPC, data file, request type, calls per round: fewer for the searching bot)
RPCS: tuple[tuple[str, str, type[Any], int], ...] = (
    ("NewMatch", "new_match.json", pb.NewMatchRequest, 3000),
    ("Apply", "apply.json", pb.ApplyRequest, 3000),
    ("LegalMoves", "legal_moves.json", pb.LegalMovesRequest, 3000),
    ("SuggestMove", "suggest_move.json", pb.SuggestMoveRequest, 600),
)


def _path(rpc: str) -> str:
    """The method path of a RulesService RPC ("" for the no-op: benchmarks.servers' own)."""
    return "" if rpc == "Noop" else f"/basra.v1.RulesService/{rpc}"


def requests(name: str, kind: type[Any]) -> list[bytes]:
    """The encoded requests of one data file."""
    return [r.SerializeToString() for r in ghz_data.read(name, kind)]


def main(argv: list[str] | None = None) -> int:
    """Measure and print the table (and optionally save the rounds as JSON)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--connections", type=int, default=8)
    parser.add_argument("--scale", type=float, default=1.0, help="multiply every call count")
    parser.add_argument("--json-out", type=Path)
    args = parser.parse_args(argv)
    apply_bytes, reply_bytes = apply_requests()
    bodies = {rpc: requests(name, kind) for rpc, name, kind, _ in RPCS}
    bodies["Noop"] = apply_bytes
    counts = {rpc: max(50, int(calls * args.scale)) for rpc, _, _, calls in RPCS}
    counts["Noop"] = counts["Apply"]
    started = now()
    rounds: list[dict[str, dict[str, float]]] = []
    with bench_server(args.workers, reply_bytes, "warning") as server:
        for rpc, body in bodies.items():  # warm-up: imports, memos, connections
            measure(server, rpc, body, calls=counts[rpc] // 5, concurrency=4,
                    connections=args.connections, path=_path(rpc))  # fmt: skip
        for _ in range(args.rounds):
            row = {}
            for rpc, body in bodies.items():
                got = measure(
                    server,
                    rpc,
                    body,
                    calls=counts[rpc],
                    concurrency=args.concurrency,
                    connections=max(args.connections, args.workers),
                    path=_path(rpc),
                )
                assert got.errors == 0, f"{rpc}: {got.errors} calls failed"
                row[rpc] = {
                    "cpu_us": got.server_cpu_seconds / got.calls * 1e6,
                    "p50_ms": got.p50_ms,
                    "p99_ms": got.p99_ms,
                }
            rounds.append(row)
    print(
        f"{header('rpc_cpu', started, argv)}\n"
        f"machine: {json.dumps(machine())}\n"
        f"server: bench_server --workers {args.workers} --log-level warning; "
        f"{args.concurrency} in flight over max({args.connections}, workers) connections; "
        f"medians of {args.rounds} rounds"
    )
    noop = statistics.median(r["Noop"]["cpu_us"] for r in rounds)
    print("| RPC | calls per round | server CPU µs per call | x no-op | p50 ms | p99 ms |")
    print("|---|---|---|---|---|---|")
    for rpc in bodies:
        cpu = statistics.median(r[rpc]["cpu_us"] for r in rounds)
        p50 = statistics.median(r[rpc]["p50_ms"] for r in rounds)
        p99 = statistics.median(r[rpc]["p99_ms"] for r in rounds)
        print(f"| {rpc} | {counts[rpc]} | {cpu:.0f} | {cpu / noop:.1f} | {p50:.2f} | {p99:.2f} |")
    finish(args.json_out, started, argv, {"rounds": rounds})
    return 0


if __name__ == "__main__":
    sys.exit(main())
