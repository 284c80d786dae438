"""What each STRONG budget buys: win rates against GREEDY and the default STRONG, CPU per decision.

For each budget (`DEALS:NODES`), STRONG at that budget plays duplicate matches against GREEDY
and against STRONG at the default budget (benchmarks/bot_ladder.py, seeds ladder-0, ...), and
its CPU time per decision is measured in process on the same positions for every budget:
every decision of the STRONG seat in whole matches of STRONG (default) against GREEDY, after
warm-up matches, the collector on (as benchmarks/bot_time.py does), pinned to one core with
--cpu. Prints a table, writes the figures (--json-out) and the plot (--png): win rate with
its 95 % Wilson interval against the mean and p99 CPU per decision.

    nice -n 10 .venv/bin/python -m benchmarks.bot_budgets --seeds 200 --procs 2 --cpu 1 \\
        --json-out /tmp/budgets.json --png docs/bot_budgets.png
    .venv/bin/python -m benchmarks.bot_budgets --from-json /tmp/budgets.json \\
        --png docs/bot_budgets.png
    .venv/bin/python -m benchmarks.bot_budgets --from-json /tmp/budgets.json --retime --cpu 1 \\
        --json-out /tmp/budgets-retimed.json --png docs/bot_budgets.png

--retime measures the CPU column again on this checkout and keeps the saved win rates: for a
change that makes the bot faster but answers the same.

The ladder part is counts (deals and nodes, never time), so it may run at low priority
beside other work; the timing part wants a quiet machine.
"""

from __future__ import annotations

import argparse
import gc
import json
import multiprocessing
import os
import platform
import statistics
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from benchmarks import bot_ladder
from benchmarks.bot_time import positions
from benchmarks.measure import command, now, percentile
from engine.bot import DEFAULT_BUDGET, Budget, Level, suggest

BUDGETS = ("1:60", "2:200", "4:500", "8:1100", "16:2200", "32:5000", "64:12000")


def _budget(text: str) -> Budget:
    deals, nodes = (int(x) for x in text.split(":"))
    return Budget(deals, nodes)


def timing(budgets: list[Budget], matches: int, warm: int) -> list[dict[str, float]]:
    """CPU ms per decision of each budget, on the same positions (see the module docstring)."""
    positions(warm, "bot-budgets-warm", DEFAULT_BUDGET)
    timed = positions(matches, "bot-budgets", DEFAULT_BUDGET)
    gc.collect()
    gc.freeze()
    out = []
    for budget in budgets:
        spent = []
        for info in timed:
            start = time.process_time()
            suggest(info, Level.STRONG, b"", budget)
            spent.append((time.process_time() - start) * 1e3)
        spent.sort()
        out.append(
            {
                "decisions": len(spent),
                "p50_ms": percentile(spent, 0.5),
                "p99_ms": percentile(spent, 0.99),
                "max_ms": spent[-1],
                "mean_ms": statistics.mean(spent),
            }
        )
    return out


def main(argv: list[str] | None = None) -> int:
    """Play and time every budget, print the table, write the figures and the plot."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budgets", nargs="+", default=list(BUDGETS), metavar="DEALS:NODES")
    parser.add_argument("--seeds", type=int, default=200, help="duplicate pairs a pairing")
    parser.add_argument("--procs", type=int, default=2)
    parser.add_argument("--matches", type=int, default=20, help="matches of timed positions")
    parser.add_argument("--warm", type=int, default=5)
    parser.add_argument("--cpu", type=int, help="pin the timing to this CPU")
    parser.add_argument("--json-out", type=Path)
    parser.add_argument("--png", type=Path)
    parser.add_argument("--from-json", type=Path, help="plot and print saved figures only")
    parser.add_argument(
        "--retime",
        action="store_true",
        help="with --from-json: time the saved budgets again on this checkout, keep the win rates",
    )
    args = parser.parse_args(argv)
    if args.from_json:
        saved = json.loads(args.from_json.read_text())
        if args.retime:
            saved = _retime(saved, args, argv if argv is not None else sys.argv[1:])
            if args.json_out:
                args.json_out.write_text(json.dumps(saved, indent=2))
    else:
        saved = _measure(args, argv if argv is not None else sys.argv[1:])
        if args.json_out:
            args.json_out.write_text(json.dumps(saved, indent=2))
    _print(saved)
    if args.png:
        plot(saved, args.png)
    return 0


def _measure(args: argparse.Namespace, argv: list[str]) -> dict[str, Any]:
    budgets = [_budget(b) for b in args.budgets]
    started = now()
    default = f"STRONG:{DEFAULT_BUDGET.deals}:{DEFAULT_BUDGET.nodes}"
    rows: list[dict[str, Any]] = []
    with multiprocessing.get_context("fork").Pool(args.procs) as pool:
        for budget in budgets:
            me = f"STRONG:{budget.deals}:{budget.nodes}"
            row: dict[str, Any] = {"deals": budget.deals, "nodes": budget.nodes}
            for name, other in (("greedy", "GREEDY"), ("strong", default)):
                if other == me:
                    continue  # the default against itself: one half by construction
                result = bot_ladder.run_pair(
                    me, other, args.seeds, start=0, budget=DEFAULT_BUDGET, pool=pool
                )
                row[name] = asdict(result)
            rows.append(row)
    _time_rows(rows, budgets, args)
    return {
        "header": (
            f"bot_budgets {started:%Y-%m-%d %H:%M} UTC, commit {_commit()}; command: "
            f"{command('bot_budgets', argv)}; python {platform.python_version()}; "
            f"{2 * args.seeds} duplicate matches a pairing; CPU over the decisions of "
            f"{args.matches} matches"
        ),
        "default": [DEFAULT_BUDGET.deals, DEFAULT_BUDGET.nodes],
        "rows": rows,
    }


def _retime(saved: dict[str, Any], args: argparse.Namespace, argv: list[str]) -> dict[str, Any]:
    """The saved figures with the CPU column measured again and the win rates kept."""
    # The win rates stand only while the bot answers as it did when they were played.
    started = now()
    rows = saved["rows"]
    _time_rows(rows, [Budget(row["deals"], row["nodes"]) for row in rows], args)
    retimed = (
        f"CPU timed again {started:%Y-%m-%d %H:%M} UTC, commit {_commit()}, over the decisions "
        f"of {args.matches} matches: {command('bot_budgets', argv)}"
    )
    return {**saved, "retimed": retimed, "rows": rows}


def _time_rows(rows: list[dict[str, Any]], budgets: list[Budget], args: argparse.Namespace) -> None:
    """Put each budget's CPU per decision into its row, pinned to --cpu when given."""
    if args.cpu is not None:
        os.sched_setaffinity(0, {args.cpu})
    for row, timed in zip(rows, timing(budgets, args.matches, args.warm), strict=True):
        row["cpu"] = timed


def _commit() -> str:
    """The short hash of the checkout's HEAD (empty outside git)."""
    return subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], check=False, capture_output=True, text=True
    ).stdout.strip()


def _cell(result: dict[str, Any] | None) -> str:
    if result is None:
        return "(itself)"
    return (
        f"{100 * result['win_rate']:.1f}% ({100 * result['win_low']:.1f}-"
        f"{100 * result['win_high']:.1f}), {result['margin_per_hand']:+.1f}"
    )


def _print(saved: dict[str, Any]) -> None:
    print(saved["header"])
    if "retimed" in saved:
        print(saved["retimed"])
    print(
        "| budget (deals, nodes) | v GREEDY: win rate (95% CI), margin a hand "
        "| v default STRONG | CPU ms a decision: mean, p50, p99, max |"
    )
    print("|---|---|---|---|")
    for row in saved["rows"]:
        cpu = row["cpu"]
        print(
            f"| {row['deals']}, {row['nodes']:,} | {_cell(row.get('greedy'))} | "
            f"{_cell(row.get('strong'))} | {cpu['mean_ms']:.2f}, {cpu['p50_ms']:.2f}, "
            f"{cpu['p99_ms']:.2f}, {cpu['max_ms']:.2f} |"
        )


def plot(saved: dict[str, Any], path: Path) -> None:
    """Win rate against CPU per decision, one line per opponent, error bars the intervals."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import ScalarFormatter

    rows = saved["rows"]
    figure, axes = plt.subplots(figsize=(8, 5), dpi=110)
    for key, label, marker in (
        ("greedy", "against GREEDY", "o"),
        ("strong", "against STRONG at the default budget", "s"),
    ):
        points = [(r["cpu"]["p99_ms"], r[key], r) for r in rows if key in r]
        if not points:
            continue
        xs = [p for p, _, _ in points]
        ys = [100 * res["win_rate"] for _, res, _ in points]
        low = [100 * (res["win_rate"] - res["win_low"]) for _, res, _ in points]
        high = [100 * (res["win_high"] - res["win_rate"]) for _, res, _ in points]
        axes.errorbar(xs, ys, yerr=[low, high], marker=marker, capsize=3, label=label)
        for x, y, (_, _, r) in zip(xs, ys, points, strict=True):
            axes.annotate(
                f"{r['deals']}/{r['nodes']}",
                (x, y),
                textcoords="offset points",
                xytext=(4, -12),
                fontsize=7,
            )
    axes.axhline(50, color="grey", linewidth=0.5)
    axes.set_xscale("log")
    axes.xaxis.set_major_formatter(ScalarFormatter())
    axes.set_xlabel("CPU ms per decision, p99 (one core, in process)")
    axes.set_ylabel("match win rate, % (95 % Wilson interval)")
    axes.set_title("STRONG: what each budget (deals/nodes) buys")
    axes.legend(loc="lower right")
    axes.grid(True, which="both", linewidth=0.3)
    footer = saved["header"][:150]
    if "retimed" in saved:
        footer += "\n" + saved["retimed"][:150]
    figure.text(0.01, 0.01, footer, fontsize=5, color="grey")
    figure.tight_layout(rect=(0, 0.04, 1, 1))
    figure.savefig(path, metadata={"Software": None})
    plt.close(figure)


if __name__ == "__main__":
    sys.exit(main())
