"""CPU time of one STRONG decision at the default budget, in process, as a worker makes it.

The process starts as a service worker does (the plan table installed, then everything so
far moved out of the collector's sight with gc.freeze(); the collector stays on), plays
warm-up matches until the memos are full (a worker that has been up a while), and then times
every decision of the STRONG seat in whole matches of STRONG against GREEDY (both seats in
turn) with time.process_time(), each the first time it is made: round starts, the last
round and single moves come in the proportions real play has them, and no decision finds
the memos filled by its own earlier search. Prints p50, p90, p99, max and mean, the nodes
searched, the fill of the bot's memos, and the slowest decisions with the collections that
ran inside them. Run it pinned to one core:

    taskset -c 1 .venv/bin/python -m benchmarks.bot_time
    taskset -c 1 .venv/bin/python -m benchmarks.bot_time --matches 20 --deals 16 --nodes 2500
"""

from __future__ import annotations

import argparse
import gc
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.measure import finish, header, memo_fill, now, percentile
from engine import Action, Status, apply, new_match
from engine.bot import DEFAULT_BUDGET, Budget, Level, Suggestion, suggest
from engine.bot.moves import clearers, distinct_cards, steps_on
from engine.infoset import InformationSet
from engine.view import information_set
from service import plan_table


def positions(
    matches: int,
    tag: str,
    budget: Budget,
    decide: Callable[[InformationSet], Suggestion] | None = None,
) -> list[InformationSet]:
    """Every information set at which the STRONG seat decides, over whole matches; `decide`,
    when given, makes the STRONG seat's decisions instead, and nothing is kept."""
    found: list[InformationSet] = []
    for number in range(matches):
        state, _ = new_match(f"{tag}-{number}".encode())
        strong = number % 2
        while state.status is Status.IN_PROGRESS:
            seat = state.to_move
            assert seat is not None
            info = information_set(state, seat)
            level = Level.STRONG if seat == strong else Level.GREEDY
            if level is Level.STRONG and decide is not None:
                chosen = decide(info)
            else:
                if level is Level.STRONG:
                    found.append(info)
                chosen = suggest(info, level, b"", budget)
            state, _ = apply(state, Action(seat, chosen.card, chosen.plan_id), check=False)
    return found


def main(argv: list[str] | None = None) -> int:
    """Time the decisions and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--matches", type=int, default=100, help="matches of timed decisions")
    parser.add_argument("--warm", type=int, default=100, help="matches played first, untimed")
    parser.add_argument("--deals", type=int, default=DEFAULT_BUDGET.deals)
    parser.add_argument("--nodes", type=int, default=DEFAULT_BUDGET.nodes)
    parser.add_argument("--json-out", type=Path)
    args = parser.parse_args(argv)
    started = now()
    budget = Budget(args.deals, args.nodes)
    plan_table.install()
    gc.collect()
    gc.freeze()
    positions(args.warm, "bot-time-warm", budget)
    pauses: list[tuple[float, int]] = []
    began: list[float] = []

    def observe(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            began.append(time.process_time())
        else:
            pauses.append((time.process_time() - began.pop(), int(info["generation"])))

    rows: list[dict[str, Any]] = []

    def timed(info: InformationSet) -> Suggestion:
        seen = len(pauses)
        start = time.process_time()
        answer = suggest(info, Level.STRONG, b"", budget)
        spent = time.process_time() - start
        collections = pauses[seen:]
        rows.append(
            {
                "ms": spent * 1e3,
                "nodes": answer.nodes,
                "deals": answer.deals,
                "reason": answer.reason.value,
                "plays_left_in_round": len(info.hand) + info.opponent_hand_size,
                "last_round": info.deck_size == 0,
                "gc_ms": sum(p for p, _ in collections) * 1e3,
                "gc_generations": [g for _, g in collections],
            }
        )
        return answer

    gc.callbacks.append(observe)
    positions(args.matches, "bot-time", budget, decide=timed)
    gc.callbacks.remove(observe)
    times = sorted(r["ms"] for r in rows)
    nodes = sorted(r["nodes"] for r in rows)
    print(
        f"{header('bot_time', started, argv)}\n"
        f"python {platform.python_version()}; budget {budget.deals} deals, {budget.nodes} "
        f"nodes; {len(rows)} STRONG decisions of {args.matches} matches against GREEDY, after "
        f"{args.warm} warm-up matches; gc on, start-up objects frozen; memos: "
        f"{memo_fill(steps_on, clearers, distinct_cards)}"
    )
    print(
        f"CPU ms per decision: p50 {percentile(times, 0.5):.2f}, p90 {percentile(times, 0.9):.2f}, "
        f"p99 {percentile(times, 0.99):.2f}, max {times[-1]:.2f}, mean {statistics.mean(times):.2f}"
    )
    print(
        f"nodes per decision: p50 {percentile(nodes, 0.5):.0f}, p99 {percentile(nodes, 0.99):.0f}, "
        f"max {nodes[-1]}; full collections during decisions: "
        f"{sum(1 for _, g in pauses if g == 2)} (longest "
        f"{max((p for p, g in pauses if g == 2), default=0.0) * 1e3:.1f} ms)"
    )
    by_kind: dict[str, list[float]] = {}
    for r in rows:
        kind = "last round" if r["last_round"] else f"{r['plays_left_in_round']} plays left"
        by_kind.setdefault(kind, []).append(r["ms"])
    for kind in sorted(by_kind):
        ordered = sorted(by_kind[kind])
        print(
            f"  {kind:>13}: {len(ordered):4d} decisions, p50 {percentile(ordered, 0.5):.2f}, "
            f"p99 {percentile(ordered, 0.99):.2f}, max {ordered[-1]:.2f} ms"
        )
    print("slowest decisions:")
    for r in sorted(rows, key=lambda r: -float(r["ms"]))[:5]:
        print(
            f"  {r['ms']:.2f} ms, {r['nodes']} nodes, {r['reason']}, collections inside "
            f"{r['gc_generations']} ({r['gc_ms']:.2f} ms)"
        )
    finish(args.json_out, started, argv, {"rows": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
