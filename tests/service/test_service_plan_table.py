"""The plan table shipped with the service: what the engine builds, and it changes no answer."""

from __future__ import annotations

from engine.plans.table import build, reachable_shapes
from service import plan_table as shipped_table
from testkit.plan_tables import assert_table_changes_nothing, installed


def test_the_shipped_table_is_the_one_the_engine_builds() -> None:
    """`python -m service.plan_table` rebuilds the file; here it must equal a fresh build."""
    assert shipped_table.shipped() == build()


def test_the_shipped_table_covers_every_reachable_shape_and_changes_no_plan() -> None:
    """Installed, it holds every reachable shape, and plans and refusals stay the same."""
    table = shipped_table.shipped()
    with installed(table) as shapes:
        assert shapes == sum(len(reachable_shapes(v)) for v in range(2, 11))
    assert_table_changes_nothing(table)
