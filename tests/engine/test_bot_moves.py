"""What the bot's search takes a play to do (engine.bot.moves) is what the rules say it does.

The bot keeps its own memo of every card's effects per relevant part of the floor, a table of
the cards that would clear a floor, and classes of cards that play alike; each is held here to
the engine's own plans and points on many floors.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.bot.moves import (
    EQUIVALENCE,
    MILLI,
    Effect,
    clearers,
    distinct_cards,
    effects,
    points_of,
)
from engine.cards import FULL_MASK, RANK_OF, card_points, mask_of, parse_cards
from engine.facts import BASRA_POINTS, DECK_SIZE, ITEM_POINTS
from engine.plans import plans_for

FLOORS = st.lists(st.integers(0, DECK_SIZE - 1), max_size=12, unique=True).map(mask_of)


def test_the_points_of_the_whole_deck_are_its_special_cards_points() -> None:
    """Every J and A, the 2C and the 10D: the 13 points facts.ITEM_POINTS states."""
    assert card_points(FULL_MASK) == ITEM_POINTS
    assert points_of(FULL_MASK) == MILLI * ITEM_POINTS


@settings(max_examples=300, deadline=None)
@given(card=st.integers(0, DECK_SIZE - 1), floor=FLOORS)
def test_effects_are_the_plans_of_the_card_on_the_whole_floor(card: int, floor: int) -> None:
    """Kept per relevant part of the floor, the effects are still those of the real floor."""
    floor &= ~(1 << card)
    plans = plans_for(card, floor)
    expected = [
        Effect(
            floor ^ plan.mask,
            points_of(1 << card | plan.mask) + (MILLI * BASRA_POINTS if plan.basra else 0),
            1 + plan.mask.bit_count(),
        )
        for plan in plans
    ] or [Effect(floor | 1 << card, 0, 0)]
    assert effects(card, floor) == expected


@settings(max_examples=200, deadline=None)
@given(floor=FLOORS)
def test_the_clearers_of_a_floor_are_the_cards_with_a_basra_plan_on_it(floor: int) -> None:
    """Every card off the floor is a clearer exactly when one of its plans is a Basra."""
    found = clearers(floor)
    for card in range(DECK_SIZE):
        if not floor >> card & 1:
            basra = any(plan.basra for plan in plans_for(card, floor))
            assert bool(found >> card & 1) == basra, (card, floor)


@settings(max_examples=200, deadline=None)
@given(floor=FLOORS)
def test_cards_of_one_equivalence_class_play_alike(floor: int) -> None:
    """Two cards sharing a bit gain and take the same on any floor that holds neither, and
    leave the same floor but for the played card itself."""
    for a in range(DECK_SIZE):
        for b in range(a + 1, DECK_SIZE):
            if EQUIVALENCE[a] == EQUIVALENCE[b] and not floor & (1 << a | 1 << b):
                first = [(e.after & ~(1 << a), e.gain, e.taken) for e in effects(a, floor)]
                second = [(e.after & ~(1 << b), e.gain, e.taken) for e in effects(b, floor)]
                assert first == second, (a, b, floor)


def test_cards_that_play_unlike_the_rest_of_their_rank_have_a_class_of_their_own() -> None:
    """The 2C and the 10D (points of their own) and the 7D (it sweeps) differ from their
    rank's other cards on some floor, and share their class with no card."""
    floors = [mask_of(parse_cards(f.split())) for f in ("AC AD", "4C 6C", "AC 2D QC", "5C 5H")]
    for card in range(DECK_SIZE):
        mates = [c for c in range(DECK_SIZE) if c != card and RANK_OF[c] == RANK_OF[card]]
        unlike = all(
            any(
                [(e.gain, e.taken) for e in effects(card, f)]
                != [(e.gain, e.taken) for e in effects(mate, f)]
                for f in floors
                if not f & (1 << card | 1 << mate)
            )
            for mate in mates
        )
        alone = all(EQUIVALENCE[c] != EQUIVALENCE[card] for c in mates)
        assert alone == unlike, card


@settings(max_examples=200, deadline=None)
@given(hand=st.lists(st.integers(0, DECK_SIZE - 1), max_size=8, unique=True).map(mask_of))
def test_a_hand_s_distinct_cards_are_one_of_each_class_in_canonical_order(hand: int) -> None:
    """The search tries the first card of each class a hand holds, and no other."""
    tried = distinct_cards(hand)
    assert list(tried) == sorted(tried)
    assert all(hand >> card & 1 for card in tried)
    assert {EQUIVALENCE[card] for card in tried} == {
        EQUIVALENCE[card] for card in range(DECK_SIZE) if hand >> card & 1
    }
    assert len({EQUIVALENCE[card] for card in tried}) == len(tried)
    for card in range(DECK_SIZE):
        if hand >> card & 1 and card not in tried:
            assert any(EQUIVALENCE[t] == EQUIVALENCE[card] and t < card for t in tried)
