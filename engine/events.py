"""Events: plain values describing each step of a match, in the order they happened."""

from __future__ import annotations

from dataclasses import dataclass

from engine.cards import Card, shows_codes


@dataclass(frozen=True, slots=True)
class HandStarted:
    """A new hand begins with a freshly shuffled deck."""

    hand_number: int
    dealer: int


@shows_codes
@dataclass(frozen=True, slots=True)
class CardsDealt:
    """Cards dealt from the top of the deck to a seat, or face up to the floor (seat None)."""

    seat: int | None
    cards: tuple[Card, ...]


@shows_codes
@dataclass(frozen=True, slots=True)
class FloorFixed:
    """J or 7D cards on the new floor went back, the deck was reshuffled, replacements dealt."""

    returned: tuple[Card, ...]
    replacements: tuple[Card, ...]


@shows_codes
@dataclass(frozen=True, slots=True)
class CardPlayed:
    """A seat played a card from its hand."""

    seat: int
    card: Card


@shows_codes
@dataclass(frozen=True, slots=True)
class Captured:
    """The played card took floor cards; both go to the seat's pile."""

    seat: int
    card: Card
    plan_id: int
    cards: tuple[Card, ...]
    same_rank: tuple[Card, ...]
    groups: tuple[tuple[Card, ...], ...]


@shows_codes
@dataclass(frozen=True, slots=True)
class Trailed:
    """The played card captured nothing and stays on the floor."""

    seat: int
    card: Card


@shows_codes
@dataclass(frozen=True, slots=True)
class Swept:
    """A J or the 7D took the whole floor."""

    seat: int
    card: Card
    cards: tuple[Card, ...]


@shows_codes
@dataclass(frozen=True, slots=True)
class BasraScored:
    """The play scored a Basra (+10)."""

    seat: int
    card: Card


@shows_codes
@dataclass(frozen=True, slots=True)
class LeftoversAwarded:
    """After the 48th play the floor went to the last capturer (seat None: to nobody)."""

    seat: int | None
    cards: tuple[Card, ...]


@dataclass(frozen=True, slots=True)
class SeatScore:
    """One seat's points for a finished hand; item fields are points unless named counts."""

    cards: int
    """Count of cards captured in the hand."""
    majority: int
    jacks: int
    aces: int
    two_of_clubs: int
    ten_of_diamonds: int
    basras: int
    """Count of Basras (each worth 10 points)."""
    basra_points: int
    hand_total: int
    running_total: int


@dataclass(frozen=True, slots=True)
class HandScored:
    """A hand ended and was scored."""

    hand_number: int
    seats: tuple[SeatScore, SeatScore]
    carry_before: int
    carry_after: int


@dataclass(frozen=True, slots=True)
class MatchOver:
    """The match ended after a complete hand."""

    winner: int
    totals: tuple[int, int]


Event = (
    HandStarted
    | CardsDealt
    | FloorFixed
    | CardPlayed
    | Captured
    | Trailed
    | Swept
    | BasraScored
    | LeftoversAwarded
    | HandScored
    | MatchOver
)
