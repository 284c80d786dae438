"""Memory the memos of plan generation and of the bot take when full: RSS while matches fill them.

    .venv/bin/python -m benchmarks.memo_memory --matches 7000
    .venv/bin/python -m benchmarks.memo_memory --matches 0 --strong 300

The memos are bounded LRU caches, so a worker's memory grows while they fill and then stays
flat; this prints the resident size and the fill of each memo every 1000 matches. With
--strong, matches of STRONG against GREEDY follow (the bot's own memos fill with the floors
of its searches), with the same print every 50 matches.
"""

from __future__ import annotations

import argparse
import random
import sys

from benchmarks.bot_time import positions
from benchmarks.measure import memo_fill
from engine import Status, apply, new_match
from engine.bot import DEFAULT_BUDGET
from engine.bot.moves import clearers, distinct_cards, steps_on
from engine.plans.memo import _shape_plans
from engine.plans.rule import _plans_cached
from testkit.actions import random_action


def rss_mib() -> float:
    """Resident set size of this process in MiB (Linux /proc)."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def main() -> int:
    """Play random matches and print RSS and memo sizes every 1000 matches."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--matches", type=int, default=7000)
    parser.add_argument("--strong", type=int, default=0, help="STRONG v GREEDY matches after")
    args = parser.parse_args()
    print(f"start: {rss_mib():.1f} MiB")
    rnd = random.Random(3)
    plan_memos = (_plans_cached, _shape_plans)
    for number in range(1, args.matches + 1):
        state, _ = new_match(f"memo-{number}".encode())
        while state.status is Status.IN_PROGRESS:
            state, _ = apply(state, random_action(state, rnd), check=False)
        if number % 1000 == 0:
            print(f"{number} matches: {rss_mib():.1f} MiB; memos {memo_fill(*plan_memos)}")
    for number in range(1, args.strong + 1):
        positions(1, f"memo-strong-{number}", DEFAULT_BUDGET)
        if number % 50 == 0 or number == args.strong:
            memos = memo_fill(*plan_memos, steps_on, clearers, distinct_cards)
            print(f"{number} STRONG matches: {rss_mib():.1f} MiB; memos {memos}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
