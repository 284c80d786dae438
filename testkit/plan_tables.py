"""Capture plans with and without a plan table: the table must change nothing.

engine.plans can install a table of precomputed searches (engine.plans.table is its
format; service/plan_table.py ships one); the engine and service tests hold a table to the
search with these helpers.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from contextlib import contextmanager

from engine import RuleError, plans_for
from engine.plans import clear_caches, install_plan_table
from testkit.actions import play_match


@contextmanager
def installed(table: bytes) -> Iterator[int]:
    """Run the block with `table` installed (b"": none) and empty memos; restore none after."""
    count = install_plan_table(table)
    clear_caches()
    try:
        yield count
    finally:
        install_plan_table(b"")
        clear_caches()


def _outcome(card: int, floor: int, limit: int) -> object:
    try:
        return plans_for(card, floor, limit)
    except RuleError as error:
        return (error.reason, dict(error.details))


def _floors() -> list[tuple[int, int]]:
    """(card, floor) pairs of random matches, and crafted floors beyond any reachable shape."""
    rnd = random.Random(5)
    pairs = []
    for n in range(6):
        for state in play_match(f"table-{n}".encode(), rnd).states:
            if state.to_move is not None:
                pairs += [(card, state.floor_mask) for card in state.hands[state.to_move]]
    for _ in range(150):
        floor = rnd.sample(range(40), rnd.randint(5, 12))
        played = rnd.choice([c for c in range(40) if c not in floor])
        pairs.append((played, sum(1 << c for c in floor)))
    return pairs


def assert_table_changes_nothing(table: bytes) -> None:
    """Plans and refusals of many floors (reachable and not) are the same with `table`."""
    pairs = _floors()
    limits = (10_000, 40, 3)
    with installed(b""):
        searched = [_outcome(c, f, limit) for c, f in pairs for limit in limits]
    with installed(table):
        tabled = [_outcome(c, f, limit) for c, f in pairs for limit in limits]
    assert tabled == searched
    assert any(isinstance(o, tuple) and o and o[0] == "STATE_TOO_COMPLEX" for o in searched)
