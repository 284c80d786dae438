"""Fairness check a player can run: the seed fits its commitment and every deal follows from it.

The deals of a hand depend only on the seed and the hand number, never on the play, so the
verifier recomputes them straight from the labelled streams (docs/determinism.md) without the
match flow. It then replays the recorded actions and compares the deals the replay made with
the recomputed ones, and, when given, the deals one seat was shown with what that seat should
have seen. The verdict names the first discrepancy found.
"""

from __future__ import annotations

import hmac
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum

from engine import rng
from engine.cards import code
from engine.events import Captured, CardPlayed, CardsDealt, Event, FloorFixed, HandStarted, Trailed
from engine.facts import (
    DEFAULT_WORK_LIMIT,
    HAND_CARDS,
    MAX_SEED_BYTES,
    MIN_SEED_BYTES,
    ROUND_CARDS,
    SEATS,
)
from engine.match import Action, deal_hand
from engine.replay import replay
from engine.state import Status
from engine.view import HiddenDeal, seat_events

DealEvent = HandStarted | CardsDealt | FloorFixed
"""An event that the seed alone decides."""
SeenDeal = DealEvent | HiddenDeal
"""A deal event as one seat sees it."""


class Finding(StrEnum):
    """Kinds of discrepancy, in the order the verifier looks for them."""

    INVALID_SEED = "INVALID_SEED"
    """The seed is not MIN_SEED_BYTES to MAX_SEED_BYTES long, so no match can have used it."""
    COMMITMENT_MISMATCH = "COMMITMENT_MISMATCH"
    """SHA-256 of the seed is not the commitment shown at the start of the match."""
    DEAL_MISMATCH = "DEAL_MISMATCH"
    """A deal of the replay differs from the deal recomputed from the seed."""
    ACTION_REFUSED = "ACTION_REFUSED"
    """A recorded action is not legal where it was played."""
    OBSERVED_MISMATCH = "OBSERVED_MISMATCH"
    """A deal the seat was shown differs from what it should have seen."""
    OBSERVED_MISSING = "OBSERVED_MISSING"
    """The seat was shown fewer deals than the recorded actions lead to."""
    OBSERVED_EXTRA = "OBSERVED_EXTRA"
    """The seat was shown more deals than the recorded actions lead to."""


@dataclass(frozen=True, slots=True)
class Discrepancy:
    """The first thing found wrong: its kind, one English sentence, and where it is."""

    finding: Finding
    message: str
    index: int | None = None
    """0-based index of the action (ACTION_REFUSED) or of the deal event involved."""


@dataclass(frozen=True, slots=True)
class Verdict:
    """The outcome of a fairness check and how much it covered."""

    discrepancy: Discrepancy | None
    actions_applied: int
    """Recorded actions the replay accepted."""
    hands: int
    """Hands whose deals were recomputed and compared."""
    deals_checked: int
    """Cards-dealt events compared with the recomputed deals (floor deals included)."""
    fixes_checked: int
    """Floor fixes compared with the recomputed ones."""
    observed_checked: int
    """Deal events of the seat's record found equal to what it should have seen."""
    match_over: bool
    """Whether the recorded actions play the match to its end."""

    @property
    def honest(self) -> bool:
        """Whether nothing was found wrong."""
        return self.discrepancy is None


def hand_deals(seed: bytes, hand_number: int) -> tuple[DealEvent, ...]:
    """Return every deal event of one hand, computed from the seed alone."""
    deal = deal_hand(seed, hand_number)
    dealer, rest = deal.dealer, deal.deck
    deals: list[DealEvent] = list(deal.events)
    for start in range(0, len(rest), ROUND_CARDS):
        deals.append(CardsDealt(1 - dealer, rest[start : start + HAND_CARDS]))
        deals.append(CardsDealt(dealer, rest[start + HAND_CARDS : start + ROUND_CARDS]))
    return tuple(deals)


def actions_from_events(events: Iterable[Event | HiddenDeal]) -> tuple[Action, ...]:
    """Return the actions that produced a list of events (full or one seat's): plays are public."""
    actions: list[Action] = []
    played: CardPlayed | None = None
    for event in events:
        if isinstance(event, CardPlayed):
            played = event
        elif isinstance(event, Captured) and played is not None:
            actions.append(Action(played.seat, played.card, plan_id=event.plan_id))
            played = None
        elif isinstance(event, Trailed) and played is not None:
            actions.append(Action(played.seat, played.card, trail=True))
            played = None
    return tuple(actions)


def _show(event: SeenDeal) -> str:
    """One readable line for a deal event, for discrepancy messages."""
    match event:
        case HandStarted(number, dealer):
            return f"hand {number} dealt by seat {dealer}"
        case CardsDealt(None, cards):
            return "floor " + " ".join(code(c) for c in cards)
        case CardsDealt(seat, cards):
            return f"seat {seat} gets " + " ".join(code(c) for c in cards)
        case FloorFixed(returned, replacements):
            back = " ".join(code(c) for c in returned)
            return f"floor fix {back} -> " + " ".join(code(c) for c in replacements)
        case HiddenDeal(seat, count):
            return f"seat {seat} gets {count} hidden cards"
    return repr(event)  # pragma: no cover - the match above is exhaustive


def _deals_of(events: Iterable[Event | HiddenDeal]) -> list[SeenDeal]:
    return [e for e in events if isinstance(e, HandStarted | CardsDealt | FloorFixed | HiddenDeal)]


def verify(
    seed: bytes,
    commitment: bytes,
    actions: Iterable[Action],
    *,
    observed: Sequence[Event | HiddenDeal] | None = None,
    seat: int | None = None,
    work_limit: int = DEFAULT_WORK_LIMIT,
) -> Verdict:
    """Check a match: the seed against its commitment, every deal, and a seat's record if given.

    `observed` is the events one seat received, in order (its `seat_events`, concatenated
    over the calls of the match), and `seat` is that seat; only their deal events are compared.
    """
    if observed is not None and seat not in SEATS:
        raise ValueError("a seat's record needs its seat, 0 or 1")
    progress = Verdict(None, 0, 0, 0, 0, 0, match_over=False)
    if not rng.is_seed(seed):
        size = len(seed) if isinstance(seed, bytes) else -1
        return _found(
            progress,
            Finding.INVALID_SEED,
            f"The seed must be {MIN_SEED_BYTES} to {MAX_SEED_BYTES} bytes, not {size}.",
        )
    if not hmac.compare_digest(rng.commitment(seed), bytes(commitment)):
        return _found(
            progress,
            Finding.COMMITMENT_MISMATCH,
            "SHA-256 of the seed is not the commitment shown at the start of the match.",
        )

    result = replay(seed, actions, work_limit=work_limit)
    made = [e for e in result.events if isinstance(e, HandStarted | CardsDealt | FloorFixed)]
    hands = sum(isinstance(e, HandStarted) for e in made)
    progress = replace(
        progress,
        actions_applied=result.state.seq,
        hands=hands,
        match_over=result.state.status is Status.OVER,
    )
    expected: list[DealEvent] = []
    for number in range(1, hands + 1):
        expected.extend(hand_deals(seed, number))
    for index, (actual, wanted) in enumerate(zip(made, expected, strict=False)):
        if actual != wanted:
            return _found(
                progress,
                Finding.DEAL_MISMATCH,
                f"Deal {index} is '{_show(actual)}' but the seed gives '{_show(wanted)}'.",
                index,
            )
        progress = replace(
            progress,
            deals_checked=progress.deals_checked + isinstance(actual, CardsDealt),
            fixes_checked=progress.fixes_checked + isinstance(actual, FloorFixed),
        )
    if len(made) > len(expected) or (progress.match_over and len(made) < len(expected)):
        return _found(
            progress,
            Finding.DEAL_MISMATCH,
            f"The replay made {len(made)} deal events where the seed gives {len(expected)}.",
            min(len(made), len(expected)),
        )
    if result.refused_index is not None and result.error is not None:
        return _found(
            progress,
            Finding.ACTION_REFUSED,
            f"Action {result.refused_index} is not legal there: {result.error.message}",
            result.refused_index,
        )
    if observed is None or seat is None:
        return progress
    return _compare_observed(progress, made, observed, seat)


def _found(progress: Verdict, finding: Finding, message: str, index: int | None = None) -> Verdict:
    """The verdict so far with the first discrepancy found."""
    return replace(progress, discrepancy=Discrepancy(finding, message, index))


def _compare_observed(
    progress: Verdict, made: Sequence[DealEvent], observed: Sequence[Event | HiddenDeal], seat: int
) -> Verdict:
    """Compare the deals a seat was shown with those it should have seen, in order."""
    should_see = _deals_of(seat_events(tuple(made), seat))
    seen = _deals_of(observed)
    for index, (shown, wanted) in enumerate(zip(seen, should_see, strict=False)):
        if shown != wanted:
            return _found(
                progress,
                Finding.OBSERVED_MISMATCH,
                f"Seat {seat} was shown '{_show(shown)}' as deal {index}, "
                f"but the seed gives '{_show(wanted)}'.",
                index,
            )
        progress = replace(progress, observed_checked=index + 1)
    if len(seen) != len(should_see):
        finding = (
            Finding.OBSERVED_EXTRA if len(seen) > len(should_see) else Finding.OBSERVED_MISSING
        )
        return _found(
            progress,
            finding,
            f"Seat {seat} was shown {len(seen)} deal events; the actions lead to "
            f"{len(should_see)}.",
            min(len(seen), len(should_see)),
        )
    return progress
