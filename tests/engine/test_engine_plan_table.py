"""The plan table: the same plans and the same refusals as the search, on every floor.

The table holds the search's complete result for every reachable shape; with a work limit
below a shape's work it must refuse exactly as the search does (work = limit + 1), and floors
no match can reach must still be searched.
"""

from __future__ import annotations

import random

import pytest

from engine.plans.search import search_shape
from engine.plans.table import REACHABLE_EXTRA_CARDS, build, decode, encode, reachable_shapes
from testkit.plan_tables import assert_table_changes_nothing, installed


@pytest.fixture(scope="module")
def table() -> bytes:
    """The table of the values 2 to 8 (the whole one is checked in tests/service)."""
    return build(range(2, 9))


def test_reachable_shapes_are_the_count_vectors_the_bound_allows() -> None:
    """Per rank at most four cards, beyond one per rank at most three more, at least one card."""
    for value in range(2, 11):
        shapes = reachable_shapes(value)
        assert len(shapes) == len(set(shapes))
        for shape in shapes:
            counts = [(shape >> (4 * r) & 15).bit_count() for r in range(value - 1)]
            assert shape >> (4 * (value - 1)) == 0
            assert sum(counts) > 0 and sum(max(c - 1, 0) for c in counts) <= REACHABLE_EXTRA_CARDS
    assert reachable_shapes(2) == [0b1, 0b11, 0b111, 0b1111]


def test_a_record_decodes_to_the_search_and_refuses_past_the_limit_as_the_search() -> None:
    """decode(encode(search)) is the search; below its work, both stop at limit + 1."""
    rnd = random.Random(3)
    for _ in range(400):
        value = rnd.randint(2, 10)
        shape = rnd.choice(reachable_shapes(value))
        full = search_shape(value, shape, 1 << 62)
        record = encode(full)
        assert decode(record, full.work) == full
        for limit in (0, 1, full.work // 2, full.work - 1):
            if limit < full.work:
                assert decode(record, limit) == search_shape(value, shape, limit)


def test_plans_with_the_table_are_the_plans_of_the_search(table: bytes) -> None:
    """Same plans, same STATE_TOO_COMPLEX details, with and without the table, any limit."""
    with installed(table) as shapes:
        assert shapes == sum(len(reachable_shapes(v)) for v in range(2, 9))
    assert_table_changes_nothing(table)
