"""Every worked example of the plan and score vectors: engine and brute force.

The hand-checked vectors of the specification the project started from are kept in the
repository as test data (tests/data/vectors/), so the suite runs on a fresh clone alone. Where
that specification lies beside the repository (as in this project's CI), the copies must be
identical to it, so a change of it cannot go unnoticed.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from engine import code, codes, parse_card, parse_cards, plans_for, score_hand
from testkit import brute
from testkit.rule_sources import VECTORS

VECTOR_FILES = ("plans.json", "scores.json")


def _vector_params(name: str) -> list[Any]:
    cases = json.loads((VECTORS / name).read_text(encoding="utf-8"))["cases"]
    return [pytest.param(case, id=case["note"]) for case in cases]


def test_vector_copies_hold_cases() -> None:
    """Both copied vector files are present and hold cases (a lost copy fails, never skips)."""
    for name in VECTOR_FILES:
        cases = json.loads((VECTORS / name).read_text(encoding="utf-8"))["cases"]
        assert len(cases) >= 4, name


def _mask(cards: list[str]) -> int:
    mask = 0
    for card in parse_cards(cards):
        mask |= 1 << card
    return mask


@pytest.mark.parametrize("case", _vector_params("plans.json"))
def test_plan_vector_engine(case: dict[str, Any]) -> None:
    """The engine offers exactly the listed plans, in order, with ids 1, 2, 3, ..."""
    card = parse_card(case["card"])
    offered = plans_for(card, _mask(case["floor"]))
    assert [codes(p.cards) for p in offered] == case["plans"]
    assert [p.id for p in offered] == list(range(1, len(offered) + 1))
    floor = set(case["floor"])
    for plan in offered:
        assert code(card) not in codes(plan.cards)
        is_sweep = case["card"] == "7D" or case["card"].startswith("J")
        assert plan.sweep == is_sweep
        if not is_sweep:
            # A Basra is a capture that leaves the floor empty.
            assert plan.basra == (set(codes(plan.cards)) == floor)


@pytest.mark.parametrize("case", _vector_params("plans.json"))
def test_plan_vector_brute_force(case: dict[str, Any]) -> None:
    """The independent brute force agrees with every hand-checked vector (it checks itself)."""
    found = brute.plans(case["card"], list(case["floor"]))
    assert [list(p.cards) for p in found] == case["plans"]


@pytest.mark.parametrize("case", _vector_params("scores.json"))
def test_score_vector_engine(case: dict[str, Any]) -> None:
    """The engine scores each hand as listed: points per seat and the carry after the hand."""
    piles = (_mask(case["captured"][0]), _mask(case["captured"][1]))
    totals = (7, 11)
    basras = (case["basras"][0], case["basras"][1])
    scored = score_hand(3, piles, basras, case["carry"], totals)
    assert [s.hand_total for s in scored.seats] == case["points"]
    assert [s.running_total for s in scored.seats] == [
        totals[0] + case["points"][0],
        totals[1] + case["points"][1],
    ]
    assert [s.cards for s in scored.seats] == [len(p) for p in case["captured"]]
    assert scored.carry_before == case["carry"]
    assert scored.carry_after == case["new_carry"]
    assert scored.hand_number == 3


@pytest.mark.parametrize("case", _vector_params("scores.json"))
def test_score_vector_brute_force(case: dict[str, Any]) -> None:
    """The independent scorer agrees with every hand-checked scoring vector."""
    piles = (list(case["captured"][0]), list(case["captured"][1]))
    seats, new_carry = brute.score(piles, (case["basras"][0], case["basras"][1]), case["carry"])
    assert [s.total for s in seats] == case["points"]
    assert new_carry == case["new_carry"]
