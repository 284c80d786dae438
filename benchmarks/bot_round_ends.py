"""What the floor at the end of a round is worth to the seat that plays first in the next one.

The STRONG bot's evaluation stops at the end of the current round and has to value the floor
it leaves (engine/bot/evaluation.py). This measures it: STRONG plays itself, and at the start
of every round but the first of a hand, the floor is described (its cards, its special points,
the chance that the first player's four new cards hold one that clears it, whether it is
empty) and the round's outcome is counted for that first player against the other: points
taken (special cards and Basras) and cards taken. An ordinary least-squares fit of each
outcome on the description gives the weights, with standard errors. The matches are seeded
(round-ends-0, round-ends-1, ...) and the bot is deterministic, so a run gives the same
figures each time for the same code and arguments. The bot plays at the default budget
unless --deals and --nodes say otherwise.

    nice -n 10 .venv/bin/python -m benchmarks.bot_round_ends --matches 150 --procs 2
"""

from __future__ import annotations

import argparse
import math
import multiprocessing
import platform
import sys

from benchmarks.measure import header, now
from engine import Action, BasraScored, Captured, Status, apply, new_match
from engine.bot import DEFAULT_BUDGET, Budget, Level, suggest
from engine.bot.evaluation import EXPOSURE
from engine.bot.moves import MILLI, clearers, points_of
from engine.cards import mask_of
from engine.view import information_set

FEATURES = ("constant", "floor cards", "floor points", "P(first player clears)", "empty floor")
ROUND_PLAYS = 8
BASRA = 10


def rows_of(seed: bytes, budget: Budget) -> list[tuple[list[float], float, float]]:
    """(features, points margin, cards margin) of the first player, per round start."""
    state, _ = new_match(seed)
    rows: list[tuple[list[float], float, float]] = []
    features: list[float] | None = None
    points = [0.0, 0.0]
    cards = [0, 0]
    first = 0
    while state.status is Status.IN_PROGRESS:
        plays = state.plays_in_hand
        if plays % ROUND_PLAYS == 0:
            if features is not None:
                rows.append(
                    (features, points[first] - points[1 - first], cards[first] - cards[1 - first])
                )
            features = None
            if plays:  # the first round's floor is a fresh deal, not left by a search
                first = 1 - state.dealer
                floor = state.floor_mask
                unseen = mask_of(state.deck) | mask_of(state.hands[0]) | mask_of(state.hands[1])
                clear = EXPOSURE[4][unseen.bit_count()][(clearers(floor) & unseen).bit_count()]
                features = [
                    1.0,
                    floor.bit_count(),
                    points_of(floor) / MILLI,
                    clear / MILLI / BASRA,
                    float(not floor),
                ]
            points, cards = [0.0, 0.0], [0, 0]
        seat = state.to_move
        assert seat is not None
        chosen = suggest(information_set(state, seat), Level.STRONG, b"", budget)
        hand = state.hand_number
        state, events = apply(state, Action(seat, chosen.card, chosen.plan_id), check=False)
        for event in events:
            if isinstance(event, Captured):
                points[event.seat] += points_of(mask_of(event.cards) | 1 << event.card) / MILLI
                cards[event.seat] += len(event.cards) + 1
            elif isinstance(event, BasraScored):
                points[event.seat] += BASRA
        if state.hand_number != hand:
            features = None  # the hand ended: its leftovers are not a round's play
    return rows


def _job(args: tuple[bytes, int, int]) -> list[tuple[list[float], float, float]]:
    seed, deals, nodes = args
    return rows_of(seed, Budget(deals, nodes))


def fit(x: list[list[float]], y: list[float]) -> list[tuple[float, float]]:
    """Least squares by the normal equations: (weight, standard error) per feature."""
    n = len(x[0])
    xtx = [[sum(r[i] * r[j] for r in x) for j in range(n)] for i in range(n)]
    xty = [sum(r[i] * v for r, v in zip(x, y, strict=True)) for i in range(n)]
    inverse = [_solve(xtx, [float(i == j) for i in range(n)]) for j in range(n)]
    weights = [sum(inverse[i][j] * xty[j] for j in range(n)) for i in range(n)]
    residual = [
        v - sum(w * f for w, f in zip(weights, r, strict=True)) for r, v in zip(x, y, strict=True)
    ]
    variance = sum(e * e for e in residual) / (len(x) - n)
    return [(weights[i], math.sqrt(inverse[i][i] * variance)) for i in range(n)]


def _solve(a: list[list[float]], b: list[float]) -> list[float]:
    """Gauss-Jordan elimination with partial pivoting."""
    n = len(a)
    m = [[*row, b[i]] for i, row in enumerate(a)]
    for c in range(n):
        pivot = max(range(c, n), key=lambda r: abs(m[r][c]))
        m[c], m[pivot] = m[pivot], m[c]
        for r in range(n):
            if r != c:
                factor = m[r][c] / m[c][c]
                for k in range(c, n + 1):
                    m[r][k] -= factor * m[c][k]
    return [m[i][n] / m[i][i] for i in range(n)]


def main(argv: list[str] | None = None) -> int:
    """Play, fit and print the weights."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--matches", type=int, default=150)
    parser.add_argument("--procs", type=int, default=2)
    parser.add_argument("--deals", type=int, default=DEFAULT_BUDGET.deals)
    parser.add_argument("--nodes", type=int, default=DEFAULT_BUDGET.nodes)
    args = parser.parse_args(argv)
    started = now()
    jobs = [(f"round-ends-{n}".encode(), args.deals, args.nodes) for n in range(args.matches)]
    with multiprocessing.get_context("fork").Pool(args.procs) as pool:
        rows = [row for rows in pool.map(_job, jobs, chunksize=2) for row in rows]
    x = [r[0] for r in rows]
    print(f"{header('bot_round_ends', started, argv)}; python {platform.python_version()}")
    print(
        f"{len(rows)} round starts of {args.matches} matches of STRONG against itself "
        f"({args.deals} deals, {args.nodes} nodes); weights for the first player, +- one "
        f"standard error:"
    )
    # A feature that never varies from 0 (no empty floor in a short run) cannot be fitted.
    seen = [i for i in range(len(FEATURES)) if any(r[i] for r in x)]
    x = [[r[i] for i in seen] for r in x]
    for name, y in (("points", [r[1] for r in rows]), ("cards", [r[2] for r in rows])):
        weights = fit(x, y)
        shown = ", ".join(
            f"{FEATURES[i]} {w:+.2f} +- {e:.2f}" for i, (w, e) in zip(seen, weights, strict=True)
        )
        print(f"  {name} taken in the round: {shown}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
