"""Largest plan-search work any reachable floor can need, versus the engine's work bound.

A numeric card of rank r only trails when no rank-r card lies on the floor, so each rank
lies there at most max(1, its count among the 4 first floor cards) times: beyond one card
per rank, at most 3 extra cards (engine.plans.table.reachable_shapes). This script walks every
floor of that shape for every played value and reports the most search steps one needs
(docs/rules.md cites it).

    .venv/bin/python -m benchmarks.work_bound
"""

from __future__ import annotations

import sys
import time

from engine.facts import DEFAULT_WORK_LIMIT
from engine.plans.search import search_shape
from engine.plans.table import reachable_shapes


def main() -> int:
    """Print the worst work per played value and overall."""
    began = time.perf_counter()
    overall: tuple[int, int, tuple[int, ...]] = (0, 0, ())
    total = 0
    for value in range(3, 11):
        worst: tuple[int, tuple[int, ...]] = (0, ())
        for shape in reachable_shapes(value):
            total += 1
            work = search_shape(value, shape, 10**9).work
            if work > worst[0]:
                worst = (work, tuple((shape >> (4 * r) & 15).bit_count() for r in range(value - 1)))
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
