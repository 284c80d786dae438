"""STRONG's decisions of a few matches made again in passes, for an instruction count.

The process starts as bot_time's does (plan table, start-up objects frozen, collector on),
collects the STRONG seat's positions of `--matches` matches against GREEDY, and decides each
of them again `--passes` times. Run under valgrind with one pass and with two, the
difference is the instructions of one warm pass, which the machine's load does not change.
It imports only engine and service, so that run by path it measures the engine of the tree
on PYTHONPATH (e.g. a `git worktree` of an older commit):

    PYTHONPATH=TREE valgrind --tool=callgrind --callgrind-out-file=/dev/null \\
        .venv/bin/python benchmarks/bot_passes.py --passes 1
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import sys

from engine import Action, Status, apply, new_match
from engine.bot import DEFAULT_BUDGET, Level, suggest
from engine.view import information_set
from service import plan_table


def main(argv: list[str] | None = None) -> int:
    """Collect the positions, decide them in passes, print a digest of the first pass."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--matches", type=int, default=3, help="matches whose positions count")
    parser.add_argument("--passes", type=int, default=1, help="passes over the positions")
    args = parser.parse_args(argv)
    plan_table.install()
    gc.collect()
    gc.freeze()
    found = []
    for number in range(args.matches):
        state, _ = new_match(f"bot-passes-{number}".encode())
        strong = number % 2
        while state.status is Status.IN_PROGRESS:
            seat = state.to_move
            assert seat is not None
            info = information_set(state, seat)
            level = Level.STRONG if seat == strong else Level.GREEDY
            if level is Level.STRONG:
                found.append(info)
            chosen = suggest(info, level, b"", DEFAULT_BUDGET)
            state, _ = apply(state, Action(seat, chosen.card, chosen.plan_id), check=False)
    digest = hashlib.sha256()
    for done in range(args.passes):
        for info in found:
            answer = suggest(info, Level.STRONG, b"", DEFAULT_BUDGET)
            if not done:
                digest.update(repr(answer).encode())
    print(f"{len(found)} STRONG positions, {args.passes} passes; answers {digest.hexdigest()[:16]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
