"""Cards: text codes, canonical order and index, numeric values, card sets as bitmasks."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TypeAlias

from engine.errors import Reason, RuleError

# A card is its canonical index 0..51: rank_position * 4 + suit_position.
Card: TypeAlias = int

RANKS: tuple[str, ...] = ("A", "2", "3", "4", "5", "6", "7", "8", "9", "10", "J", "Q", "K")
SUITS: tuple[str, ...] = ("C", "D", "H", "S")
DECK_SIZE = 52
FULL_MASK = (1 << DECK_SIZE) - 1

JACK_RANK = 10
QUEEN_RANK = 11
KING_RANK = 12
SEVEN_OF_DIAMONDS: Card = 6 * 4 + 1
TEN_OF_DIAMONDS: Card = 9 * 4 + 1
TWO_OF_CLUBS: Card = 1 * 4 + 0

CODES: tuple[str, ...] = tuple(rank + suit for rank in RANKS for suit in SUITS)
_INDEX_BY_CODE: dict[str, Card] = {code: index for index, code in enumerate(CODES)}

# Masks of the four cards of each rank, for rank captures and scoring.
RANK_MASKS: tuple[int, ...] = tuple(0b1111 << (4 * r) for r in range(len(RANKS)))
JACKS_MASK = RANK_MASKS[JACK_RANK]
ACES_MASK = RANK_MASKS[0]
# Cards with a numeric value (A..10): the only ones that can be part of a sum.
NUMERIC_MASK = (1 << 40) - 1


def parse_card(text: str) -> Card:
    """Return the card for a text code such as "AC", "10D" or "QS"; refuse anything else."""
    card = _INDEX_BY_CODE.get(text) if isinstance(text, str) else None
    if card is None:
        shown = text if isinstance(text, str) and len(text) <= 16 else repr(text)[:16]
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


def rank_of(card: Card) -> int:
    """Return the rank position 0..12 (A..K) of a card."""
    return card >> 2


def suit_of(card: Card) -> int:
    """Return the suit position 0..3 (C, D, H, S) of a card."""
    return card & 3


def value_of(card: Card) -> int:
    """Return the numeric value of a card (A=1 .. 10=10), or 0 for J, Q and K."""
    rank = card >> 2
    return rank + 1 if rank < JACK_RANK else 0


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


def sort_cards(cards: Iterable[Card]) -> tuple[Card, ...]:
    """Return cards sorted in canonical order."""
    return tuple(sorted(cards))
