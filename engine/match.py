"""The match flow: creating a match, dealing, applying one action, legal moves."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace

from engine import rng
from engine.cards import SHOWN_CHARS, Card, code, is_sweeper, mask_of, shows_codes
from engine.errors import Reason, RuleError
from engine.events import (
    BasraScored,
    Captured,
    CardPlayed,
    CardsDealt,
    Event,
    FloorFixed,
    HandStarted,
    LeftoversAwarded,
    MatchOver,
    Swept,
    Trailed,
)
from engine.facts import (
    DECK_SIZE,
    DEFAULT_WORK_LIMIT,
    FLOOR_CARDS,
    HAND_CARDS,
    MAX_LABEL_CHARS,
    MAX_SEED_BYTES,
    MIN_SEED_BYTES,
    ROUND_CARDS,
)
from engine.plans import Plan, plans_for
from engine.scoring import match_winner, score_hand
from engine.state import State, Status
from engine.validate import check_seat, check_state, is_label


@shows_codes
@dataclass(frozen=True, slots=True)
class Action:
    """A seat plays a card: with no choice, a plan id, an explicit capture set, or a trail."""

    seat: int
    card: Card
    plan_id: int | None = None
    capture: tuple[Card, ...] | None = None
    trail: bool = False


@shows_codes
@dataclass(frozen=True, slots=True)
class Move:
    """What one card of the hand to move can do: its plans, or that it trails."""

    card: Card
    plans: tuple[Plan, ...]
    trails: bool


def new_match(seed: bytes, labels: tuple[str, str] = ("", "")) -> tuple[State, tuple[Event, ...]]:
    """Create a match from its seed: choose the first dealer and deal the first hand."""
    if not rng.is_seed(seed):
        raise RuleError(
            Reason.INVALID_SEED,
            f"The seed must be {MIN_SEED_BYTES} to {MAX_SEED_BYTES} bytes long.",
            length=len(seed) if isinstance(seed, bytes) else -1,
        )
    for seat, label in enumerate(labels):
        if not is_label(label):
            raise RuleError(
                Reason.INVALID_LABEL,
                f"Label {seat} must be printable, {MAX_LABEL_CHARS} characters at most.",
                seat=seat,
            )
    empty: tuple[Card, ...] = ()
    # "Hand 0": everything _start_hand does not set; it deals hand 1 and picks its dealer.
    blank = State(
        seed=seed,
        seq=0,
        hand_number=0,
        dealer=0,
        to_move=None,
        deck=empty,
        hands=(empty, empty),
        floor=empty,
        captured=(empty, empty),
        basras=(0, 0),
        last_capturer=None,
        unclaimed=empty,
        totals=(0, 0),
        carry=0,
        status=Status.IN_PROGRESS,
        winner=None,
        labels=(labels[0], labels[1]),
    )
    events: list[Event] = []
    return _start_hand(blank, events), tuple(events)


@shows_codes
@dataclass(frozen=True, slots=True)
class Deal:
    """The start of a hand as the seed gives it: hands, fixed floor, undealt deck, events."""

    dealer: int
    hands: tuple[tuple[Card, ...], tuple[Card, ...]]
    floor: tuple[Card, ...]
    deck: tuple[Card, ...]
    events: tuple[HandStarted | CardsDealt | FloorFixed, ...]


def deal_hand(seed: bytes, hand_number: int) -> Deal:
    """Shuffle hand `hand_number`'s full deck, deal both hands and the floor, fix the floor."""
    dealer = rng.dealer_of_hand(seed, hand_number)
    other = 1 - dealer
    deck = rng.shuffled(seed, rng.deck_label(hand_number), range(DECK_SIZE))
    hands: list[tuple[Card, ...]] = [(), ()]
    hands[other] = deck[:HAND_CARDS]
    hands[dealer] = deck[HAND_CARDS:ROUND_CARDS]
    floor = deck[ROUND_CARDS : ROUND_CARDS + FLOOR_CARDS]
    rest = deck[ROUND_CARDS + FLOOR_CARDS :]
    events: list[HandStarted | CardsDealt | FloorFixed] = [
        HandStarted(hand_number, dealer),
        CardsDealt(other, hands[other]),
        CardsDealt(dealer, hands[dealer]),
        CardsDealt(None, floor),
    ]
    fixes = 0
    while returned := tuple(c for c in floor if is_sweeper(c)):
        fixes += 1
        reshuffled = rng.shuffled(seed, rng.fix_label(hand_number, fixes), rest + returned)
        replacements = reshuffled[: len(returned)]
        rest = reshuffled[len(returned) :]
        floor = tuple(c for c in floor if c not in returned) + replacements
        events.append(FloorFixed(returned, replacements))
    return Deal(dealer, (hands[0], hands[1]), floor, rest, tuple(events))


def _start_hand(state: State, events: list[Event]) -> State:
    """Begin the next hand: alternate the dealer, shuffle a full deck, deal and fix the floor."""
    deal = deal_hand(state.seed, state.hand_number + 1)
    events.extend(deal.events)
    return replace(
        state,
        hand_number=state.hand_number + 1,
        dealer=deal.dealer,
        to_move=1 - deal.dealer,
        deck=deal.deck,
        hands=deal.hands,
        floor=deal.floor,
        captured=((), ()),
        basras=(0, 0),
        last_capturer=None,
        unclaimed=(),
    )


PlanGenerator = Callable[[Card, int, int], tuple[Plan, ...]]


def legal_moves(
    state: State,
    work_limit: int = DEFAULT_WORK_LIMIT,
    generate: PlanGenerator = plans_for,
) -> tuple[Move, ...]:
    """Return, for each card in the hand of the seat to move, its plans or that it trails.

    `generate` is the plan generator (card, floor mask, work limit); a caller may wrap
    `plans_for` to observe each card's generation, as the service does for its metrics.
    """
    if state.status is Status.OVER or state.to_move is None:
        return ()
    floor = state.floor_mask
    moves = []
    for card in state.hands[state.to_move]:
        plans = generate(card, floor, work_limit)
        moves.append(Move(card, plans, not plans))
    return tuple(moves)


def legal_actions(state: State, work_limit: int = DEFAULT_WORK_LIMIT) -> Iterator[Action]:
    """Yield every legal action of the seat to move, in hand order, a card's plans by id.

    The flat form of `legal_moves`: one action per plan of a capturing card (by plan id) and
    one trail per card that trails. Other ways to write the same choice (no choice for a
    card with a single plan, the plan's cards as a capture set) are not listed again.
    """
    seat = state.to_move
    if seat is None:
        return
    for move in legal_moves(state, work_limit):
        if move.trails:
            yield Action(seat, move.card, trail=True)
        for plan in move.plans:
            yield Action(seat, move.card, plan_id=plan.id)


def apply(
    state: State,
    action: Action,
    *,
    work_limit: int = DEFAULT_WORK_LIMIT,
    check: bool = True,
) -> tuple[State, tuple[Event, ...]]:
    """Apply one action and return the new state and its events; the old state is untouched.

    `check` runs the consistency check on the incoming state; callers that built the state
    themselves from a checked one (such as replay) may skip it.
    """
    if check:
        check_state(state)
    if state.status is Status.OVER:
        raise RuleError(Reason.MATCH_OVER, "The match is over; no more moves can be played.")
    seat = action.seat
    check_seat(seat)
    if seat != state.to_move:
        raise RuleError(
            Reason.NOT_YOUR_TURN,
            f"It is seat {state.to_move}'s turn, not seat {seat}'s.",
            seat=seat,
            to_move=str(state.to_move),
        )
    card = action.card
    _check_card(card)
    if action.capture is not None:
        for taken in action.capture:
            _check_card(taken)
    hand = state.hands[seat]
    if card not in hand:
        raise RuleError(
            Reason.CARD_NOT_IN_HAND,
            f"Card {code(card)} is not in seat {seat}'s hand.",
            card=code(card),
            seat=seat,
        )
    plans = plans_for(card, state.floor_mask, work_limit)
    plan = _choose(action, plans)
    return _carry_out(state, seat, card, plan)


def _check_card(card: Card) -> None:
    """Refuse a value that is not a card index, before it is used as one."""
    if type(card) is not int or not 0 <= card < DECK_SIZE:
        shown = str(card)[:SHOWN_CHARS]
        raise RuleError(
            Reason.INVALID_CARD, f"{shown} is not a card (0 to {DECK_SIZE - 1}).", card=shown
        )


def _must_capture(name: str, plans: int, instead: str) -> RuleError:
    # Rule choose.compulsory: a card that has a plan must capture, whatever the action asks.
    return RuleError(
        Reason.MUST_CAPTURE,
        f"Card {name} has a capture, so it cannot {instead}.",
        card=name,
        plans=plans,
    )


def _choose(action: Action, plans: tuple[Plan, ...]) -> Plan | None:
    """Return the plan the action selects, None for a trail, or refuse the action."""
    name = code(action.card)
    chosen = (action.plan_id is not None) + (action.capture is not None) + bool(action.trail)
    if chosen > 1:
        raise RuleError(
            Reason.INVALID_ACTION,
            "An action names at most one of a plan id, a capture set or a trail.",
            card=name,
        )
    if action.trail:
        if plans:
            raise _must_capture(name, len(plans), "be trailed")
        return None
    if action.plan_id is not None:
        if 1 <= action.plan_id <= len(plans):
            return plans[action.plan_id - 1]
        raise RuleError(
            Reason.UNKNOWN_PLAN,
            f"Card {name} has no plan {action.plan_id}; it has {len(plans)}.",
            card=name,
            planId=action.plan_id,
            plans=len(plans),
        )
    if action.capture is not None:
        wanted = mask_of(action.capture)
        if not action.capture:
            if plans:
                raise _must_capture(name, len(plans), "take nothing")
            return None
        if wanted.bit_count() == len(action.capture):
            for plan in plans:
                if plan.mask == wanted:
                    return plan
        raise RuleError(
            Reason.ILLEGAL_CAPTURE,
            f"Card {name} cannot take exactly those cards; choose one of its {len(plans)} plans.",
            card=name,
            capture=" ".join(code(c) for c in action.capture),
            plans=len(plans),
        )
    if len(plans) > 1:
        raise RuleError(
            Reason.PLAN_REQUIRED,
            f"Card {name} has {len(plans)} plans; name one by id or by its cards.",
            card=name,
            plans=len(plans),
        )
    return plans[0] if plans else None


def _carry_out(
    state: State, seat: int, card: Card, plan: Plan | None
) -> tuple[State, tuple[Event, ...]]:
    events: list[Event] = [CardPlayed(seat, card)]
    hands = list(state.hands)
    hands[seat] = tuple(c for c in hands[seat] if c != card)
    captured = list(state.captured)
    basras = list(state.basras)
    last_capturer = state.last_capturer
    if plan is None:
        floor = (*state.floor, card)
        events.append(Trailed(seat, card))
    else:
        floor = tuple(c for c in state.floor if not plan.mask >> c & 1)
        captured[seat] = (*captured[seat], card, *plan.cards)
        last_capturer = seat
        events.append(Captured(seat, card, plan.id, plan.cards, plan.same_rank, plan.groups))
        if plan.sweep:
            events.append(Swept(seat, card, plan.cards))
        if plan.basra:
            basras[seat] += 1
            events.append(BasraScored(seat, card))
    # Built field by field rather than with dataclasses.replace: this runs on every play, and
    # replace() copies every field through a generic path that looks each one up by name.
    after = State(
        seed=state.seed,
        seq=state.seq + 1,
        hand_number=state.hand_number,
        dealer=state.dealer,
        to_move=1 - seat,
        deck=state.deck,
        hands=(hands[0], hands[1]),
        floor=floor,
        captured=(captured[0], captured[1]),
        basras=(basras[0], basras[1]),
        last_capturer=last_capturer,
        unclaimed=state.unclaimed,
        totals=state.totals,
        carry=state.carry,
        status=state.status,
        winner=state.winner,
        labels=state.labels,
    )
    if not after.hands[0] and not after.hands[1]:
        after = _next_round(after, events)
    return after, tuple(events)


def _next_round(state: State, events: list[Event]) -> State:
    """Deal the next four cards each, or end and score the hand when the deck is empty."""
    if state.deck:
        dealer = state.dealer
        other = 1 - dealer
        deck = state.deck
        hands: list[tuple[Card, ...]] = [(), ()]
        hands[other] = deck[:HAND_CARDS]
        hands[dealer] = deck[HAND_CARDS:ROUND_CARDS]
        events.append(CardsDealt(other, hands[other]))
        events.append(CardsDealt(dealer, hands[dealer]))
        return replace(state, deck=deck[ROUND_CARDS:], hands=(hands[0], hands[1]), to_move=other)
    captured = state.captured
    unclaimed: tuple[Card, ...] = ()
    if state.floor:
        events.append(LeftoversAwarded(state.last_capturer, state.floor))
        if state.last_capturer is None:
            unclaimed = state.floor
        else:
            piles = list(captured)
            piles[state.last_capturer] = (*piles[state.last_capturer], *state.floor)
            captured = (piles[0], piles[1])
    scored = score_hand(
        state.hand_number,
        (mask_of(captured[0]), mask_of(captured[1])),
        state.basras,
        state.carry,
        state.totals,
    )
    events.append(scored)
    totals = (scored.seats[0].running_total, scored.seats[1].running_total)
    ended = replace(
        state,
        floor=(),
        captured=captured,
        unclaimed=unclaimed,
        totals=totals,
        carry=scored.carry_after,
    )
    winner = match_winner(totals)
    if winner is not None:
        events.append(MatchOver(winner, totals))
        return replace(ended, status=Status.OVER, winner=winner, to_move=None)
    return _start_hand(ended, events)
