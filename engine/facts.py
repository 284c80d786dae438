"""The facts of two-player Basra as data: the deck, the deal, the points, the end, the limits.

docs/rules.md states them in prose; here they are stated once, first, and every other number of
the engine is derived from them. This module imports nothing of the engine, so any module
(and any player program) can read the game without reaching the match machinery.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

# --- Cards (docs/rules.md 1) -------------------------------------------------------------

RANKS: tuple[str, ...] = ("A", "2", "3", "4", "5", "6", "7", "8", "9", "10", "J", "Q", "K")
"""Ranks in canonical order."""
SUITS: tuple[str, ...] = ("C", "D", "H", "S")
"""Suits in canonical order: clubs, diamonds, hearts, spades."""
CODES: tuple[str, ...] = tuple(rank + suit for rank in RANKS for suit in SUITS)
"""Text code of every card in canonical order: a card is its index here (rank, then suit)."""
DECK_SIZE = len(CODES)

VALUES: Mapping[str, int] = MappingProxyType(
    {"A": 1, "2": 2, "3": 3, "4": 4, "5": 5, "6": 6, "7": 7, "8": 8, "9": 9, "10": 10}
)
"""Numeric value of each rank that has one; J, Q and K have none and never join a sum."""

JACK = "J"
"""The rank that sweeps a non-empty floor (never a Basra) and is fixed out of a new floor."""
ACE = "A"
SEVEN_OF_DIAMONDS = CODES.index("7D")
"""Sweeps when played (a Basra under SEVEN_D_BASRA_*); fixed out of a new floor."""
TEN_OF_DIAMONDS = CODES.index("10D")
TWO_OF_CLUBS = CODES.index("2C")

# --- Seats and the deal (docs/rules.md 2) ------------------------------------------------

SEATS: tuple[int, int] = (0, 1)
HAND_CARDS = 4
"""Cards dealt to each seat per round."""
FLOOR_CARDS = 4
"""Cards dealt face up to the floor at the start of a hand."""
ROUND_CARDS = len(SEATS) * HAND_CARDS
"""Cards dealt per round: a hand to each seat."""
ROUNDS = (DECK_SIZE - FLOOR_CARDS) // ROUND_CARDS
"""Rounds of a hand (6): the deck left after the floor, a round's cards at a time."""
PLAYS_PER_HAND = ROUNDS * ROUND_CARDS
"""Plays of a hand (48): every dealt card is played once."""
DECK_AFTER_DEAL = DECK_SIZE - FLOOR_CARDS - ROUND_CARDS
"""Undealt cards once the first round and the floor are out (40)."""

# --- One play (docs/rules.md 3) ----------------------------------------------------------

MIN_GROUP_CARDS = 2
"""A group is this many or more floor cards summing to the played value."""
MAX_PLANS = 12
"""At most this many capture plans are offered, the first in offered order."""
SEVEN_D_BASRA_MAX_FLOOR = 10
"""The 7D sweep is a Basra only when the floor held at most this many cards ..."""
SEVEN_D_BASRA_BLOCKERS: tuple[str, ...] = ("Q", "K")
"""... and no card of these ranks."""

# --- Points of a hand (docs/rules.md 4) --------------------------------------------------

TIE_CARDS = DECK_SIZE // 2
"""Captured cards of each seat in a tie (26/26): the majority points carry over."""
MAJORITY_CARDS = TIE_CARDS + 1
"""Captured cards that take the majority (27): more than half the deck."""
MAJORITY_POINTS = 30
"""Points of the majority, plus the carry; also what each tie adds to the carry."""
JACK_POINTS = 1
"""Points of each captured J."""
ACE_POINTS = 1
"""Points of each captured A."""
TWO_OF_CLUBS_POINTS = 2
TEN_OF_DIAMONDS_POINTS = 3
BASRA_POINTS = 10
ITEM_POINTS = (JACK_POINTS + ACE_POINTS) * len(SUITS) + TWO_OF_CLUBS_POINTS + TEN_OF_DIAMONDS_POINTS
"""Points of the special cards of one deck together (13): every J and A, the 2C and the 10D."""

# --- End of the match (docs/rules.md 5) --------------------------------------------------

TARGET = 121
"""Running total that ends the match after a complete hand."""

# --- Limits of what the engine accepts ------------------------------------------------

DEFAULT_WORK_LIMIT = 10_000
"""Search steps one plan generation may take by default. Reachable floors need at most a few
thousand (docs/rules.md gives the argument); crafted floors beyond it are refused."""
MIN_SEED_BYTES = 1
MAX_SEED_BYTES = 64
MAX_LABEL_CHARS = 64
"""A player's label is printable text of at most this many characters."""
