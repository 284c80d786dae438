"""Translation between basra.v1 messages and engine values; strict on everything received.

Received messages are read into engine values (state_from_proto, action_from_proto). Answers
are written straight to their wire bytes (state_bytes, event_bytes, moves_bytes, view_bytes,
match_response_bytes) with service.wire: the service's hot path never builds a protobuf
message to send. The *_to_proto functions give the same values as messages, for clients and
tests; each parses the bytes its *_bytes counterpart writes, so there is one definition.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import NoReturn

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
    parse_card,
    parse_cards,
    seat_events,
)
from engine.bot import Level, Suggestion
from engine.cards import Card
from engine.facts import CODES, DECK_SIZE
from service import wire
from service.wire import boolean, integer, message, optional_data, optional_int, text

_STATUS_FROM_PROTO = {pb.STATUS_IN_PROGRESS: Status.IN_PROGRESS, pb.STATUS_OVER: Status.OVER}
_STATUS_TO_PROTO = {Status.IN_PROGRESS: pb.STATUS_IN_PROGRESS, Status.OVER: pb.STATUS_OVER}
_CARD_BY_CODE: dict[str, Card] = {code(card): card for card in range(DECK_SIZE)}

# ---- reading ----


def _bad_state(problem: str, **details: str | int) -> RuleError:
    return RuleError(Reason.INVALID_STATE, f"The state is inconsistent: {problem}.", **details)


def _refuse_bad_code(zones: Iterable[tuple[str, Sequence[str]]]) -> NoReturn:
    """Refuse the first zone (in this order) that holds something other than a card code."""
    for zone, texts in zones:
        for text_ in texts:
            try:
                parse_card(text_)
            except RuleError as error:
                shown = error.details.get("card", "")
                problem = f"the {zone} holds '{shown}', which is not a card code"
                raise _bad_state(problem, zone=zone) from None
    raise AssertionError("a code missing from the table is refused by parse_card")


def state_from_proto(message_: pb.State) -> State:
    """Return the engine state a message describes; the engine's check_state judges the rest."""
    status = _STATUS_FROM_PROTO.get(message_.status)
    if status is None:
        raise _bad_state(f"the status {message_.status} is not a known status", field="status")
    seats = message_.seats
    if len(seats) != 2:
        raise _bad_state(f"it must hold exactly two seats, not {len(seats)}", field="seats")
    seat0, seat1 = seats
    # A plain lookup per code: states carry 52 codes per call, and this is the hot path.
    card = _CARD_BY_CODE.__getitem__
    try:
        deck = tuple(map(card, message_.deck))
        hands = (tuple(map(card, seat0.hand)), tuple(map(card, seat1.hand)))
        floor = tuple(map(card, message_.floor))
        captured = (tuple(map(card, seat0.captured)), tuple(map(card, seat1.captured)))
        unclaimed = tuple(map(card, message_.unclaimed))
    except KeyError:
        _refuse_bad_code(
            (
                ("deck", message_.deck),
                ("hand of seat 0", seat0.hand),
                ("hand of seat 1", seat1.hand),
                ("floor", message_.floor),
                ("pile of seat 0", seat0.captured),
                ("pile of seat 1", seat1.captured),
                ("unclaimed leftovers", message_.unclaimed),
            )
        )
    has = message_.HasField
    return State(
        seed=message_.seed,
        seq=message_.seq,
        hand_number=message_.hand_number,
        dealer=message_.dealer,
        to_move=message_.to_move if has("to_move") else None,
        deck=deck,
        hands=hands,
        floor=floor,
        captured=captured,
        basras=(seat0.basras, seat1.basras),
        last_capturer=message_.last_capturer if has("last_capturer") else None,
        unclaimed=unclaimed,
        totals=(seat0.total, seat1.total),
        carry=message_.carry,
        status=status,
        winner=message_.winner if has("winner") else None,
        labels=(seat0.label, seat1.label),
    )


def action_from_proto(message_: pb.Action) -> Action:
    """Return the engine action a message describes, refusing a missing seat or a false trail."""
    if not message_.HasField("seat"):
        raise RuleError(Reason.INVALID_SEAT, "The action names no seat; seats are 0 and 1.")
    card = parse_card(message_.card)
    choice = message_.WhichOneof("choice")
    if choice == "plan_id":
        return Action(message_.seat, card, plan_id=message_.plan_id)
    if choice == "capture":
        try:
            capture = tuple(parse_card(t) for t in message_.capture.cards)
        except RuleError as error:
            raise RuleError(
                Reason.INVALID_CARD,
                f"The capture of {code(card)} names '{error.details.get('card', '')}', "
                "which is not a card code.",
                card=code(card),
                capture=error.details.get("card", ""),
            ) from None
        return Action(message_.seat, card, capture=capture)
    if choice == "trail":
        if not message_.trail:
            raise RuleError(
                Reason.INVALID_ACTION,
                "An action that sets trail must set it to true.",
                card=code(card),
            )
        return Action(message_.seat, card, trail=True)
    return Action(message_.seat, card)


def labels_from_proto(labels: Sequence[str]) -> tuple[str, str]:
    """Return the two labels of a request (missing ones are ""); the caller checks the count."""
    padded = [*labels, "", ""]
    return (padded[0], padded[1])


# ---- writing ----

# Per field number, per card: the whole field of one card code (key, length, code), so that a
# zone of cards is written by concatenating its cards' fields.
_CARD_FIELDS: tuple[tuple[bytes, ...], ...] = tuple(wire.strings(n, CODES) for n in range(16))


def _cards(number: int, cards: Iterable[Card]) -> bytes:
    """A repeated string field of card codes."""
    fields = _CARD_FIELDS[number]
    return b"".join([fields[c] for c in cards])


def _card(number: int, card: Card) -> bytes:
    """A string field holding one card code (never empty)."""
    return _CARD_FIELDS[number][card]


# The card fields of the zones of a State (field numbers of State and SeatState).
_HAND, _PILE = _CARD_FIELDS[1], _CARD_FIELDS[2]
_FLOOR, _DECK, _UNCLAIMED = _CARD_FIELDS[5], _CARD_FIELDS[6], _CARD_FIELDS[13]


def _seat_state(
    hand: tuple[Card, ...], pile: tuple[Card, ...], basras: int, total: int, label: str
) -> bytes:
    """The field of one SeatState of a State."""
    body = (
        b"".join([_HAND[c] for c in hand])
        + b"".join([_PILE[c] for c in pile])
        + integer(3, basras)
        + integer(4, total)
        + text(5, label)
    )
    return message(10, body)


def state_bytes(state: State) -> bytes:
    """The encoded basra.v1.State of an engine state."""
    # Written inline, zone by zone: this runs on every answer that carries a state.
    hands, piles, basras, totals, labels = (
        state.hands,
        state.captured,
        state.basras,
        state.totals,
        state.labels,
    )
    return b"".join(
        (
            integer(1, state.seq),
            optional_int(2, state.to_move),
            integer(3, state.dealer),
            integer(4, state.hand_number),
            b"".join([_FLOOR[c] for c in state.floor]),
            b"".join([_DECK[c] for c in state.deck]),
            integer(7, state.carry),
            integer(8, _STATUS_TO_PROTO[state.status]),
            optional_int(9, state.winner),
            _seat_state(hands[0], piles[0], basras[0], totals[0], labels[0]),
            _seat_state(hands[1], piles[1], basras[1], totals[1], labels[1]),
            wire.data(11, state.seed),
            optional_int(12, state.last_capturer),
            b"".join([_UNCLAIMED[c] for c in state.unclaimed]),
        )
    )


def _groups(number: int, groups: Iterable[tuple[Card, ...]]) -> bytes:
    """A repeated CardList field."""
    return b"".join(message(number, _cards(1, g)) for g in groups)


def _plan(plan: Plan) -> bytes:
    return (
        integer(1, plan.id)
        + _cards(2, plan.cards)
        + _groups(3, plan.groups)
        + boolean(4, plan.basra)
        + _cards(5, plan.same_rank)
        + boolean(6, plan.sweep)
    )


def _move(move: Move) -> bytes:
    plans = b"".join(message(2, _plan(p)) for p in move.plans)
    return _card(1, move.card) + plans + boolean(3, move.trails)


# The move field of a card that can only trail (most cards of most hands): card, trails.
_TRAILING_MOVES = tuple(message(2, _card(1, c) + boolean(3, True)) for c in range(DECK_SIZE))


def moves_bytes(seat: int | None, moves: Sequence[Move]) -> bytes:
    """The encoded basra.v1.LegalMoves of the seat to move (None once the match is over)."""
    return optional_int(1, seat) + b"".join(
        [
            _TRAILING_MOVES[m.card] if m.trails and not m.plans else message(2, _move(m))
            for m in moves
        ]
    )


def _seat_score(score: SeatScore) -> bytes:
    return b"".join(
        (
            integer(1, score.cards),
            integer(2, score.majority),
            integer(3, score.jacks),
            integer(4, score.aces),
            integer(5, score.two_of_clubs),
            integer(6, score.ten_of_diamonds),
            integer(7, score.basras),
            integer(8, score.basra_points),
            integer(9, score.hand_total),
            integer(10, score.running_total),
        )
    )


def _hand_started(event: HandStarted) -> bytes:
    return message(1, integer(1, event.hand_number) + integer(2, event.dealer))


def _cards_dealt(event: CardsDealt) -> bytes:
    return message(2, optional_int(1, event.seat) + _cards(2, event.cards))


def _floor_fixed(event: FloorFixed) -> bytes:
    return message(3, _cards(1, event.returned) + _cards(2, event.replacements))


def _card_played(event: CardPlayed) -> bytes:
    return message(4, integer(1, event.seat) + _card(2, event.card))


def _captured(event: Captured) -> bytes:
    return message(
        5,
        integer(1, event.seat)
        + _card(2, event.card)
        + integer(3, event.plan_id)
        + _cards(4, event.cards)
        + _cards(5, event.same_rank)
        + _groups(6, event.groups),
    )


def _trailed(event: Trailed) -> bytes:
    return message(6, integer(1, event.seat) + _card(2, event.card))


def _swept(event: Swept) -> bytes:
    return message(7, integer(1, event.seat) + _card(2, event.card) + _cards(3, event.cards))


def _basra_scored(event: BasraScored) -> bytes:
    return message(8, integer(1, event.seat) + _card(2, event.card))


def _leftovers_awarded(event: LeftoversAwarded) -> bytes:
    return message(9, optional_int(1, event.seat) + _cards(2, event.cards))


def _hand_scored(event: HandScored) -> bytes:
    return message(
        10,
        integer(1, event.hand_number)
        + b"".join(message(2, _seat_score(s)) for s in event.seats)
        + integer(3, event.carry_before)
        + integer(4, event.carry_after),
    )


def _match_over(event: MatchOver) -> bytes:
    return message(11, integer(1, event.winner) + wire.packed(2, event.totals))


def _hidden_deal(event: HiddenDeal) -> bytes:
    return message(12, integer(1, event.seat) + integer(2, event.count))


# The field of each event type in basra.v1.Event's oneof, with its body.
_EVENT_WRITERS: dict[type, Callable[[object], bytes]] = {
    HandStarted: _hand_started,  # type: ignore[dict-item]
    CardsDealt: _cards_dealt,  # type: ignore[dict-item]
    FloorFixed: _floor_fixed,  # type: ignore[dict-item]
    CardPlayed: _card_played,  # type: ignore[dict-item]
    Captured: _captured,  # type: ignore[dict-item]
    Trailed: _trailed,  # type: ignore[dict-item]
    Swept: _swept,  # type: ignore[dict-item]
    BasraScored: _basra_scored,  # type: ignore[dict-item]
    LeftoversAwarded: _leftovers_awarded,  # type: ignore[dict-item]
    HandScored: _hand_scored,  # type: ignore[dict-item]
    MatchOver: _match_over,  # type: ignore[dict-item]
    HiddenDeal: _hidden_deal,  # type: ignore[dict-item]
}


def event_bytes(event: Event | HiddenDeal) -> bytes:
    """The encoded basra.v1.Event of one engine event (or of a hidden deal from seat_events)."""
    writer = _EVENT_WRITERS.get(type(event))
    if writer is None:
        raise TypeError(f"unknown event type {type(event).__name__}")
    return writer(event)


def _seat_events(events: tuple[Event, ...], fields: Sequence[bytes], seat: int) -> bytes:
    """One seat's basra.v1.SeatEvents; `fields` are the events' fields (number 2) as encoded."""
    # engine.seat_events passes visible events through as the same objects, so their bytes
    # are reused; anything else (hidden deals) is encoded.
    seen = seat_events(events, seat)
    body = b"".join(
        [
            field if shown is event else message(2, event_bytes(shown))
            for shown, event, field in zip(seen, events, fields, strict=True)
        ]
    )
    return integer(1, seat) + body


def match_response_bytes(
    state: bytes,
    events: tuple[Event, ...],
    moves: bytes,
    seed_commitment: bytes,
    signed_state: bytes | None,
) -> bytes:
    """An encoded NewMatchResponse or ApplyResponse (same fields) from its encoded parts.

    `state`, `moves` and `signed_state` are the encodings of a State, a LegalMoves and a
    SignedState (None: no signed state).
    """
    # Each event is field 2 both of the response and of SeatEvents: encoded once, used thrice.
    fields = [message(2, event_bytes(e)) for e in events]
    return b"".join(
        (
            message(1, state),
            *fields,
            message(3, moves),
            message(4, _seat_events(events, fields, 0)),
            message(4, _seat_events(events, fields, 1)),
            wire.data(5, seed_commitment),
            b"" if signed_state is None else message(14, signed_state),
        )
    )


def signed_state_bytes(state: bytes, key_id: str, signature: bytes) -> bytes:
    """An encoded basra.v1.SignedState."""
    return wire.data(1, state) + text(2, key_id) + wire.data(3, signature)


def _public_seat(view: SeatView, seat: int, hand_size: int) -> bytes:
    return b"".join(
        (
            text(1, view.labels[seat]),
            integer(2, hand_size),
            integer(3, view.captured_counts[seat]),
            integer(4, view.basras[seat]),
            integer(5, view.totals[seat]),
        )
    )


def view_bytes(view: SeatView) -> bytes:
    """The encoded basra.v1.PlayerView of one seat's view; legal moves only for the seat to move."""
    hand_sizes = (
        (len(view.hand), view.opponent_hand_size)
        if view.seat == 0
        else (view.opponent_hand_size, len(view.hand))
    )
    moves = b""
    if view.to_move == view.seat:
        moves = message(14, moves_bytes(view.seat, view.legal_moves))
    return b"".join(
        (
            integer(1, view.seat),
            integer(2, view.seq),
            integer(3, view.hand_number),
            integer(4, view.round_number),
            integer(5, view.dealer),
            optional_int(6, view.to_move),
            _cards(7, view.hand),
            _cards(8, view.floor),
            integer(9, view.deck_size),
            message(10, _public_seat(view, 0, hand_sizes[0])),
            message(10, _public_seat(view, 1, hand_sizes[1])),
            integer(11, view.carry),
            integer(12, _STATUS_TO_PROTO[view.status]),
            optional_int(13, view.winner),
            moves,
            wire.data(15, view.seed_commitment),
            optional_data(16, view.seed),
        )
    )


# ---- the same values as messages (clients, tests, tools) ----


def state_to_proto(state: State) -> pb.State:
    """Return the message of an engine state."""
    return pb.State.FromString(state_bytes(state))


def moves_to_proto(seat: int | None, moves: Sequence[Move]) -> pb.LegalMoves:
    """Return the legal moves of the seat to move (seat None once the match is over)."""
    return pb.LegalMoves.FromString(moves_bytes(seat, moves))


def event_to_proto(event: Event | HiddenDeal) -> pb.Event:
    """Return the message of one engine event (or of a hidden deal from seat_events)."""
    return pb.Event.FromString(event_bytes(event))


def events_to_proto(events: Iterable[Event | HiddenDeal]) -> list[pb.Event]:
    """Return the messages of several events, in order."""
    return [event_to_proto(e) for e in events]


def view_to_proto(view: SeatView) -> pb.PlayerView:
    """Return the message of one seat's view; legal moves only when that seat is to move."""
    return pb.PlayerView.FromString(view_bytes(view))


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


_LEVEL_TO_PROTO: dict[Level, pb.BotLevel] = {
    Level.RANDOM: pb.BOT_LEVEL_RANDOM,
    Level.GREEDY: pb.BOT_LEVEL_GREEDY,
    Level.STRONG: pb.BOT_LEVEL_STRONG,
}
LEVELS: dict[int, Level] = {int(value): level for level, value in _LEVEL_TO_PROTO.items()}
"""Engine level of each BotLevel (BOT_LEVEL_UNSPECIFIED is the server's default, not here)."""


def _suggested(seat: int, card: Card, plan_id: int | None) -> pb.Action:
    action = pb.Action(seat=seat, card=code(card))
    if plan_id is not None:
        action.plan_id = plan_id
    return action


def suggestion_to_proto(suggestion: Suggestion) -> pb.SuggestMoveResponse:
    """Return the SuggestMove response of a suggestion."""
    seat = suggestion.seat
    return pb.SuggestMoveResponse(
        action=_suggested(seat, suggestion.card, suggestion.plan_id),
        candidates=[
            pb.Candidate(action=_suggested(seat, c.card, c.plan_id), value=c.value, deals=c.deals)
            for c in suggestion.candidates
        ],
        reason=suggestion.reason.value,
        level=_LEVEL_TO_PROTO[suggestion.level],
        work=pb.BotWork(deals=suggestion.deals, nodes=suggestion.nodes),
    )
