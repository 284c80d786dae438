"""The engine's capture plans against the independent brute force on many random floors."""

from __future__ import annotations

import random

import pytest

from engine import code, codes, plans_for
from testkit import brute

FLOORS_PER_SHARD = 30
SHARDS = 8


def _floor_mask(cards: list[int]) -> int:
    mask = 0
    for c in cards:
        mask |= 1 << c
    return mask


def test_card_indices_agree_with_brute_force() -> None:
    """Both sides name the 52 cards alike, so comparing codes compares the same cards."""
    assert [code(i) for i in range(52)] == brute.ALL_CODES
    assert [brute.index_of(c) for c in brute.ALL_CODES] == list(range(52))


def compare(card: int, floor: list[int]) -> list[brute.BrutePlan]:
    """Assert engine == brute force for one card on one floor; return the brute force's plans."""
    floor_codes = codes(floor)
    expected = brute.plans(code(card), floor_codes)
    offered = plans_for(card, _floor_mask(floor))
    context = f"{code(card)} on {floor_codes}"
    assert [codes(p.cards) for p in offered] == [list(p.cards) for p in expected], context
    assert [p.id for p in offered] == list(range(1, len(expected) + 1)), context
    assert [p.basra for p in offered] == [p.basra for p in expected], context
    assert [p.sweep for p in offered] == [p.sweep for p in expected], context
    assert len(offered) <= brute.MAX_OFFERED
    if brute.value_of(code(card)) is not None and code(card) != "7D":
        for plan in offered:
            brute.check_plan_parts(
                code(card),
                floor_codes,
                codes(plan.cards),
                codes(plan.same_rank),
                [codes(g) for g in plan.groups],
            )
    return expected


def outcomes(expected: list[brute.BrutePlan]) -> set[str]:
    """The kinds of outcome a card's plans (as the brute force lists them) show."""
    if not expected:
        return {"trail"}
    kinds = {"capture" if len(expected) == 1 else "choice"}
    kinds |= {"sweep" for p in expected if p.sweep} | {"basra" for p in expected if p.basra}
    return kinds


@pytest.mark.parametrize("shard", range(SHARDS))
def test_engine_plans_equal_brute_force_on_random_floors(shard: int) -> None:
    """Random floors of 0..12 cards, every card not on the floor played on each."""
    rng = random.Random(f"brute-vs-engine/{shard}")
    seen: set[str] = set()
    for _ in range(FLOORS_PER_SHARD):
        floor = rng.sample(range(52), rng.randint(0, 12))
        for card in range(52):
            if card not in floor:
                seen |= outcomes(compare(card, floor))
    # The agreement covered every kind of play: trails, single captures, choices between
    # plans, J/7D sweeps and Basras (as the brute force, not the engine, judges them).
    assert seen == {"trail", "capture", "choice", "sweep", "basra"}


@pytest.mark.parametrize("shard", range(SHARDS))
def test_engine_plans_equal_brute_force_on_small_numeric_floors(shard: int) -> None:
    """Floors of only A..6 make many overlapping groups: the hard part of plan generation."""
    rng = random.Random(f"brute-vs-engine-small/{shard}")
    small = list(range(24))
    most = 0
    for _ in range(FLOORS_PER_SHARD):
        floor = rng.sample(small, rng.randint(2, 9))
        for card in range(52):
            if card not in floor:
                most = max(most, len(compare(card, floor)))
    assert most > 1, "these floors must exercise choices between plans"


def test_cap_keeps_the_first_twelve_plans_in_order() -> None:
    """A floor with more than 12 maximal captured sets offers exactly the first 12 of them."""
    floor = ["AC", "AD", "AH", "2C", "2D", "3C", "3D", "4C", "4D", "5C", "6C"]
    every = brute.all_maximal_captured_sets("7H", floor)
    assert len(every) > brute.MAX_OFFERED
    offered = plans_for(brute.index_of("7H"), _floor_mask([brute.index_of(c) for c in floor]))
    assert [set(codes(p.cards)) for p in offered] == [set(s) for s in every[:12]]


def reachable_shaped_floor(rng: random.Random) -> list[int]:
    """A floor of the shape a real game allows: each rank at most once (a card trails only when
    no card of its rank lies there) plus up to 3 extra cards from the first four floor cards."""
    floor: list[int] = []
    for rank in range(13):
        if rng.random() < 0.75:
            floor.append(rank * 4 + rng.randrange(4))
    for _ in range(rng.randint(0, 3)):
        rank = rng.randrange(13)
        spare = [rank * 4 + s for s in range(4) if rank * 4 + s not in floor]
        if spare:
            floor.append(rng.choice(spare))
    return floor


def test_worst_reachable_floor_gets_its_exact_plans() -> None:
    """A 10 on four aces and one each of 2..9 (the costliest reachable shape) is answered."""
    floor = [brute.index_of(c) for c in ("AC", "AD", "AH", "AS", "2C", "3C", "4C", "5C")]
    floor += [brute.index_of(c) for c in ("6C", "7C", "8C", "9C")]
    assert len(compare(brute.index_of("10D"), floor)) == 12


@pytest.mark.parametrize("shard", range(4))
def test_floors_of_a_reachable_shape_are_never_too_complex(shard: int) -> None:
    """On every such floor every card gets its exact plans, never STATE_TOO_COMPLEX."""
    rng = random.Random(f"reachable-shape/{shard}")
    biggest = 0
    for _ in range(25):
        floor = reachable_shaped_floor(rng)
        biggest = max(biggest, len(floor))
        for card in range(52):
            if card not in floor:
                compare(card, floor)
    assert biggest >= 12
