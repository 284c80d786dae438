"""STRONG's decisions of a few matches made again in passes, for an instruction count.

The process starts as bot_time's does (plan table, start-up objects frozen, collector on),
collects the STRONG seat's positions of `--matches` matches against GREEDY, and decides each
of them again `--passes` times. Run under valgrind with one pass and with two, the
difference is the instructions of one warm pass, which the machine's load does not change.
Run by path, it imports engine, service and benchmarks.bot_time from the tree on PYTHONPATH
(e.g. a `git worktree` of an older commit), whose engine it then measures:

    PYTHONPATH=TREE valgrind --tool=callgrind --callgrind-out-file=/dev/null \\
        .venv/bin/python benchmarks/bot_passes.py --passes 1
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import sys

from benchmarks.bot_time import positions
from engine.bot import DEFAULT_BUDGET, Level, suggest
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
    found = positions(args.matches, "bot-passes", DEFAULT_BUDGET)
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
