"""What one seat may see (its own hand, public counts, its legal moves) and what anybody may see."""

from __future__ import annotations

from dataclasses import dataclass

from engine import rng
from engine.cards import Card, shows_codes
from engine.events import CardsDealt, Event
from engine.facts import DEFAULT_WORK_LIMIT
from engine.infoset import InformationSet
from engine.match import Move, PlanGenerator, legal_moves
from engine.plans import plans_for
from engine.state import State, Status
from engine.validate import check_seat


@shows_codes
@dataclass(frozen=True, slots=True)
class PublicView:
    """What anybody may see of a match, without a seat: no hand card, no deck card."""

    seq: int
    hand_number: int
    round_number: int
    dealer: int
    to_move: int | None
    floor: tuple[Card, ...]
    deck_size: int
    hand_sizes: tuple[int, int]
    captured_counts: tuple[int, int]
    basras: tuple[int, int]
    totals: tuple[int, int]
    carry: int
    status: Status
    winner: int | None
    labels: tuple[str, str]
    seed_commitment: bytes
    """SHA-256 of the seed, fixed from the first deal so the seed can be checked later."""
    seed: bytes | None
    """The seed itself, revealed only once the match is over."""


@shows_codes
@dataclass(frozen=True, slots=True)
class SeatView:
    """One seat's observation of a match: what anybody sees, plus its own hand and moves."""

    seat: int
    public: PublicView
    hand: tuple[Card, ...]
    legal_moves: tuple[Move, ...]
    """The seat's own legal moves when it is to move, otherwise empty."""


def public_view(state: State) -> PublicView:
    """Return what anybody (a spectator) may see of `state`: a seat's view without its hand."""
    return PublicView(
        seq=state.seq,
        hand_number=state.hand_number,
        round_number=state.round_number,
        dealer=state.dealer,
        to_move=state.to_move,
        floor=state.floor,
        deck_size=len(state.deck),
        hand_sizes=(len(state.hands[0]), len(state.hands[1])),
        captured_counts=(len(state.captured[0]), len(state.captured[1])),
        basras=state.basras,
        totals=state.totals,
        carry=state.carry,
        status=state.status,
        winner=state.winner,
        labels=state.labels,
        seed_commitment=rng.commitment(state.seed),
        seed=state.seed if state.status is Status.OVER else None,
    )


def seat_view(
    state: State,
    seat: int,
    work_limit: int = DEFAULT_WORK_LIMIT,
    generate: PlanGenerator = plans_for,
) -> SeatView:
    """Return what `seat` may see of `state`; `generate` makes the plans as in legal_moves."""
    check_seat(seat)
    return SeatView(
        seat=seat,
        public=public_view(state),
        hand=state.hands[seat],
        legal_moves=legal_moves(state, work_limit, generate) if state.to_move == seat else (),
    )


def information_set(state: State, seat: int) -> InformationSet:
    """Return `seat`'s information set: what it has seen, for the bot (never hidden cards)."""
    check_seat(seat)
    return InformationSet(
        seat=seat,
        seq=state.seq,
        hand_number=state.hand_number,
        dealer=state.dealer,
        to_move=state.to_move,
        hand=state.hands[seat],
        floor=state.floor,
        captured=state.captured,
        basras=state.basras,
        totals=state.totals,
        carry=state.carry,
        last_capturer=state.last_capturer,
        opponent_hand_size=len(state.hands[1 - seat]),
        deck_size=len(state.deck),
        match_over=state.status is Status.OVER,
    )


@dataclass(frozen=True, slots=True)
class HiddenDeal:
    """Cards dealt to the other seat, as a seat sees them: only how many."""

    seat: int
    count: int


def _hiding_deals(events: tuple[Event, ...], shown: int | None) -> tuple[Event | HiddenDeal, ...]:
    # Cards dealt to a seat other than `shown` become their count; a visible event is passed on
    # as the same object (service/writing.py reuses its values).
    return tuple(
        HiddenDeal(e.seat, len(e.cards))
        if isinstance(e, CardsDealt) and e.seat is not None and e.seat != shown
        else e
        for e in events
    )


def seat_events(events: tuple[Event, ...], seat: int) -> tuple[Event | HiddenDeal, ...]:
    """Return the events as `seat` may see them: the other seat's dealt cards become a count."""
    check_seat(seat)
    return _hiding_deals(events, seat)


def public_events(events: tuple[Event, ...]) -> tuple[Event | HiddenDeal, ...]:
    """Return the events as anybody may see them: the cards dealt to either seat become a count.

    Everything else is public: the plays, what each capture took from the floor, the floor's
    deals and fixes, the leftovers and the scores.
    """
    return _hiding_deals(events, None)
