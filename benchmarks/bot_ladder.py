"""The bot ladder: levels against each other on duplicate deals, match win rates and margins.

Each pairing plays whole matches in process (engine.bot on information sets, engine.apply),
every seed twice with the seats swapped, so both sides get the same cards. Reported per
pairing: matches, the first level's match win rate with a 95 % Wilson interval, and its mean
point margin per hand (total points minus the opponent's, over all hands played) with a 95 %
interval over the duplicate pairs.

    .venv/bin/python -m benchmarks.bot_ladder                                  # the full ladder
    .venv/bin/python -m benchmarks.bot_ladder --pair STRONG GREEDY 1000 --procs 2
    taskset -c 1 .venv/bin/python -m benchmarks.bot_ladder --pair GREEDY RANDOM 100 --procs 1

A side is a player of benchmarks/bot_players.py: a level (RANDOM, GREEDY, STRONG), BASE (the
STRONG of another checkout, --baseline TREE) or a peeker (PEEK_HAND, PEEK_DECK: the ceiling),
each optionally with a budget of its own (`STRONG:8:1000`). --set changes a module constant
of this checkout's bot for the run (screening a lever before it is written in):

    git worktree add /tmp/base 78cc514
    nice -n 10 .venv/bin/python -m benchmarks.bot_ladder --baseline /tmp/base --pair STRONG BASE 9
    nice -n 10 .venv/bin/python -m benchmarks.bot_ladder --pair PEEK_HAND GREEDY 200
    nice -n 10 .venv/bin/python -m benchmarks.bot_ladder --pair STRONG GREEDY 200 \
        --set levels.MAX_DEPTH=6

Runs on other seeds (--start) add up: --merge reads the --json-out files of several runs and
prints each pairing pooled over them (matches and wins summed, the Wilson interval of the
sum, the margin per hand over all hands; the margin's interval joins the runs' intervals as
independent estimates weighted by hands).
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import multiprocessing
import platform
import statistics
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from benchmarks import bot_players
from benchmarks.measure import finish, header, now
from engine import Status, apply, new_match
from engine.bot import DEFAULT_BUDGET, Budget

# Seeds per pairing (matches are twice as many): at least 2,000 matches of STRONG v GREEDY.
LADDER = (("STRONG", "GREEDY", 1000), ("GREEDY", "RANDOM", 500), ("STRONG", "RANDOM", 300))
Z95 = 1.959964


@dataclass(frozen=True)
class Match:
    """One match: who won (seat of the first level or not), its margin and its hands."""

    won: bool
    margin: int
    hands: int


_players: dict[tuple[str, Budget], bot_players.Decide] = {}


def _player(spec: str, budget: Budget) -> bot_players.Decide:
    key = (spec, budget)
    if key not in _players:
        _players[key] = bot_players.player(spec, budget)
    return _players[key]


def play(job: tuple[bytes, str, str, bool, int, int]) -> Match:
    """Play one match; `first_seat0` puts the first player in seat 0."""
    seed, first, second, first_seat0, deals, nodes = job
    budget = Budget(deals, nodes)
    sides = (first, second) if first_seat0 else (second, first)
    players = [_player(spec, budget) for spec in sides]
    me = 0 if first_seat0 else 1
    state, _ = new_match(seed)
    while state.status is Status.IN_PROGRESS:
        seat = state.to_move
        assert seat is not None
        state, _ = apply(state, players[seat](state), check=False)
    margin = state.totals[me] - state.totals[1 - me]
    return Match(state.winner == me, margin, state.hand_number)


@dataclass(frozen=True)
class Result:
    """One pairing's figures."""

    first: str
    second: str
    matches: int
    wins: int
    win_rate: float
    win_low: float
    win_high: float
    margin_per_hand: float
    margin_low: float
    margin_high: float
    hands: int
    seconds: float


def wilson(wins: int, n: int) -> tuple[float, float]:
    """The 95 % Wilson score interval of a proportion."""
    p = wins / n
    centre = p + Z95 * Z95 / (2 * n)
    spread = Z95 * math.sqrt(p * (1 - p) / n + Z95 * Z95 / (4 * n * n))
    scale = 1 + Z95 * Z95 / n
    return (centre - spread) / scale, (centre + spread) / scale


def run_pair(
    first: str,
    second: str,
    seeds: int,
    *,
    start: int,
    budget: Budget,
    pool: multiprocessing.pool.Pool,
) -> Result:
    """Play `seeds` duplicate pairs of matches of `first` against `second`."""
    jobs = [
        (f"ladder-{number}".encode(), first, second, first_seat0, budget.deals, budget.nodes)
        for number in range(start, start + seeds)
        for first_seat0 in (True, False)
    ]
    began = time.perf_counter()
    matches = pool.map(play, jobs, chunksize=4)
    seconds = time.perf_counter() - began
    wins = sum(m.won for m in matches)
    hands = sum(m.hands for m in matches)
    margin = sum(m.margin for m in matches)
    # The unit of the interval is a duplicate pair: its margin per hand over both matches.
    pairs = [
        (a.margin + b.margin) / (a.hands + b.hands)
        for a, b in zip(matches[::2], matches[1::2], strict=True)
    ]
    spread = Z95 * statistics.stdev(pairs) / math.sqrt(len(pairs))
    mean = margin / hands
    low, high = wilson(wins, len(matches))
    return Result(
        first,
        second,
        len(matches),
        wins,
        wins / len(matches),
        low,
        high,
        mean,
        mean - spread,
        mean + spread,
        hands,
        seconds,
    )


def main(argv: list[str] | None = None) -> int:
    """Play the ladder (or the pairs given) and print a table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--pair",
        nargs=3,
        action="append",
        metavar=("FIRST", "SECOND", "SEEDS"),
        help="a pairing and its number of seeds (default: the whole ladder)",
    )
    parser.add_argument(
        "--seeds", type=int, help="seeds of every pairing, in place of the pairings' own"
    )
    parser.add_argument("--procs", type=int, default=2, help="processes playing matches")
    parser.add_argument("--start", type=int, default=0, help="first seed number")
    parser.add_argument("--deals", type=int, default=DEFAULT_BUDGET.deals)
    parser.add_argument("--nodes", type=int, default=DEFAULT_BUDGET.nodes)
    parser.add_argument("--baseline", type=Path, help="checkout whose STRONG plays as BASE")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="MODULE.NAME=INT",
        help="set a constant of engine.bot.MODULE for this run (screening only)",
    )
    parser.add_argument("--json-out", type=Path)
    parser.add_argument("--merge", nargs="+", type=Path, metavar="JSON", help="pool runs")
    args = parser.parse_args(argv)
    if args.merge:
        _print_table(merge([json.loads(path.read_text())["results"] for path in args.merge]))
        return 0
    pairs: list[tuple[str, str, int]] = (
        [(a.upper(), b.upper(), int(n)) for a, b, n in args.pair] if args.pair else list(LADDER)
    )
    for a, b, _ in pairs:  # a misspelt player stops the run before it starts
        bot_players.parse(a, DEFAULT_BUDGET)
        bot_players.parse(b, DEFAULT_BUDGET)
    if args.seeds is not None:
        pairs = [(a, b, args.seeds) for a, b, _ in pairs]
    budget = Budget(args.deals, args.nodes)
    if args.baseline:
        bot_players.load_baseline(args.baseline)
    for setting in args.set:
        _apply_setting(setting)
    started = now()
    with multiprocessing.get_context("fork").Pool(args.procs) as pool:
        results = [
            run_pair(a, b, n, start=args.start, budget=budget, pool=pool) for a, b, n in pairs
        ]
    print(
        f"{header('bot_ladder', started, argv)}\n"
        f"python {platform.python_version()}; budget {budget.deals} deals, {budget.nodes} "
        f"nodes; {args.procs} processes; seeds ladder-{args.start}..; "
        f"BASE from {bot_players.baseline_tree()}"
    )
    _print_table(results)
    finish(args.json_out, started, argv, {"results": [asdict(r) for r in results]})
    return 0


def _apply_setting(setting: str) -> None:
    """`MODULE.NAME=INT`: set engine.bot.MODULE.NAME for this run (the forked workers too)."""
    target, _, value = setting.partition("=")
    module_name, _, name = target.rpartition(".")
    module = importlib.import_module(f"engine.bot.{module_name}")
    if not hasattr(module, name):
        raise SystemExit(f"engine.bot.{module_name} has no {name}")
    setattr(module, name, int(value))


def _print_table(results: list[Result]) -> None:
    print("| pairing | matches | win rate (95% CI) | margin per hand (95% CI) | hands | s |")
    print("|---|---|---|---|---|---|")
    for r in results:
        print(
            f"| {r.first} v {r.second} | {r.matches} | {100 * r.win_rate:.1f}% "
            f"({100 * r.win_low:.1f}-{100 * r.win_high:.1f}) | {r.margin_per_hand:+.2f} "
            f"({r.margin_low:+.2f} to {r.margin_high:+.2f}) | {r.hands} | {r.seconds:.0f} |"
        )


def merge(runs: list[list[dict[str, Any]]]) -> list[Result]:
    """Each pairing pooled over several runs' results (see the module docstring)."""
    by_pair: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for run in runs:
        for row in run:
            by_pair.setdefault((row["first"], row["second"]), []).append(row)
    pooled = []
    for (first, second), rows in by_pair.items():
        matches = sum(r["matches"] for r in rows)
        wins = sum(r["wins"] for r in rows)
        hands = sum(r["hands"] for r in rows)
        mean = sum(r["margin_per_hand"] * r["hands"] for r in rows) / hands
        half = math.sqrt(
            sum(((r["margin_high"] - r["margin_low"]) / 2 * r["hands"] / hands) ** 2 for r in rows)
        )
        low, high = wilson(wins, matches)
        seconds = sum(r["seconds"] for r in rows)
        pooled.append(
            Result(
                first,
                second,
                matches,
                wins,
                wins / matches,
                low,
                high,
                mean,
                mean - half,
                mean + half,
                hands,
                seconds,
            )
        )
    return pooled


if __name__ == "__main__":
    sys.exit(main())
