"""Largest plan-search work any reachable floor can need, versus the engine's work bound.

A numeric card of rank r only trails when no rank-r card lies on the floor, so each rank
lies there at most max(1, its count among the 4 first floor cards) times: beyond one card
per rank, at most 3 extra cards. This script walks every floor of that shape for every
played value and reports the most search steps one needs (docs/rules.md cites it).

    .venv/bin/python benchmarks/work_bound.py
"""

from __future__ import annotations

import itertools
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engine.plans import DEFAULT_WORK_LIMIT, _abstract_plans, _small_key

EXTRA_CARDS = 3  # the 4 first floor cards give at most 3 cards beyond one per rank
MAX_PER_RANK = 4


def shapes(smaller_ranks: int) -> list[tuple[int, ...]]:
    """Every count vector over the smaller ranks that a reachable floor can show."""
    return [
        counts
        for counts in itertools.product(range(MAX_PER_RANK + 1), repeat=smaller_ranks)
        if sum(max(c - 1, 0) for c in counts) <= EXTRA_CARDS
    ]


def main() -> int:
    """Print the worst work per played value and overall."""
    began = time.perf_counter()
    overall: tuple[int, int, tuple[int, ...]] = (0, 0, ())
    total = 0
    for value in range(3, 11):
        worst: tuple[int, tuple[int, ...]] = (0, ())
        for counts in shapes(value - 1):
            total += 1
            shape = sum(((1 << c) - 1) << (4 * r) for r, c in enumerate(counts))
            work = _abstract_plans(_small_key(value, shape, 10**9)).work
            if work > worst[0]:
                worst = (work, counts)
        _abstract_plans.cache_clear()
        print(f"value {value}: worst {worst[0]} steps for counts {worst[1]}")
        if worst[0] > overall[0]:
            overall = (worst[0], value, worst[1])
    print(
        f"{total} floor shapes in {time.perf_counter() - began:.0f} s; worst {overall[0]} steps "
        f"(value {overall[1]}, counts {overall[2]}); work bound {DEFAULT_WORK_LIMIT}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
