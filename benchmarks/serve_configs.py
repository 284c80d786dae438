"""What the server's defaults cost: Apply load against `basra-rules serve`, per configuration.

The quick start runs the server on its defaults (1 worker, a log line per call at info); the
load figures of BENCHMARKS.md were measured with 2 workers at warning. This starts one
`basra-rules serve` per configuration (testkit's launcher, sync server) and sends each the load
of deploy/ghz/apply.json (16 calls in flight over max(8, workers) connections) in rounds that
rotate the order of the configurations, so that drift hits all alike. It reports the medians of
Apply calls per wall second (client and server share the machine) and per server CPU-second,
each also relative to the first configuration given.

    .venv/bin/python -m benchmarks.serve_configs           # 1:info, 1:warning, 2:info, 2:warning
    .venv/bin/python -m benchmarks.serve_configs --configs 1:info 2:warning --rounds 3
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Sequence
from contextlib import ExitStack
from dataclasses import asdict, dataclass
from pathlib import Path

from benchmarks.measure import finish, header, machine, now
from benchmarks.servers import Measure, apply_requests, measure, served

DEFAULT_CONFIGS = ("1:info", "1:warning", "2:info", "2:warning")


@dataclass(frozen=True)
class Figures:
    """Medians over the rounds of one configuration."""

    workers: int
    log_level: str
    apply_per_wall_second: float
    apply_per_cpu_second: float
    p50_ms: float
    p99_ms: float
    errors: int


def _config(text: str) -> tuple[int, str]:
    workers, _, level = text.partition(":")
    return int(workers), level or "info"


def main(argv: Sequence[str] | None = None) -> int:
    """Measure each configuration; print the table (and optionally save it as JSON)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--configs",
        nargs="+",
        default=list(DEFAULT_CONFIGS),
        help="WORKERS:LOG_LEVEL of each server; the first is the reference (default: the "
        "quick start's 1:info)",
    )
    parser.add_argument("--rounds", type=int, default=5, help="rounds per configuration")
    parser.add_argument("--calls", type=int, default=4000, help="Apply calls per round")
    parser.add_argument("--concurrency", type=int, default=16, help="calls in flight")
    parser.add_argument("--connections", type=int, default=8, help="client connections")
    parser.add_argument("--json-out", type=Path, help="also write the results as JSON")
    args = parser.parse_args(argv)
    configs = [_config(c) for c in args.configs]
    requests, _ = apply_requests()
    started = now()
    runs: dict[tuple[int, str], list[Measure]] = {c: [] for c in configs}
    with ExitStack() as stack:
        servers = {c: stack.enter_context(served(c[0], c[1])) for c in configs}

        def one(config: tuple[int, str], calls: int) -> Measure:
            return measure(
                servers[config],
                "Apply",
                requests,
                calls=calls,
                concurrency=args.concurrency,
                connections=max(args.connections, config[0]),
            )

        for config in configs:  # warm-up: connections, imports, the engine's memos
            one(config, args.calls // 4)
        for number in range(args.rounds):
            shift = number % len(configs)
            for config in configs[shift:] + configs[:shift]:
                runs[config].append(one(config, args.calls))
    figures = [
        Figures(
            workers=workers,
            log_level=level,
            apply_per_wall_second=statistics.median(r.per_wall_second for r in found),
            apply_per_cpu_second=statistics.median(r.per_cpu_second for r in found),
            p50_ms=statistics.median(r.p50_ms for r in found),
            p99_ms=statistics.median(r.p99_ms for r in found),
            errors=sum(r.errors for r in found),
        )
        for (workers, level), found in runs.items()
    ]
    print(
        f"{header('serve_configs', started, argv)}\n"
        f"machine: {json.dumps(machine())}\n"
        f"sync server, {args.rounds} rounds of {args.calls} Apply calls, concurrency "
        f"{args.concurrency}, connections max({args.connections}, workers)\n"
    )
    first = figures[0]
    print(
        f"{'workers':>7} {'log level':>9} {'Apply/s':>8} {'x':>5} {'Apply/cpu-s':>11} {'x':>5} "
        f"{'p50 ms':>7} {'p99 ms':>7} {'errors':>6}"
    )
    for f in figures:
        print(
            f"{f.workers:>7} {f.log_level:>9} {f.apply_per_wall_second:>8.0f} "
            f"{f.apply_per_wall_second / first.apply_per_wall_second:>5.2f} "
            f"{f.apply_per_cpu_second:>11.0f} "
            f"{f.apply_per_cpu_second / first.apply_per_cpu_second:>5.2f} "
            f"{f.p50_ms:>7.2f} {f.p99_ms:>7.2f} {f.errors:>6}"
        )
    rounds = {f"{w}:{level}": [asdict(r) for r in found] for (w, level), found in runs.items()}
    written = {"figures": [asdict(f) for f in figures], "rounds": rounds}
    finish(args.json_out, started, argv, written)
    return 1 if any(f.errors for f in figures) else 0


if __name__ == "__main__":
    sys.exit(main())
