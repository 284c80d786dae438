"""The match state: one immutable value holding everything needed to continue a match."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from engine.cards import Card, shows_codes
from engine.facts import DECK_AFTER_DEAL, ROUND_CARDS, ROUNDS


class Status(StrEnum):
    """Whether a match goes on or has ended."""

    IN_PROGRESS = "IN_PROGRESS"
    OVER = "OVER"


@shows_codes
@dataclass(frozen=True, slots=True)
class State:
    """A whole match at one moment. Seats are 0 and 1; cards are canonical indices."""

    seed: bytes
    seq: int
    """Number of actions applied since the match began."""
    hand_number: int
    """1-based number of the hand being played (the last one once the match is over)."""
    dealer: int
    to_move: int | None
    """Seat to play next; None once the match is over."""
    deck: tuple[Card, ...]
    """Undealt cards, the next one dealt first."""
    hands: tuple[tuple[Card, ...], tuple[Card, ...]]
    floor: tuple[Card, ...]
    """Face-up cards in the order they were laid."""
    captured: tuple[tuple[Card, ...], tuple[Card, ...]]
    """This hand's piles, played cards included, in the order they were taken."""
    basras: tuple[int, int]
    """Basras scored in this hand."""
    last_capturer: int | None
    """Seat that captured last in this hand, None if nobody has."""
    unclaimed: tuple[Card, ...]
    """Leftovers of a finished hand in which nobody captured (they belong to nobody)."""
    totals: tuple[int, int]
    """Running match totals, updated after each complete hand."""
    carry: int
    """Majority points carried over by 26/26 ties."""
    status: Status
    winner: int | None
    labels: tuple[str, str] = ("", "")
    """Display names of the two players, as given when the match was created."""

    @property
    def plays_in_hand(self) -> int:
        """Number of plays made so far in the current hand (0..48)."""
        return (
            DECK_AFTER_DEAL + ROUND_CARDS - len(self.deck) - len(self.hands[0]) - len(self.hands[1])
        )

    @property
    def round_number(self) -> int:
        """1-based round (deal of four cards each) of the current hand, 1..6."""
        return min(ROUNDS, (DECK_AFTER_DEAL - len(self.deck)) // ROUND_CARDS + 1)

    @property
    def floor_mask(self) -> int:
        """Bitmask of the floor cards."""
        mask = 0
        for c in self.floor:
            mask |= 1 << c
        return mask
