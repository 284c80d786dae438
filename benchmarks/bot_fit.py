"""Fit the STRONG bot's evaluation on its own play and write it as engine/bot/fitted.py.

The search stops at a depth limit inside a round (the horizon) or at the round's end, and
values what it reaches (engine/bot/evaluation.py). This script measures those values: STRONG
plays itself over seeded matches, every position is described by the evaluation's own
features (engine.bot.evaluation.horizon_features and round_end_features, so the fit and the
search cannot disagree on what a feature is) and paired with what actually followed: the
points the seat to move scored from there to the end of the hand, less the other seat's (the
majority, special cards, Basras, the leftovers). An ordinary least-squares fit per number of
plays left in the round gives the horizon weights; the positions at a round's start (hands
just dealt, valued as the previous round's end, without the new hands) give the round-end
weights. The matches are seeded and the bot deterministic: the same code and arguments fit
the same weights.

    nice -n 10 .venv/bin/python -m benchmarks.bot_fit --matches 400 --procs 2 --write

--write replaces engine/bot/fitted.py (the command and the date go in its docstring);
without it the weights are only printed. The weights are those of the bot that played: fit,
write, and fit again until they settle (docs/bot.md, "Evaluation").
"""

from __future__ import annotations

import argparse
import datetime
import math
import multiprocessing
import platform
import subprocess
import sys
from pathlib import Path

from benchmarks.bot_round_ends import fit
from benchmarks.measure import command, now
from engine import Action, HandScored, State, Status, apply, new_match
from engine.bot import DEFAULT_BUDGET, Budget, Level, suggest
from engine.bot.evaluation import (
    HORIZON_FEATURES,
    ROUND_END_FEATURES,
    horizon_features,
    round_end_features,
)
from engine.bot.moves import MILLI, points_of
from engine.cards import mask_of
from engine.facts import BASRA_POINTS, MAJORITY_POINTS, ROUND_CARDS
from engine.view import information_set

ROOT = Path(__file__).resolve().parent.parent
FITTED = ROOT / "engine" / "bot" / "fitted.py"
Row = tuple[tuple[int, ...], int]
"""Features of a position and what the seat to move scored from there, less the other."""


def _points(state: State, seat: int) -> int:
    """Points of `seat` in this hand so far, in thousandths."""
    return points_of(mask_of(state.captured[seat])) + MILLI * BASRA_POINTS * state.basras[seat]


def rows_of(seed: bytes, budget: Budget) -> tuple[dict[int, list[Row]], list[Row]]:
    """One match of STRONG against itself: horizon rows per plays left, and round-end rows."""
    state, _ = new_match(seed)
    horizon: dict[int, list[Row]] = {}
    ends: list[Row] = []
    pending: list[tuple[int, int, tuple[int, ...], int | None]] = []
    while state.status is Status.IN_PROGRESS:
        seat = state.to_move
        assert seat is not None
        other = 1 - seat
        mover, theirs = mask_of(state.hands[seat]), mask_of(state.hands[other])
        left = (mover | theirs).bit_count()
        majority = MAJORITY_POINTS + state.carry
        mine_n, theirs_n = len(state.captured[seat]), len(state.captured[other])
        already = _points(state, seat) - _points(state, other)
        if state.deck:
            floor = state.floor_mask
            features = horizon_features(mover, theirs, floor, mine_n, theirs_n, majority=majority)
            pending.append((seat, already, features, left))
        if left == ROUND_CARDS and state.plays_in_hand:
            # A round's start, but not the hand's: its floor was left by the last round. The
            # round's end is valued before the deal, so the new hands count as deck.
            deck = mask_of(state.deck) | mover | theirs
            features = round_end_features(state.floor_mask, mine_n, theirs_n, majority, deck)
            pending.append((seat, already, features, None))
        chosen = suggest(information_set(state, seat), Level.STRONG, b"", budget)
        state, events = apply(state, Action(seat, chosen.card, chosen.plan_id), check=False)
        for event in events:
            if isinstance(event, HandScored):
                for who, before, features, plays_left in pending:
                    scored = event.seats[who].hand_total - event.seats[1 - who].hand_total
                    row = (features, MILLI * scored - before)
                    if plays_left is None:
                        ends.append(row)
                    else:
                        horizon.setdefault(plays_left, []).append(row)
                pending = []
    return horizon, ends


def _job(args: tuple[bytes, int, int]) -> tuple[dict[int, list[Row]], list[Row]]:
    seed, deals, nodes = args
    return rows_of(seed, Budget(deals, nodes))


def weights_of(rows: list[Row], names: tuple[str, ...]) -> list[tuple[float, float]]:
    """Least-squares weight and standard error of each feature (0, 0 where it never varies),
    a constant fitted beside them: features and outcomes are both in thousandths of a point,
    so a weight is points per point (per card, per Basra chance, ...)."""
    used = [j for j in range(len(names)) if any(r[0][j] for r in rows)]
    x = [[1.0, *(float(r[0][j]) for j in used)] for r in rows]
    y = [float(r[1]) for r in rows]
    fitted = fit(x, y)[1:]
    out = [(0.0, 0.0)] * len(names)
    for j, weight in zip(used, fitted, strict=True):
        out[j] = weight
    return out


def main(argv: list[str] | None = None) -> int:
    """Play, fit, print and (with --write) write the weights."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--matches", type=int, default=400)
    parser.add_argument("--procs", type=int, default=2)
    parser.add_argument("--deals", type=int, default=DEFAULT_BUDGET.deals)
    parser.add_argument("--nodes", type=int, default=DEFAULT_BUDGET.nodes)
    parser.add_argument("--write", action="store_true", help=f"write {FITTED.relative_to(ROOT)}")
    args = parser.parse_args(argv)
    started = now()
    jobs = [(f"bot-fit-{n}".encode(), args.deals, args.nodes) for n in range(args.matches)]
    with multiprocessing.get_context("fork").Pool(args.procs) as pool:
        results = pool.map(_job, jobs, chunksize=2)
    horizon: dict[int, list[Row]] = {}
    ends: list[Row] = []
    for part, end in results:
        for left, rows in part.items():
            horizon.setdefault(left, []).extend(rows)
        ends.extend(end)
    run = command("bot_fit", argv)
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"],
        check=False,
        capture_output=True,
        text=True,
        cwd=ROOT,
    ).stdout.strip()
    print(
        f"bot_fit {started:%Y-%m-%d %H:%M} UTC, commit {commit}; command: {run}; python "
        f"{platform.python_version()}; {args.matches} matches of STRONG against itself "
        f"({args.deals} deals, {args.nodes} nodes)"
    )
    table: list[list[tuple[float, float]]] = []
    for left in range(ROUND_CARDS + 1):
        rows = horizon.get(left, [])
        weights = weights_of(rows, HORIZON_FEATURES) if len(rows) > 50 else []
        table.append(weights or [(0.0, 0.0)] * len(HORIZON_FEATURES))
        if weights:
            _show(f"horizon, {left} plays left, {len(rows)} positions", HORIZON_FEATURES, weights)
    end_weights = weights_of(ends, ROUND_END_FEATURES)
    _show(f"round end, {len(ends)} round starts", ROUND_END_FEATURES, end_weights)
    if args.write:
        FITTED.write_text(_module(run, started, commit, table, end_weights, len(ends)))
        print(f"wrote {FITTED.relative_to(ROOT)}")
    return 0


def _show(title: str, names: tuple[str, ...], weights: list[tuple[float, float]]) -> None:
    shown = ", ".join(
        f"{name} {w:+.3f} +- {e:.3f}" for name, (w, e) in zip(names, weights, strict=True)
    )
    print(f"  {title}: {shown}")


def _module(  # noqa: PLR0917
    command: str,
    started: datetime.datetime,
    commit: str,
    horizon: list[list[tuple[float, float]]],
    end: list[tuple[float, float]],
    ends: int,
) -> str:
    """The source of engine/bot/fitted.py."""

    def ints(weights: list[tuple[float, float]]) -> str:
        return "(" + ", ".join(str(math.floor(MILLI * w + 0.5)) for w, _ in weights) + ")"

    rows = "\n".join(f"    {ints(w)},  # {left} plays left" for left, w in enumerate(horizon))
    return f'''"""The STRONG bot's evaluation weights, fitted on its own play (generated).

Written by `{command}`
({started:%Y-%m-%d %H:%M} UTC, commit {commit}): least squares of what the seat to move
went on to score in the hand, less the other seat, on the features of
engine.bot.evaluation; a weight is in thousandths (1000: a feature counts as it is)
({ends} round starts; docs/bot.md, "Evaluation").
"""

HORIZON: tuple[tuple[int, ...], ...] = (
{rows}
)
"""Per plays left in the round, the weight of each of HORIZON_FEATURES."""

ROUND_END: tuple[int, ...] = {ints(end)}
"""The weight of each of ROUND_END_FEATURES."""
'''


if __name__ == "__main__":
    sys.exit(main())
