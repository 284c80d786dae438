"""Today's hot path before the cost work, kept as the benchmarks' reference only (never shipped).

benchmarks/hot_path.py measures the service's Apply, LegalMoves and PlayerView handlers and the
per-call bookkeeping against this copy in the same run, so "N times cheaper than before" is a
ratio of one run, not a comparison with an old figure. It holds the conversion of
service/convert.py as it was (protobuf messages built field by field), the handlers' bodies
that used it, the interceptor's per-call bookkeeping (prometheus-client children looked up per
call, one multiprocess update per value) and the log configuration (structlog's JSONRenderer
with the standard json module, an ISO TimeStamper, a text WriteLogger).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from time import perf_counter
from typing import Any, TextIO

import structlog
from basra.v1 import rules_pb2 as pb

import engine
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
    seat_events,
)
from engine.cards import Card
from engine.facts import DECK_SIZE
from engine.rng import commitment
from service.metrics import Metrics

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


# ---- the handlers' bodies as they were (unsigned: the default) ----


def moves(state: State, observe: Callable[[float], None]) -> tuple[Move, ...]:
    """Legal moves of the seat to move, timing the plan generation of each card."""

    def timed(card: int, floor: int, limit: int) -> tuple[Plan, ...]:
        started = perf_counter()
        plans = engine.plans_for(card, floor, limit)
        observe(perf_counter() - started)
        return plans

    return engine.legal_moves(state, engine.DEFAULT_WORK_LIMIT, timed)


def checked_state(message: pb.State) -> State:
    """The request's state once the engine accepts it."""
    state = state_from_proto(message)
    engine.check_state(state)
    return state


def apply(data: bytes, observe: Callable[[float], None]) -> bytes:
    """Apply, request bytes to response bytes, as the handler and grpc's serializer did."""
    request = pb.ApplyRequest.FromString(data)
    state = checked_state(request.state)
    action = action_from_proto(request.action)
    after, events = engine.apply(state, action, check=False)
    messages = events_to_proto(events)
    message = state_to_proto(after)
    response = pb.ApplyResponse(
        state=message,
        events=messages,
        legal_moves=moves_to_proto(after.to_move, moves(after, observe)),
        seat_events=seat_events_to_proto(events, messages),
        seed_commitment=commitment(after.seed),
        signed_state=None,
    )
    response.ByteSize()  # the response size check
    return response.SerializeToString()


def legal_moves(data: bytes, observe: Callable[[float], None]) -> bytes:
    """LegalMoves, request bytes to response bytes."""
    request = pb.LegalMovesRequest.FromString(data)
    state = checked_state(request.state)
    found = moves(state, observe)
    response = pb.LegalMovesResponse(legal_moves=moves_to_proto(state.to_move, found))
    response.ByteSize()
    return response.SerializeToString()


def player_view(data: bytes, observe: Callable[[float], None]) -> bytes:
    """PlayerView, request bytes to response bytes."""
    request = pb.PlayerViewRequest.FromString(data)
    state = checked_state(request.state)
    seat = request.seat
    if seat == state.to_move:
        moves(state, observe)
    view = engine.seat_view(state, seat, engine.DEFAULT_WORK_LIMIT)
    response = pb.PlayerViewResponse(view=view_to_proto(view))
    response.ByteSize()
    return response.SerializeToString()


# ---- the per-call bookkeeping as it was ----


def make_logger(stream: TextIO) -> Any:
    """The JSON logger at info as service/logs.py built it."""
    return structlog.wrap_logger(
        structlog.WriteLogger(stream),
        wrapper_class=structlog.make_filtering_bound_logger(logging.INFO),
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.JSONRenderer(),
        ],
        cache_logger_on_first_use=True,
    )


LABELS = ("UNARY", "basra.v1.RulesService", "Apply")


def started(metrics: Metrics) -> float:
    """The interceptor's start of a call."""
    metrics.started.labels(*LABELS).inc()
    return perf_counter()


def finished_metrics(metrics: Metrics, start: float) -> float:
    """The interceptor's metric updates at the end of a call; returns the duration."""
    duration = perf_counter() - start
    metrics.handled.labels(*LABELS, "OK").inc()
    metrics.handling_seconds.labels(*LABELS).observe(duration)
    return duration


def log_line(logger: Any, duration: float, seq: int, seat: int) -> None:
    """The interceptor's log line of a call."""
    logger.info(
        "rpc",
        method="basra.v1.RulesService/Apply",
        code="OK",
        reason=None,
        duration_ms=round(duration * 1000, 3),
        request_id=None,
        seq=seq,
        seat=seat,
    )


def rebuild(handler: Any, method: str) -> Any:
    """What the interceptor did on every call: look the method up and wrap its behaviour anew."""
    import grpc

    from service.interceptors import call_kind

    kind = call_kind(method, handler)
    inner = handler.unary_unary

    def single(request: Any, context: Any, labels: Any = kind) -> Any:
        return inner(request, context)  # (the old one also observed the call under `labels`)

    return grpc.unary_unary_rpc_method_handler(
        single, handler.request_deserializer, handler.response_serializer
    )
