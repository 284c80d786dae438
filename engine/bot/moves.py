"""What a played card does, as the bot's search needs it: cheap, memoised, on bitmasks.

Capture plans come from engine.plans (plans_unmemoised: this module keeps its own memo);
it only reshapes them into what a search node needs (the floor after the play, the points
gained, the cards taken) and keeps that per (card, floor), so a node costs a memo lookup and
a few integer operations.
"""

from __future__ import annotations

from functools import lru_cache

from engine.cards import (
    ACES_MASK,
    FULL_MASK,
    JACK_RANK,
    JACKS_MASK,
    RANK_MASKS,
    RANK_VALUES,
    Card,
    cards_of,
)
from engine.facts import (
    ACE_POINTS,
    BASRA_POINTS,
    DECK_SIZE,
    JACK_POINTS,
    RANKS,
    SEVEN_D_BASRA_BLOCKERS,
    SEVEN_D_BASRA_MAX_FLOOR,
    SEVEN_OF_DIAMONDS,
    TEN_OF_DIAMONDS,
    TEN_OF_DIAMONDS_POINTS,
    TWO_OF_CLUBS,
    TWO_OF_CLUBS_POINTS,
)
from engine.plans import plans_unmemoised, relevant_mask

MILLI = 1000
"""Search values are integers in thousandths of a point: exact, and the same on any machine."""

# What a play does, as one step: (the cards it moves, points gained in thousandths, cards
# that join the pile). The floor after the play is the floor XOR the cards moved: a capture
# takes cards that lie there, a trail adds the played card, which does not. A trail gains
# nothing and puts no card on the pile.
Step = tuple[int, int, int]
# The steps of a card on a floor, flattened: step i is items 3i, 3i+1, 3i+2. A flat tuple
# of integers is untracked by the cyclic garbage collector at its first look, however the
# collector happens to order its objects; a tuple of tuples may stay tracked for a while.
Steps = tuple[int, ...]


def points_of(mask: int) -> int:
    """Return the points of the special cards in a set of cards, in thousandths."""
    return MILLI * (
        ACE_POINTS * (mask & ACES_MASK).bit_count()
        + JACK_POINTS * (mask & JACKS_MASK).bit_count()
        + TWO_OF_CLUBS_POINTS * (mask >> TWO_OF_CLUBS & 1)
        + TEN_OF_DIAMONDS_POINTS * (mask >> TEN_OF_DIAMONDS & 1)
    )


RELEVANT: tuple[int, ...] = tuple(relevant_mask(card) for card in range(DECK_SIZE))
"""Per card, the floor cards that can change its plans (engine.plans.relevant_mask)."""
# Per card, a card it does not look at, to stand for "other cards lie on the floor".
_OTHER: tuple[int, ...] = tuple(
    (FULL_MASK & ~relevant) & -(FULL_MASK & ~relevant) for relevant in RELEVANT
)


@lru_cache(maxsize=1 << 16)
def steps_on(key: int) -> Steps:
    """The steps of a card on every floor of the same relevant part, by `step_key`.

    One integer argument on purpose: lru_cache then keys its dictionary by that integer,
    which the cyclic garbage collector never tracks. With tuple keys, each new entry would
    put the whole dictionary back under the collector's watch, to be walked entry by entry
    in the next collections (pauses of milliseconds with a full memo).
    """
    card, others, relevant = key & 63, key >> 6 & 1, key >> 7
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


def step_key(card: Card, floor: int) -> int:
    """The memo key of `card` on `floor`: the card, the floor cards that can change its plans
    (engine.plans.relevant_mask) and whether any other card lies there."""
    relevant = floor & RELEVANT[card]
    return (relevant << 1 | (relevant != floor)) << 6 | card


def steps(card: Card, floor: int) -> Steps:
    """Every way to play `card` on `floor`: one step per plan in offered order, or the trail.

    Memoised per relevant part of the floor, the way plans_for memoises: a search meets many
    floors that differ only where the card cannot look.
    """
    return steps_on(step_key(card, floor))


def split(flat: Steps) -> list[Step]:
    """The steps of a flat tuple, one triple each."""
    items = iter(flat)
    return list(zip(items, items, items, strict=True))


# Cards that play alike in every position get one bit each, shared by their rank: an A, a
# J, or a card without points whose rank holds no special card. Two cards of one hand with
# the same bit lead to the same values, so a search tries only the first.
_SPECIAL = 1 << TWO_OF_CLUBS | 1 << TEN_OF_DIAMONDS | 1 << SEVEN_OF_DIAMONDS
EQUIVALENCE: tuple[int, ...] = tuple(
    1 << (13 + card) if _SPECIAL >> card & 1 else 1 << (card >> 2) for card in range(DECK_SIZE)
)


# The ranks without a value other than the J (Q, K): they take only cards of their rank.
_RANK_ONLY: tuple[int, ...] = tuple(
    RANK_MASKS[rank] for rank, value in enumerate(RANK_VALUES) if not value and rank != JACK_RANK
)
_FACES = JACKS_MASK | sum(_RANK_ONLY)
_SEVEN_D_BLOCKERS = sum(RANK_MASKS[RANKS.index(rank)] for rank in SEVEN_D_BASRA_BLOCKERS)


@lru_cache(maxsize=1 << 16)
def clearers(floor: int) -> int:
    """Return the mask of the cards that, played on `floor`, would score a Basra.

    Cheap tests rule out most ranks first (a numeric card clears only a floor of its rank
    and of smaller values summing to a multiple of it); the plans decide the rest.
    """
    if not floor:
        return 0
    found = 0
    if floor & _FACES:
        for rank_mask in _RANK_ONLY:
            if floor & rank_mask == floor:
                found |= rank_mask
    else:
        values = [(card >> 2) + 1 for card in cards_of(floor)]
        for value in range(max(values), 11):
            same = values.count(value)
            rest = sum(values) - same * value
            if rest % value or (rest and len(values) - same < 2):
                continue
            card = 4 * (value - 1)
            if any(plan.basra for plan in plans_unmemoised(card, floor)):
                found |= RANK_MASKS[value - 1]
    found &= ~(1 << SEVEN_OF_DIAMONDS)  # the 7D sweeps instead, under its own condition
    if not floor & _SEVEN_D_BLOCKERS and floor.bit_count() <= SEVEN_D_BASRA_MAX_FLOOR:
        found |= 1 << SEVEN_OF_DIAMONDS
    return found
