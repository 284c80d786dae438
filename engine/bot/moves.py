"""What a played card does, as the bot's search needs it: cheap, memoised, on bitmasks.

Capture plans come from engine.plans (plans_unmemoised: this module keeps its own memo);
it only reshapes them into what a search node needs (the floor after the play, the points
gained, the cards taken) and keeps that per (card, floor), so a node costs a memo lookup and
a few integer operations.
"""

from __future__ import annotations

from functools import lru_cache
from typing import NamedTuple

from engine.cards import (
    CARD_BITS,
    FULL_MASK,
    JACK_RANK,
    NUMERIC_MASK,
    RANK_MASKS,
    RANK_OF,
    RANK_VALUES,
    SWEEPERS_MASK,
    Card,
    card_points,
    cards_of,
    is_sweeper,
    seven_d_basra,
)
from engine.facts import BASRA_POINTS, DECK_SIZE, MIN_GROUP_CARDS, RANKS, SEVEN_OF_DIAMONDS
from engine.plans import RELEVANT, plans_unmemoised

MILLI = 1000
"""Search values are integers in thousandths of a point: exact, and the same on any machine."""


class Effect(NamedTuple):
    """What one way to play a card does, as the search takes it at its root."""

    after: int
    """The floor after the play (a bitmask)."""
    gain: int
    """Points gained, in thousandths: the special cards taken, the played one with them, and
    a Basra; 0 for a trail."""
    taken: int
    """Cards put on the pile, the played one with them; 0 for a trail."""


# The steps of a card on a floor: per way to play it, three integers, flattened (step i is
# items 3i, 3i+1, 3i+2): the cards it moves, the points gained in thousandths, the cards put
# on the pile. The floor after the play is the floor XOR the cards moved: a capture takes
# cards that lie there, a trail adds the played card, which does not. Flat because a flat
# tuple of integers leaves the cyclic collector's sight, where a tuple of tuples may stay in
# it and lengthen every full collection the worker makes while its memos are full.
Steps = tuple[int, ...]
ONE_STEP = 3
"""Length of the steps of a card with one way to play, by far the most common case."""


def points_of(mask: int) -> int:
    """Return the points of the special cards in a set of cards, in thousandths."""
    return MILLI * card_points(mask)


# Per card, a card it does not look at, to stand for "other cards lie on the floor".
_OTHER: tuple[int, ...] = tuple(
    (FULL_MASK & ~relevant) & -(FULL_MASK & ~relevant) for relevant in RELEVANT
)
_CARD_FIELD = (1 << CARD_BITS) - 1


@lru_cache(maxsize=1 << 16)
def steps_on(key: int) -> Steps:
    """The steps of a card on every floor of the same relevant part, by the key `plays`
    makes (one integer, as engine.plan_memo explains)."""
    card, others, relevant = key & _CARD_FIELD, key >> CARD_BITS & 1, key >> CARD_BITS + 1
    floor = relevant | (_OTHER[card] if others else 0)
    plans = plans_unmemoised(card, floor)
    if not plans:
        return (1 << card, 0, 0)
    played = points_of(1 << card)
    out: list[int] = []
    for plan in plans:
        out.append(plan.mask)
        out.append(played + points_of(plan.mask) + (MILLI * BASRA_POINTS if plan.basra else 0))
        out.append(1 + plan.mask.bit_count())
    return tuple(out)


def plays(card: Card, floor: int) -> tuple[Steps, ...]:
    """The steps of `card` on `floor`, one by one (each a flat step of three integers), from
    the memo of its relevant part.

    The memo key is the card, the floor cards that can change its plans (engine.plans.RELEVANT)
    and whether any other card lies there. A card nearly always has one way to play, whose
    flat steps are already the one step: no zip is built for it.
    """
    relevant = floor & RELEVANT[card]
    steps = steps_on((relevant << 1 | (relevant != floor)) << CARD_BITS | card)
    if len(steps) == ONE_STEP:
        return (steps,)
    items = iter(steps)
    return tuple(zip(items, items, items, strict=True))


def effects(card: Card, floor: int) -> list[Effect]:
    """What each way to play `card` on `floor` does: one per plan in offered order, or the
    trail.

    The steps behind them are memoised per relevant part of the floor, the way plans_for
    memoises: a search meets many floors that differ only where the card cannot look.
    """
    return [Effect(floor ^ moved, gain, taken) for moved, gain, taken in plays(card, floor)]


def _plays_like(card: Card, other: Card) -> bool:
    """Whether two cards score the same when taken, and sweep both or neither."""
    same_points = card_points(1 << card) == card_points(1 << other)
    return same_points and is_sweeper(card) == is_sweeper(other)


# Cards that play alike in every position get one bit each, shared by their rank; a card
# that plays like no other of its rank (points or a sweep of its own: the 2C, the 10D, the
# 7D) gets a bit of its own. Two cards of one hand with the same bit lead to the same
# values, so a search tries only the first.
EQUIVALENCE: tuple[int, ...] = tuple(
    1 << RANK_OF[card]
    if any(_plays_like(card, other) for other in cards_of(RANK_MASKS[RANK_OF[card]] ^ 1 << card))
    else 1 << (len(RANKS) + card)
    for card in range(DECK_SIZE)
)


@lru_cache(maxsize=1 << 12)
def distinct_cards(hand: int) -> tuple[Card, ...]:
    """The cards of a hand (a bitmask) a search tries: in canonical order, the first of each
    EQUIVALENCE bit. A decision meets a few hundred hands, each in many nodes."""
    tried = 0
    out: list[Card] = []
    for card in cards_of(hand):
        if not tried & EQUIVALENCE[card]:
            tried |= EQUIVALENCE[card]
            out.append(card)
    return tuple(out)


# The ranks without a value other than the J (Q, K): they take only cards of their rank.
_RANK_ONLY: tuple[int, ...] = tuple(
    RANK_MASKS[rank] for rank, value in enumerate(RANK_VALUES) if not value and rank != JACK_RANK
)
# Per numeric rank, by ascending value: the value, the rank's cards, and one of them that
# captures by value (the lowest; the 7D sweeps instead).
_BY_VALUE: tuple[tuple[int, int, Card], ...] = tuple(
    (RANK_VALUES[rank], RANK_MASKS[rank], min(cards_of(RANK_MASKS[rank] & ~SWEEPERS_MASK)))
    for rank in sorted(
        (rank for rank, value in enumerate(RANK_VALUES) if value), key=RANK_VALUES.__getitem__
    )
)


@lru_cache(maxsize=1 << 16)
def clearers(floor: int) -> int:
    """Return the mask of the cards that, played on `floor`, would score a Basra.

    Cheap tests rule out most ranks first (a numeric card clears only a floor of its rank
    and of smaller values summing to a multiple of it); the plans decide the rest.
    """
    if not floor:
        return 0
    found = 0
    if floor & ~NUMERIC_MASK:
        for rank_mask in _RANK_ONLY:
            if floor & rank_mask == floor:
                found |= rank_mask
    else:
        values = [RANK_VALUES[RANK_OF[card]] for card in cards_of(floor)]
        top, total = max(values), sum(values)
        for value, rank_mask, card in _BY_VALUE:
            if value < top:
                continue
            same = values.count(value)
            rest = total - same * value
            if rest % value or (rest and len(values) - same < MIN_GROUP_CARDS):
                continue
            if any(plan.basra for plan in plans_unmemoised(card, floor)):
                found |= rank_mask
    found &= ~(1 << SEVEN_OF_DIAMONDS)  # the 7D sweeps instead, under its own condition
    if seven_d_basra(floor):
        found |= 1 << SEVEN_OF_DIAMONDS
    return found
