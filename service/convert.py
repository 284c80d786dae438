"""Translation between basra.v1 messages and engine values; strict on everything received."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from basra.v1 import rules_pb2 as pb

from engine import (
    Action,
    BasraScored,
    Captured,
    CardPlayed,
    CardsDealt,
    Event,
    FloorFixed,
    HandScored,
    HandStarted,
    HiddenDeal,
    LeftoversAwarded,
    MatchOver,
    Move,
    Plan,
    Reason,
    RuleError,
    SeatScore,
    SeatView,
    State,
    Status,
    Swept,
    Trailed,
    code,
    codes,
    parse_card,
    parse_cards,
    seat_events,
)
from engine.cards import Card
from engine.facts import DECK_SIZE

_STATUS_FROM_PROTO = {pb.STATUS_IN_PROGRESS: Status.IN_PROGRESS, pb.STATUS_OVER: Status.OVER}
_STATUS_TO_PROTO = {Status.IN_PROGRESS: pb.STATUS_IN_PROGRESS, Status.OVER: pb.STATUS_OVER}
_CARD_BY_CODE: dict[str, Card] = {code(card): card for card in range(DECK_SIZE)}


def _bad_state(problem: str, **details: str | int) -> RuleError:
    return RuleError(Reason.INVALID_STATE, f"The state is inconsistent: {problem}.", **details)


def _zone(texts: Iterable[str], zone: str) -> tuple[Card, ...]:
    """Parse the card codes of one zone of a received state, naming the zone on failure."""
    try:
        # A plain lookup: states carry 52 codes per call, and this is the hot path.
        return tuple(map(_CARD_BY_CODE.__getitem__, texts))
    except KeyError:
        for text in texts:
            try:
                parse_card(text)
            except RuleError as error:
                shown = error.details.get("card", "")
                problem = f"the {zone} holds '{shown}', which is not a card code"
                raise _bad_state(problem, zone=zone) from None
        raise  # unreachable: a code missing from the table is refused by parse_card


def _optional_seat(message: pb.State, name: str) -> int | None:
    return int(getattr(message, name)) if message.HasField(name) else None


def state_from_proto(message: pb.State) -> State:
    """Return the engine state a message describes; the engine's check_state judges the rest."""
    status = _STATUS_FROM_PROTO.get(message.status)
    if status is None:
        raise _bad_state(f"the status {message.status} is not a known status", field="status")
    if len(message.seats) != 2:
        raise _bad_state(f"it must hold exactly two seats, not {len(message.seats)}", field="seats")
    seat0, seat1 = message.seats
    return State(
        seed=message.seed,
        seq=message.seq,
        hand_number=message.hand_number,
        dealer=message.dealer,
        to_move=_optional_seat(message, "to_move"),
        deck=_zone(message.deck, "deck"),
        hands=(_zone(seat0.hand, "hand of seat 0"), _zone(seat1.hand, "hand of seat 1")),
        floor=_zone(message.floor, "floor"),
        captured=(
            _zone(seat0.captured, "pile of seat 0"),
            _zone(seat1.captured, "pile of seat 1"),
        ),
        basras=(seat0.basras, seat1.basras),
        last_capturer=_optional_seat(message, "last_capturer"),
        unclaimed=_zone(message.unclaimed, "unclaimed leftovers"),
        totals=(seat0.total, seat1.total),
        carry=message.carry,
        status=status,
        winner=_optional_seat(message, "winner"),
        labels=(seat0.label, seat1.label),
    )


def state_to_proto(state: State) -> pb.State:
    """Return the message of an engine state."""
    seats = [
        pb.SeatState(
            hand=codes(state.hands[s]),
            captured=codes(state.captured[s]),
            basras=state.basras[s],
            total=state.totals[s],
            label=state.labels[s],
        )
        for s in (0, 1)
    ]
    return pb.State(
        seq=state.seq,
        to_move=state.to_move,
        dealer=state.dealer,
        hand_number=state.hand_number,
        floor=codes(state.floor),
        deck=codes(state.deck),
        carry=state.carry,
        status=_STATUS_TO_PROTO[state.status],
        winner=state.winner,
        seats=seats,
        seed=state.seed,
        last_capturer=state.last_capturer,
        unclaimed=codes(state.unclaimed),
    )


def action_from_proto(message: pb.Action) -> Action:
    """Return the engine action a message describes, refusing a missing seat or a false trail."""
    if not message.HasField("seat"):
        raise RuleError(Reason.INVALID_SEAT, "The action names no seat; seats are 0 and 1.")
    card = parse_card(message.card)
    choice = message.WhichOneof("choice")
    if choice == "plan_id":
        return Action(message.seat, card, plan_id=message.plan_id)
    if choice == "capture":
        try:
            capture = tuple(parse_card(t) for t in message.capture.cards)
        except RuleError as error:
            raise RuleError(
                Reason.INVALID_CARD,
                f"The capture of {code(card)} names '{error.details.get('card', '')}', "
                "which is not a card code.",
                card=code(card),
                capture=error.details.get("card", ""),
            ) from None
        return Action(message.seat, card, capture=capture)
    if choice == "trail":
        if not message.trail:
            raise RuleError(
                Reason.INVALID_ACTION,
                "An action that sets trail must set it to true.",
                card=code(card),
            )
        return Action(message.seat, card, trail=True)
    return Action(message.seat, card)


def labels_from_proto(labels: Sequence[str]) -> tuple[str, str]:
    """Return the two labels of a request (missing ones are ""); the caller checks the count."""
    padded = [*labels, "", ""]
    return (padded[0], padded[1])


def _plan(plan: Plan) -> pb.Plan:
    return pb.Plan(
        id=plan.id,
        cards=codes(plan.cards),
        groups=[pb.CardList(cards=codes(g)) for g in plan.groups],
        basra=plan.basra,
        same_rank=codes(plan.same_rank),
        sweep=plan.sweep,
    )


def moves_to_proto(seat: int | None, moves: Sequence[Move]) -> pb.LegalMoves:
    """Return the legal moves of the seat to move (seat None once the match is over)."""
    return pb.LegalMoves(
        seat=seat,
        moves=[
            pb.Move(card=code(m.card), plans=[_plan(p) for p in m.plans], trails=m.trails)
            for m in moves
        ],
    )


def _seat_score(score: SeatScore) -> pb.SeatScore:
    return pb.SeatScore(
        cards=score.cards,
        majority=score.majority,
        jacks=score.jacks,
        aces=score.aces,
        two_of_clubs=score.two_of_clubs,
        ten_of_diamonds=score.ten_of_diamonds,
        basras=score.basras,
        basra_points=score.basra_points,
        hand_total=score.hand_total,
        running_total=score.running_total,
    )


def event_to_proto(event: Event | HiddenDeal) -> pb.Event:
    """Return the message of one engine event (or of a hidden deal from seat_events)."""
    match event:
        case CardPlayed(seat, card):
            return pb.Event(card_played=pb.CardPlayed(seat=seat, card=code(card)))
        case Captured(seat, card, plan_id, cards, same_rank, groups):
            return pb.Event(
                captured=pb.Captured(
                    seat=seat,
                    card=code(card),
                    plan_id=plan_id,
                    cards=codes(cards),
                    same_rank=codes(same_rank),
                    groups=[pb.CardList(cards=codes(g)) for g in groups],
                )
            )
        case Trailed(seat, card):
            return pb.Event(trailed=pb.Trailed(seat=seat, card=code(card)))
        case CardsDealt(seat, cards):
            return pb.Event(cards_dealt=pb.CardsDealt(seat=seat, cards=codes(cards)))
        case HiddenDeal(seat, count):
            return pb.Event(hidden_deal=pb.HiddenDeal(seat=seat, count=count))
        case Swept(seat, card, cards):
            return pb.Event(swept=pb.Swept(seat=seat, card=code(card), cards=codes(cards)))
        case BasraScored(seat, card):
            return pb.Event(basra_scored=pb.BasraScored(seat=seat, card=code(card)))
        case HandStarted(hand_number, dealer):
            return pb.Event(hand_started=pb.HandStarted(hand_number=hand_number, dealer=dealer))
        case FloorFixed(returned, replacements):
            return pb.Event(
                floor_fixed=pb.FloorFixed(
                    returned=codes(returned), replacements=codes(replacements)
                )
            )
        case LeftoversAwarded(seat, cards):
            return pb.Event(leftovers_awarded=pb.LeftoversAwarded(seat=seat, cards=codes(cards)))
        case HandScored(hand_number, seats, carry_before, carry_after):
            return pb.Event(
                hand_scored=pb.HandScored(
                    hand_number=hand_number,
                    seats=[_seat_score(s) for s in seats],
                    carry_before=carry_before,
                    carry_after=carry_after,
                )
            )
        case MatchOver(winner, totals):
            return pb.Event(match_over=pb.MatchOver(winner=winner, totals=list(totals)))
    raise TypeError(f"unknown event type {type(event).__name__}")


def _seat_score_from_proto(message: pb.SeatScore) -> SeatScore:
    return SeatScore(
        cards=message.cards,
        majority=message.majority,
        jacks=message.jacks,
        aces=message.aces,
        two_of_clubs=message.two_of_clubs,
        ten_of_diamonds=message.ten_of_diamonds,
        basras=message.basras,
        basra_points=message.basra_points,
        hand_total=message.hand_total,
        running_total=message.running_total,
    )


def _pair(values: Sequence[object], name: str) -> None:
    if len(values) != 2:
        raise ValueError(f"{name} must hold exactly two entries, not {len(values)}")


def event_from_proto(message: pb.Event) -> Event | HiddenDeal:
    """Return the engine event a message describes: the inverse of event_to_proto."""
    # Events are never received by the service; this reads the ones it sent (clients, tests).
    kind = message.WhichOneof("kind")
    if kind == "card_played":
        played = message.card_played
        return CardPlayed(played.seat, parse_card(played.card))
    if kind == "captured":
        taken = message.captured
        return Captured(
            taken.seat,
            parse_card(taken.card),
            taken.plan_id,
            parse_cards(taken.cards),
            parse_cards(taken.same_rank),
            tuple(parse_cards(g.cards) for g in taken.groups),
        )
    if kind == "trailed":
        return Trailed(message.trailed.seat, parse_card(message.trailed.card))
    if kind == "cards_dealt":
        dealt = message.cards_dealt
        seat = dealt.seat if dealt.HasField("seat") else None
        return CardsDealt(seat, parse_cards(dealt.cards))
    if kind == "hidden_deal":
        return HiddenDeal(message.hidden_deal.seat, message.hidden_deal.count)
    if kind == "swept":
        swept = message.swept
        return Swept(swept.seat, parse_card(swept.card), parse_cards(swept.cards))
    if kind == "basra_scored":
        return BasraScored(message.basra_scored.seat, parse_card(message.basra_scored.card))
    if kind == "hand_started":
        return HandStarted(message.hand_started.hand_number, message.hand_started.dealer)
    if kind == "floor_fixed":
        fixed = message.floor_fixed
        return FloorFixed(parse_cards(fixed.returned), parse_cards(fixed.replacements))
    if kind == "leftovers_awarded":
        left = message.leftovers_awarded
        seat = left.seat if left.HasField("seat") else None
        return LeftoversAwarded(seat, parse_cards(left.cards))
    if kind == "hand_scored":
        scored = message.hand_scored
        _pair(scored.seats, "hand_scored.seats")
        seats = (_seat_score_from_proto(scored.seats[0]), _seat_score_from_proto(scored.seats[1]))
        return HandScored(scored.hand_number, seats, scored.carry_before, scored.carry_after)
    if kind == "match_over":
        over = message.match_over
        _pair(over.totals, "match_over.totals")
        return MatchOver(over.winner, (over.totals[0], over.totals[1]))
    raise ValueError("the event sets none of its kinds")


def events_to_proto(events: Iterable[Event | HiddenDeal]) -> list[pb.Event]:
    """Return the messages of several events, in order."""
    return [event_to_proto(e) for e in events]


def seat_events_to_proto(
    events: tuple[Event, ...], messages: Sequence[pb.Event]
) -> list[pb.SeatEvents]:
    """Return both seats' events, reusing `messages` (of `events`) for what a seat may see."""
    # engine.seat_events passes visible events through as the same objects, so their messages
    # are reused; anything else (hidden deals) is converted.
    by_identity = {id(e): m for e, m in zip(events, messages, strict=True)}
    return [
        pb.SeatEvents(
            seat=seat,
            events=[by_identity.get(id(e)) or event_to_proto(e) for e in seat_events(events, seat)],
        )
        for seat in (0, 1)
    ]


def view_to_proto(view: SeatView) -> pb.PlayerView:
    """Return the message of one seat's view; legal moves only when that seat is to move."""
    hand_sizes = (
        (len(view.hand), view.opponent_hand_size)
        if view.seat == 0
        else (view.opponent_hand_size, len(view.hand))
    )
    seats = [
        pb.PublicSeat(
            label=view.labels[s],
            hand_size=hand_sizes[s],
            captured_count=view.captured_counts[s],
            basras=view.basras[s],
            total=view.totals[s],
        )
        for s in (0, 1)
    ]
    message = pb.PlayerView(
        seat=view.seat,
        seq=view.seq,
        hand_number=view.hand_number,
        round_number=view.round_number,
        dealer=view.dealer,
        to_move=view.to_move,
        hand=codes(view.hand),
        floor=codes(view.floor),
        deck_size=view.deck_size,
        seats=seats,
        carry=view.carry,
        status=_STATUS_TO_PROTO[view.status],
        winner=view.winner,
        seed_commitment=view.seed_commitment,
        seed=view.seed,
    )
    if view.to_move == view.seat:
        message.legal_moves.CopyFrom(moves_to_proto(view.seat, view.legal_moves))
    return message
