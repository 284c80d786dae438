"""`basra-rules load` against ghz: the same config sent to the same server, in one run.

Both load generators run as their users run them, as child processes from the repository
root: `basra-rules load CONFIG --host ADDRESS -n CALLS --json` and
`ghz --config CONFIG -n CALLS -O json ADDRESS`, against one `basra-rules serve --workers 2
--log-level warning` (the server docs/load-testing.md starts for load), each config with its
own concurrency and connections. Rounds alternate which generator goes first, so drift on
the machine hits both alike. Per generator it reports the medians over the rounds of calls
per second, p50 and p99 (from each tool's own JSON report), the generator's own CPU per call
(from the kernel's account of the reaped child, less the CPU of a one-call run: its start)
and the server's CPU per call (from /proc):
the generator shares the 2 cores with the server, so a costlier generator leaves the server
less CPU and lowers the rate it can show.

    .venv/bin/python -m benchmarks.generators --rounds 5 --calls 5000
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.measure import finish, header, machine, now
from benchmarks.servers import Server, cpu_seconds, served
from testkit import ghz_tool, harness

GENERATORS = ("basra-rules load", "ghz")


def command(generator: str, config: str, address: str, calls: int) -> list[str]:
    """The command line of one run of a generator."""
    if generator == "ghz":
        return [str(ghz_tool.GHZ), "--config", config, "-n", str(calls), "-O", "json", address]
    return [*harness.command(), "load", config, "--host", address, "-n", str(calls), "--json"]


def one_run(generator: str, config: str, server: Server, calls: int) -> dict[str, Any]:
    """Run one generator once; return its figures."""
    before = cpu_seconds(server.pids)
    done = ghz_tool.run(command(generator, config, server.address, calls))
    used = cpu_seconds(server.pids) - before
    report = done.report()
    percentiles = {e["percentage"]: e["latency"] for e in report["latencyDistribution"]}
    count = int(report["count"])
    return {
        "generator": generator,
        "calls": count,
        "ok": report["statusCodeDistribution"].get("OK", 0),
        "rps": report["rps"],
        "p50_ms": percentiles[50] / 1e6,
        "p99_ms": percentiles[99] / 1e6,
        "generator_cpu_us": done.cpu_seconds / count * 1e6,
        "server_cpu_us": used / count * 1e6,
    }


FIGURES = ("rps", "p50_ms", "p99_ms", "generator_cpu_us", "server_cpu_us")
STARTS = 3


def start_cpu_seconds(generator: str, config: str, server: Server) -> float:
    """The generator's CPU for a one-call run (start-up, config and data, one call): median."""
    runs = []
    for _ in range(STARTS):
        done = ghz_tool.run(command(generator, config, server.address, 1))
        done.report()
        runs.append(done.cpu_seconds)
    return statistics.median(runs)


def compare(config: str, server: Server, args: argparse.Namespace) -> dict[str, Any]:
    """Alternating rounds of both generators on one config; the medians per generator."""
    for generator in GENERATORS:  # warm-up: the server's caches, each tool's start
        one_run(generator, config, server, args.calls // 5)
    starts = {g: start_cpu_seconds(g, config, server) for g in GENERATORS}
    rounds: list[dict[str, Any]] = []
    for number in range(args.rounds):
        order = GENERATORS if number % 2 == 0 else GENERATORS[::-1]
        for generator in order:
            run = one_run(generator, config, server, args.calls)
            spent = run["generator_cpu_us"] * run["calls"] / 1e6 - starts[generator]
            rounds.append({**run, "generator_cpu_us": spent / run["calls"] * 1e6})
    medians = {
        generator: {
            figure: statistics.median(r[figure] for r in rounds if r["generator"] == generator)
            for figure in FIGURES
        }
        for generator in GENERATORS
    }
    errors = sum(r["calls"] - r["ok"] for r in rounds)
    return {
        "config": config,
        "medians": medians,
        "start_cpu_seconds": starts,
        "errors": errors,
        "rounds": rounds,
    }


def paired(result: dict[str, Any]) -> dict[str, float]:
    """Per figure, the median over the rounds of ghz's figure over basra-rules load's in the
    same round (the two ran back to back, so the machine's drift mostly cancels)."""
    pairs = _pairs(result)
    return {f: statistics.median(g[f] / ours[f] for g, ours in pairs) for f in FIGURES}


def _pairs(result: dict[str, Any]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    by = {g: [r for r in result["rounds"] if r["generator"] == g] for g in GENERATORS}
    return list(zip(by["ghz"], by["basra-rules load"], strict=True))


def report(results: Sequence[dict[str, Any]]) -> str:
    """The medians side by side, and ghz over basra-rules load round by round."""
    lines = [
        f"{'config':<28} {'generator':<17} {'calls/s':>8} {'p50 ms':>7} {'p99 ms':>7} "
        f"{'gen CPU µs/call':>15} {'server CPU µs/call':>18}"
    ]
    for result in results:
        for generator in GENERATORS:
            m = result["medians"][generator]
            lines.append(
                f"{result['config']:<28} {generator:<17} {m['rps']:>8.0f} {m['p50_ms']:>7.2f} "
                f"{m['p99_ms']:>7.2f} {m['generator_cpu_us']:>15.0f} {m['server_cpu_us']:>18.0f}"
            )
        starts = ", ".join(f"{g} {s:.2f} s" for g, s in result["start_cpu_seconds"].items())
        lines.append(f"{'':<28} start-up CPU (one-call run, not in gen CPU): {starts}")
        q = paired(result)
        lines.append(
            f"{'':<28} {'ghz / load':<17} {q['rps']:>8.2f} {q['p50_ms']:>7.2f} "
            f"{q['p99_ms']:>7.2f} {q['generator_cpu_us']:>15.2f} {q['server_cpu_us']:>18.2f}"
            + (f"  errors {result['errors']}" if result["errors"] else "")
        )
        lowest, highest = (
            min(r["rps"] / o["rps"] for r, o in _pairs(result)),
            max(r["rps"] / o["rps"] for r, o in _pairs(result)),
        )
        lines.append(f"{'':<28} ghz / load calls/s by round: {lowest:.2f} to {highest:.2f}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Run both generators on each config against one server; print and save the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--configs", nargs="+", default=["deploy/ghz/apply.json"], help="ghz configs, from root"
    )
    parser.add_argument("--rounds", type=int, default=5, help="rounds of both generators")
    parser.add_argument("--calls", type=int, default=5000, help="calls per run")
    parser.add_argument("--json-out", type=Path, help="also write the results as JSON")
    parser.add_argument("--from-json", type=Path, help="print a saved run (--json-out) again")
    args = parser.parse_args(argv)
    if args.from_json:
        saved = json.loads(args.from_json.read_text())
        print(f"{args.from_json}: {saved['started']}; command: {' '.join(saved['argv'] or [])}")
        print(report(saved["results"]))
        return 0
    if not ghz_tool.GHZ.is_file():
        print(ghz_tool.MISSING, file=sys.stderr)
        return 2
    started = now()
    with served(2, "warning") as server:
        results = [compare(config, server, args) for config in args.configs]
    print(
        f"{header('generators', started, argv)}\n"
        f"machine: {json.dumps(machine())}\n"
        f"server: basra-rules serve --workers 2 --log-level warning; {args.rounds} rounds of "
        f"{args.calls} calls per generator, alternating; each config's concurrency and "
        "connections"
    )
    print(report(results))
    finish(args.json_out, started, argv, {"results": results})
    return 0


if __name__ == "__main__":
    sys.exit(main())
