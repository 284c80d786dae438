"""Cards: text codes, canonical order and index, values, card sets as bitmasks."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import TypeAlias, TypeVar

from engine.errors import Reason, RuleError
from engine.facts import (
    ACE,
    ACE_POINTS,
    CODES,
    DECK_SIZE,
    JACK,
    JACK_POINTS,
    RANKS,
    SEVEN_D_BASRA_BLOCKERS,
    SEVEN_D_BASRA_MAX_FLOOR,
    SEVEN_OF_DIAMONDS,
    SUITS,
    TEN_OF_DIAMONDS,
    TEN_OF_DIAMONDS_POINTS,
    TWO_OF_CLUBS,
    TWO_OF_CLUBS_POINTS,
    VALUES,
)

# A card is its canonical index in facts.CODES: rank_position * 4 + suit_position.
Card: TypeAlias = int

FULL_MASK = (1 << DECK_SIZE) - 1
CARD_BITS = (DECK_SIZE - 1).bit_length()
"""Bits that hold any card: a card packed into an integer key takes this many."""
_INDEX_BY_CODE: dict[str, Card] = {code: index for index, code in enumerate(CODES)}
# Longest piece of a rejected value quoted back in an error (a code is at most 3 characters).
SHOWN_CHARS = 16

RANK_OF: tuple[int, ...] = tuple(RANKS.index(c[:-1]) for c in CODES)
"""Rank position (0..12, A..K) of each card."""
RANK_VALUES: tuple[int, ...] = tuple(VALUES.get(rank, 0) for rank in RANKS)
"""Numeric value of each rank position, 0 for the ranks that have none (J, Q, K)."""
JACK_RANK = RANKS.index(JACK)
VALUE_BITS = max(RANK_VALUES).bit_length()
"""Bits that hold any numeric value: a value packed into an integer key takes this many."""

# Masks of the four cards of each rank, for rank captures and scoring.
RANK_MASKS: tuple[int, ...] = tuple(
    sum(1 << _INDEX_BY_CODE[rank + suit] for suit in SUITS) for rank in RANKS
)
JACKS_MASK = RANK_MASKS[JACK_RANK]
ACES_MASK = RANK_MASKS[RANKS.index(ACE)]
LOWER_RANKS_MASKS: tuple[int, ...] = tuple(sum(RANK_MASKS[:rank]) for rank in range(len(RANKS)))
"""Per rank position, the cards of every lower rank."""
# Cards with a numeric value (A..10): the only ones that can be part of a sum.
NUMERIC_MASK = sum(RANK_MASKS[r] for r, value in enumerate(RANK_VALUES) if value)
# The cards that sweep when played and that a new floor may not hold: every J and the 7D.
SWEEPERS_MASK = JACKS_MASK | 1 << SEVEN_OF_DIAMONDS
# The cards whose presence on the floor keeps the 7D's sweep from being a Basra.
SEVEN_D_BASRA_BLOCKERS_MASK = sum(RANK_MASKS[RANKS.index(rank)] for rank in SEVEN_D_BASRA_BLOCKERS)


def is_sweeper(card: Card) -> bool:
    """Return whether a card sweeps when played (a J or the 7D), so no new floor holds it."""
    return bool(SWEEPERS_MASK >> card & 1)


def seven_d_basra(floor: int) -> bool:
    """Return whether the 7D played on a non-empty floor (a bitmask) scores a Basra."""
    return floor.bit_count() <= SEVEN_D_BASRA_MAX_FLOOR and not floor & SEVEN_D_BASRA_BLOCKERS_MASK


def card_points(cards: int) -> int:
    """Return the points of the special cards in a set of cards (a bitmask): every J and A,
    the 2C and the 10D, as a hand's score counts them."""
    return (
        JACK_POINTS * (cards & JACKS_MASK).bit_count()
        + ACE_POINTS * (cards & ACES_MASK).bit_count()
        + TWO_OF_CLUBS_POINTS * (cards >> TWO_OF_CLUBS & 1)
        + TEN_OF_DIAMONDS_POINTS * (cards >> TEN_OF_DIAMONDS & 1)
    )


def shown(value: object) -> str:
    """Return `repr(value)`, with the cards of a card or a nest of tuples of cards as codes."""
    if type(value) is int and 0 <= value < DECK_SIZE:
        return CODES[value]
    if type(value) is tuple:
        inner = ", ".join(map(shown, value))
        return f"({inner},)" if len(value) == 1 else f"({inner})"
    return repr(value)


_T = TypeVar("_T")
_NAMES_A_CARD = re.compile(r"\bCard\b")


def shows_codes(cls: type[_T]) -> type[_T]:
    """Give a class whose fields hold cards a repr that prints them as codes (7D, not 25).

    Only printing pays for it: the cards stay ints, so equality, hashing and the speed of
    everything else are unchanged. Fields whose annotation names `Card` are printed with
    `shown`, the others with `repr`, in the order the class declares them.
    """
    fields = tuple(
        (name, shown if _NAMES_A_CARD.search(str(kind)) else repr)
        for name, kind in cls.__annotations__.items()
    )

    def printed(self: object) -> str:
        parts = ", ".join(f"{name}={show(getattr(self, name))}" for name, show in fields)
        return f"{type(self).__qualname__}({parts})"

    cls.__repr__ = printed  # type: ignore[method-assign]
    return cls


def parse_card(text: str) -> Card:
    """Return the card for a text code such as "AC", "10D" or "QS"; refuse anything else."""
    card = _INDEX_BY_CODE.get(text) if isinstance(text, str) else None
    if card is None:
        fits = isinstance(text, str) and len(text) <= SHOWN_CHARS
        shown = text if fits else repr(text)[:SHOWN_CHARS]
        raise RuleError(
            Reason.INVALID_CARD,
            f"'{shown}' is not a card code; expected a rank A,2..10,J,Q,K then a suit C,D,H,S.",
            card=str(shown),
        )
    return card


def parse_cards(texts: Iterable[str]) -> tuple[Card, ...]:
    """Parse several card codes, keeping their order."""
    return tuple(parse_card(t) for t in texts)


def code(card: Card) -> str:
    """Return the text code of a card."""
    return CODES[card]


def codes(cards: Iterable[Card]) -> list[str]:
    """Return the text codes of several cards, keeping their order."""
    return [CODES[c] for c in cards]


def mask_of(cards: Iterable[Card]) -> int:
    """Return the bitmask of a collection of cards."""
    mask = 0
    for c in cards:
        mask |= 1 << c
    return mask


def cards_of(mask: int) -> tuple[Card, ...]:
    """Return the cards of a bitmask in canonical order."""
    out: list[Card] = []
    while mask:
        low = mask & -mask
        out.append(low.bit_length() - 1)
        mask ^= low
    return tuple(out)
