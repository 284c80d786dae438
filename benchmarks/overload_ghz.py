"""Overload with ghz as the load generator: what callers see when they offer 2x and 4x.

The Python load generator of benchmarks.overload cannot offer 4x Apply on this machine (it
spends its CPU on its own calls). ghz (Go, `.ci/tools/go/bin/ghz`) can: `--async --rps R` sends
R calls a second whatever the answers, each with a 1 s deadline (`-t 1s`), over 8 connections.
For each server variant and RPC, on a fresh server (`--workers 2`, the chart's settings):

- capacity: 16 calls in flight, each sent when the previous one ends (ghz `-c 16`);
- 2x and 4x: ghz offers 2 (4) times that capacity per second for the phase's length;
- N in flight (`--in-flight N`): a closed loop of N calls with 1 s deadlines, each sent as the
  last one ends (a gateway with many callers, which sends again at once when refused).

Per phase: goodput (OK calls per second over the capacity's), the callers' outcomes by code and
by reason (from the status message: ghz keeps no ErrorInfo), the server's own counts over the
phase (/metrics before and after: codes and refusals by reason), and health probes from another
process every 0.5 s on a new connection each (benchmarks.overload.probing): p99 and max.
With `--health-port`, the server has its health port on (service/health.py) and a second
prober, in a process of its own, probes that port alongside the main port's, in the same
phase (`health probe` p99 and max).
The calls ghz still has in flight when a phase ends are cut by ghz itself (UNAVAILABLE "use of
closed network connection" or "transport is closing", or CANCELLED "client connection is
closing"); they are listed apart as `cut by ghz`, and the server counts them as their clients
went away.

Variants are those of benchmarks.overload (`sync`, `sync/admission-limit=32`, `/threads=N`,
`/switch=S`, `/pending=N`, `/grpc-limit=N`); `--tree REV` runs the plain variants from a git
worktree of REV (so that others' uncommitted work in a shared checkout does not enter the
figures).

    .venv/bin/python -m benchmarks.overload_ghz --runs 3 --json overload-ghz.json
    .venv/bin/python -m benchmarks.overload_ghz --variants sync --rpcs Apply --seconds 5
    .venv/bin/python -m benchmarks.overload_ghz --runs 3 --health-port --factors 4
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from benchmarks import overload
from benchmarks.measure import finish, header, load_average, now, percentile
from benchmarks.servers import ROOT, cpu_seconds, worktree

GHZ = ROOT / ".ci" / "tools" / "go" / "bin" / "ghz"
DATA = {"SuggestMove": "suggest_move.json", "Apply": "apply.json"}
CAPACITY_IN_FLIGHT = 16
CONNECTIONS = 8
DEADLINE = "1s"
WARM_UP_SECONDS = 3
# ghz's own end-of-run cuts: the calls it still had in flight when its duration ended.
GHZ_CUTS = ("use of closed network connection", "transport is closing", "client connection is")
# Caller-side reason of a refusal, by a phrase of its status message (ghz keeps no ErrorInfo).
REASONS = (
    ("This server holds", "OVERLOADED"),
    ("larger than max", "REQUEST_TOO_LARGE"),
    ("a search of its budget takes", "DEADLINE_TOO_SHORT"),
    ("deadline passed before the server", "DEADLINE_EXPIRED"),
    ("Concurrent RPC limit", "grpc concurrency limit"),
    ("context deadline exceeded", "caller's deadline"),
    ("Deadline Exceeded", "caller's deadline"),
)


def ghz(
    target: str, rpc: str, seconds: float, rps: float | None, in_flight: int = 0
) -> dict[str, Any]:
    """Run ghz once against `target`; return its JSON report. Without `rps`, a closed loop of
    `in_flight` calls with 1 s deadlines, or of the capacity's 16 with 5 s ones."""
    command = [str(GHZ), "--insecure", "--call", f"basra.v1.RulesService.{rpc}"]
    command += ["--data-file", str(ROOT / "deploy" / "ghz" / "data" / DATA[rpc])]
    command += ["--connections", str(CONNECTIONS), "-z", f"{seconds}s", "--format", "json"]
    if rps is None and in_flight:
        command += ["-c", str(in_flight), "-t", DEADLINE]
    elif rps is None:
        command += ["-c", str(CAPACITY_IN_FLIGHT), "-t", "5s"]
    else:
        command += ["--async", "--rps", str(round(rps)), "-c", "64", "-t", DEADLINE]
    with tempfile.TemporaryFile() as out:
        subprocess.run([*command, target], stdout=out, stderr=subprocess.DEVNULL, check=False)
        out.seek(0)
        report: dict[str, Any] = json.load(out)
    return report


def outcomes(report: dict[str, Any]) -> tuple[Counter[str], Counter[str], int]:
    """The callers' outcomes: by code, by refusal reason, and the calls ghz cut at its end."""
    codes: Counter[str] = Counter(report.get("statusCodeDistribution") or {})
    reasons: Counter[str] = Counter()
    cut = 0
    for message, count in (report.get("errorDistribution") or {}).items():
        if any(phrase in message for phrase in GHZ_CUTS):
            cut += count
            continue
        reason = next((name for phrase, name in REASONS if phrase in message), None)
        code = message.split("code = ", 1)[-1].split(" ", 1)[0]
        reasons[f"{code} {reason or '-'}"] += count
    for message, count in (report.get("errorDistribution") or {}).items():
        if any(phrase in message for phrase in GHZ_CUTS):
            code = message.split("code = ", 1)[-1].split(" ", 1)[0]
            codes[code] -= count
    return +codes, reasons, cut


@dataclass(frozen=True)
class Phase:
    """One phase's figures."""

    variant: str
    rpc: str
    phase: str
    offered_per_second: float
    ok_per_second: float
    goodput: float
    codes: dict[str, int]
    reasons: dict[str, int]
    cut_by_ghz: int
    server: dict[str, float]
    server_cpu_seconds: float
    probe_p99_ms: float
    probe_max_ms: float
    probe_failures: int
    health_probe_p99_ms: float
    health_probe_max_ms: float
    health_probe_failures: int
    """The health port's probes (0 without --health-port)."""
    load: str


def run_phase(
    server: Any,
    variant: str,
    rpc: str,
    name: str,
    *,
    seconds: float,
    rps: float | None,
    base: float,
    probe_period: float = overload.PROBE_PERIOD,
    in_flight: int = 0,
) -> Phase:
    """Offer one phase's load with probes alongside; count what both sides saw."""
    before = overload.scrape(server)
    used = cpu_seconds(server.pids)
    with contextlib.ExitStack() as probers:
        probes = probers.enter_context(overload.probing(server.address, probe_period))
        health: list[tuple[float, bool]] = []
        if server.health_port is not None:
            target = f"127.0.0.1:{server.health_port}"
            health = probers.enter_context(overload.probing(target, probe_period))
        report = ghz(server.address, rpc, seconds, rps, in_flight)
    used = cpu_seconds(server.pids) - used
    time.sleep(overload.SCRAPE_DELAY)
    counted = overload.server_counts(before, overload.scrape(server), rpc)
    codes, reasons, cut = outcomes(report)
    ok = codes.get("OK", 0) / seconds
    waits = sorted(s for s, _ in probes)
    health_waits = sorted(s for s, _ in health)
    return Phase(
        variant=variant,
        rpc=rpc,
        phase=name,
        offered_per_second=rps or 0.0,
        ok_per_second=ok,
        goodput=ok / base if base else 1.0,
        codes=dict(codes),
        reasons=dict(reasons),
        cut_by_ghz=cut,
        server=counted,
        server_cpu_seconds=used,
        probe_p99_ms=percentile(waits, 0.99) * 1000 if waits else 0.0,
        probe_max_ms=waits[-1] * 1000 if waits else 0.0,
        probe_failures=sum(1 for _, good in probes if not good),
        health_probe_p99_ms=percentile(health_waits, 0.99) * 1000 if health_waits else 0.0,
        health_probe_max_ms=health_waits[-1] * 1000 if health_waits else 0.0,
        health_probe_failures=sum(1 for _, good in health if not good),
        load=" ".join(load_average()),
    )


def run_rpc(variant: str, tree: Path | None, rpc: str, args: argparse.Namespace) -> list[Phase]:
    """Capacity, then each overload factor, on a fresh server of `variant`."""
    phases: list[Phase] = []
    with overload.server_of(variant, tree, args.workers, args.health_port) as server:
        ghz(server.address, rpc, WARM_UP_SECONDS, None)
        base = run_phase(
            server,
            variant,
            rpc,
            "capacity",
            seconds=args.seconds,
            rps=None,
            base=0.0,
            probe_period=args.probe_period,
        )
        phases.append(base)
        for factor in args.factors:
            time.sleep(overload.SETTLE_SECONDS)
            rate = factor * base.ok_per_second
            name = f"{factor:g}x"
            phases.append(
                run_phase(
                    server,
                    variant,
                    rpc,
                    name,
                    seconds=args.seconds,
                    rps=rate,
                    base=base.ok_per_second,
                    probe_period=args.probe_period,
                )
            )
        for in_flight in args.in_flight:
            time.sleep(overload.SETTLE_SECONDS)
            phases.append(
                run_phase(
                    server,
                    variant,
                    rpc,
                    f"{in_flight} in flight",
                    seconds=args.seconds,
                    rps=None,
                    base=base.ok_per_second,
                    probe_period=args.probe_period,
                    in_flight=in_flight,
                )
            )
    return phases


def line(phase: Phase) -> str:
    """One phase as a line of text."""
    server = ", ".join(f"{k} {v:.0f}" for k, v in sorted(phase.server.items()))
    reasons = ", ".join(f"{k} {v}" for k, v in sorted(phase.reasons.items()))
    return (
        f"  {phase.variant:24} {phase.rpc:11} {phase.phase:8} offered/s "
        f"{phase.offered_per_second:6.0f} ok/s {phase.ok_per_second:6.0f} goodput "
        f"{phase.goodput:4.2f} | callers [{reasons}] cut by ghz {phase.cut_by_ghz} | server "
        f"[{server}] cpu {phase.server_cpu_seconds:.1f} s | probe p99 {phase.probe_p99_ms:.0f} "
        f"max {phase.probe_max_ms:.0f} ms fail {phase.probe_failures}{_health_part(phase)} "
        f"| load {phase.load}"
    )


def _health_part(phase: Phase) -> str:
    """The health port's probes, when they were measured."""
    if not (phase.health_probe_max_ms or phase.health_probe_failures):
        return ""
    return (
        f" | health probe p99 {phase.health_probe_p99_ms:.0f} max "
        f"{phase.health_probe_max_ms:.0f} ms fail {phase.health_probe_failures}"
    )


def medians(phases: Sequence[Phase]) -> list[dict[str, Any]]:
    """Per variant, RPC and phase: medians of goodput and probes, mean counts per run."""
    groups: dict[tuple[str, str, str], list[Phase]] = {}
    for phase in phases:
        groups.setdefault((phase.variant, phase.rpc, phase.phase), []).append(phase)
    rows = []
    for (variant, rpc, name), runs in groups.items():
        row: dict[str, Any] = {"variant": variant, "rpc": rpc, "phase": name, "runs": len(runs)}
        keys = ("ok_per_second", "goodput", "probe_p99_ms", "probe_max_ms")
        for key in (*keys, "health_probe_p99_ms", "health_probe_max_ms"):
            row[key] = statistics.median(getattr(run, key) for run in runs)
        reasons: Counter[str] = Counter()
        server: dict[str, float] = {}
        for run in runs:
            reasons.update(run.reasons)
            for key, value in run.server.items():
                if key.startswith("refused"):
                    server[key] = server.get(key, 0.0) + value
            # What gRPC core refused (or still held) before the server took it in.
            core = run.server.get("arrived", 0.0) - run.server.get("taken_in", 0.0)
            server["refused by core"] = server.get("refused by core", 0.0) + core
        row["callers_per_run"] = {k: round(v / len(runs)) for k, v in sorted(reasons.items())}
        row["server_per_run"] = {k: round(v / len(runs)) for k, v in sorted(server.items())}
        rows.append(row)
    return rows


def table(rows: Sequence[dict[str, Any]]) -> str:
    """The medians as a Markdown table."""
    out = [
        "| variant | RPC | load | goodput | probe p99 / max | health port p99 / max "
        "| callers' refusals | server's |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        callers = ", ".join(f"{k} {v}" for k, v in row["callers_per_run"].items())
        server = ", ".join(
            f"{k.removeprefix('refused ')} {v}" for k, v in row["server_per_run"].items()
        )
        out.append(
            f"| {row['variant']} | {row['rpc']} | {row['phase']} | {row['goodput']:.2f} "
            f"| {row['probe_p99_ms']:.0f} / {row['probe_max_ms']:.0f} ms "
            f"| {_health_cell(row)} | {callers or '-'} | {server or '-'} |"
        )
    return "\n".join(out)


def _health_cell(row: dict[str, Any]) -> str:
    """The health port's probe p99 / max, or "-" when it was not probed."""
    if not row["health_probe_max_ms"]:
        return "-"
    return f"{row['health_probe_p99_ms']:.0f} / {row['health_probe_max_ms']:.0f} ms"


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark; print each phase, then the medians over the runs."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.overload_ghz", description=__doc__)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--variants", type=lambda s: s.split(","), default=["sync"])
    parser.add_argument("--rpcs", type=lambda s: s.split(","), default=["SuggestMove", "Apply"])
    parser.add_argument("--factors", type=lambda s: [float(x) for x in s.split(",")])
    parser.add_argument(
        "--in-flight",
        type=lambda s: [int(x) for x in s.split(",") if x],
        default=[],
        help="closed-loop phases after the factors: this many calls in flight, 1 s deadlines",
    )
    parser.add_argument("--seconds", type=float, default=8.0, help="length of each phase")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--tree", help="run the plain variants from a worktree of this revision")
    parser.add_argument("--json", type=Path, help="write every phase and the medians here")
    parser.add_argument(
        "--probe-period",
        type=float,
        default=overload.PROBE_PERIOD,
        help="seconds between probes (0.5: a p99 of 16 probes in 8 s is their max)",
    )
    parser.add_argument(
        "--health-port",
        action="store_true",
        help="turn the server's health port on and probe it too, beside the main port",
    )
    args = parser.parse_args(argv)
    args.factors = args.factors or [2.0, 4.0]
    started = now()
    print(header("overload_ghz", started, argv), flush=True)
    phases: list[Phase] = []
    with contextlib.ExitStack() as stack:
        tree = stack.enter_context(worktree(args.tree)) if args.tree else None
        for number in range(args.runs):
            print(f"run {number + 1} of {args.runs}", flush=True)
            shift = number % len(args.variants)
            for variant in args.variants[shift:] + args.variants[:shift]:
                for rpc in args.rpcs:
                    for phase in run_rpc(variant, tree, rpc, args):
                        phases.append(phase)
                        print(line(phase), flush=True)
    rows = medians(phases)
    print(f"\nmedians of {args.runs} run(s):\n{table(rows)}")
    finish(args.json, started, argv, {"phases": [asdict(p) for p in phases], "medians": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
