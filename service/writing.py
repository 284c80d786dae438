"""Writing answers: engine values straight to the wire bytes of basra.v1's messages.

Answers are the service's hot path, so it never builds a protobuf message to send one: each
answer is written with service.wire, field by field in number order, exactly as protobuf's
own encoder writes it (the golden wire corpus, tests/golden, holds the bytes to it). Field
numbers come from service.fields, by name. A zone of cards is the concatenation of its cards'
pre-encoded fields; an event is encoded once and serves the response and both seats' lists.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

from basra.v1 import rules_pb2 as pb

from engine import (
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
    PublicView,
    SeatScore,
    SeatView,
    State,
    Swept,
    Trailed,
    code,
    public_events,
    seat_events,
)
from engine.bot import Suggestion
from engine.cards import Card
from engine.facts import CODES, DECK_SIZE, SEATS
from service import fields, wire
from service.enums import PROTO_BOT_LEVEL, PROTO_STATUS
from service.fields import (
    APPLY_RESPONSE_EVENTS,
    APPLY_RESPONSE_LEGAL_MOVES,
    APPLY_RESPONSE_PUBLIC_EVENTS,
    APPLY_RESPONSE_SEAT_EVENTS,
    APPLY_RESPONSE_SEED_COMMITMENT,
    APPLY_RESPONSE_SIGNED_STATE,
    APPLY_RESPONSE_STATE,
    BASRA_SCORED_CARD,
    BASRA_SCORED_SEAT,
    CAPTURED_CARD,
    CAPTURED_CARDS,
    CAPTURED_GROUPS,
    CAPTURED_PLAN_ID,
    CAPTURED_SAME_RANK,
    CAPTURED_SEAT,
    CARD_LIST_CARDS,
    CARD_PLAYED_CARD,
    CARD_PLAYED_SEAT,
    CARDS_DEALT_CARDS,
    CARDS_DEALT_SEAT,
    EVENT_BASRA_SCORED,
    EVENT_CAPTURED,
    EVENT_CARD_PLAYED,
    EVENT_CARDS_DEALT,
    EVENT_FLOOR_FIXED,
    EVENT_HAND_SCORED,
    EVENT_HAND_STARTED,
    EVENT_HIDDEN_DEAL,
    EVENT_LEFTOVERS_AWARDED,
    EVENT_MATCH_OVER,
    EVENT_SWEPT,
    EVENT_TRAILED,
    FLOOR_FIXED_REPLACEMENTS,
    FLOOR_FIXED_RETURNED,
    HAND_SCORED_CARRY_AFTER,
    HAND_SCORED_CARRY_BEFORE,
    HAND_SCORED_HAND_NUMBER,
    HAND_SCORED_SEATS,
    HAND_STARTED_DEALER,
    HAND_STARTED_HAND_NUMBER,
    HIDDEN_DEAL_COUNT,
    HIDDEN_DEAL_SEAT,
    LEFTOVERS_AWARDED_CARDS,
    LEFTOVERS_AWARDED_SEAT,
    LEGAL_MOVES_MOVES,
    LEGAL_MOVES_RESPONSE_LEGAL_MOVES,
    LEGAL_MOVES_SEAT,
    MATCH_OVER_TOTALS,
    MATCH_OVER_WINNER,
    MOVE_CARD,
    MOVE_PLANS,
    MOVE_TRAILS,
    PLAN_BASRA,
    PLAN_CARDS,
    PLAN_GROUPS,
    PLAN_ID,
    PLAN_SAME_RANK,
    PLAN_SWEEP,
    PLAYER_VIEW_CARRY,
    PLAYER_VIEW_DEALER,
    PLAYER_VIEW_DECK_SIZE,
    PLAYER_VIEW_FLOOR,
    PLAYER_VIEW_HAND,
    PLAYER_VIEW_HAND_NUMBER,
    PLAYER_VIEW_LEGAL_MOVES,
    PLAYER_VIEW_RESPONSE_PUBLIC_VIEW,
    PLAYER_VIEW_RESPONSE_VIEW,
    PLAYER_VIEW_ROUND_NUMBER,
    PLAYER_VIEW_SEAT,
    PLAYER_VIEW_SEATS,
    PLAYER_VIEW_SEED,
    PLAYER_VIEW_SEED_COMMITMENT,
    PLAYER_VIEW_SEQ,
    PLAYER_VIEW_STATUS,
    PLAYER_VIEW_TO_MOVE,
    PLAYER_VIEW_WINNER,
    PUBLIC_SEAT_BASRAS,
    PUBLIC_SEAT_CAPTURED_COUNT,
    PUBLIC_SEAT_HAND_SIZE,
    PUBLIC_SEAT_LABEL,
    PUBLIC_SEAT_TOTAL,
    PUBLIC_VIEW_CARRY,
    PUBLIC_VIEW_DEALER,
    PUBLIC_VIEW_DECK_SIZE,
    PUBLIC_VIEW_FLOOR,
    PUBLIC_VIEW_HAND_NUMBER,
    PUBLIC_VIEW_ROUND_NUMBER,
    PUBLIC_VIEW_SEATS,
    PUBLIC_VIEW_SEED,
    PUBLIC_VIEW_SEED_COMMITMENT,
    PUBLIC_VIEW_SEQ,
    PUBLIC_VIEW_STATUS,
    PUBLIC_VIEW_TO_MOVE,
    PUBLIC_VIEW_WINNER,
    REPLAY_RESPONSE_EVENTS,
    REPLAY_RESPONSE_LEGAL_MOVES,
    REPLAY_RESPONSE_REFUSAL,
    REPLAY_RESPONSE_REFUSED_INDEX,
    REPLAY_RESPONSE_SIGNED_STATE,
    REPLAY_RESPONSE_STATE,
    SEAT_EVENTS_EVENTS,
    SEAT_EVENTS_SEAT,
    SEAT_SCORE_ACES,
    SEAT_SCORE_BASRA_POINTS,
    SEAT_SCORE_BASRAS,
    SEAT_SCORE_CARDS,
    SEAT_SCORE_HAND_TOTAL,
    SEAT_SCORE_JACKS,
    SEAT_SCORE_MAJORITY,
    SEAT_SCORE_RUNNING_TOTAL,
    SEAT_SCORE_TEN_OF_DIAMONDS,
    SEAT_SCORE_TWO_OF_CLUBS,
    SEAT_STATE_BASRAS,
    SEAT_STATE_CAPTURED,
    SEAT_STATE_HAND,
    SEAT_STATE_LABEL,
    SEAT_STATE_TOTAL,
    SIGNED_STATE_KEY_ID,
    SIGNED_STATE_SIGNATURE,
    SIGNED_STATE_STATE,
    STATE_CARRY,
    STATE_DEALER,
    STATE_DECK,
    STATE_FLOOR,
    STATE_HAND_NUMBER,
    STATE_LAST_CAPTURER,
    STATE_SEATS,
    STATE_SEED,
    STATE_SEQ,
    STATE_STATUS,
    STATE_TO_MOVE,
    STATE_UNCLAIMED,
    STATE_WINNER,
    SWEPT_CARD,
    SWEPT_CARDS,
    SWEPT_SEAT,
    TRAILED_CARD,
    TRAILED_SEAT,
)
from service.wire import boolean, integer, message, optional_data, optional_int, text

SeatAndCard = CardPlayed | Trailed | BasraScored

# Per field number, per card: the whole field of one card code (key, length, code), so that a
# zone of cards is written by concatenating its cards' fields.
_CARD_FIELDS: tuple[tuple[bytes, ...], ...] = tuple(
    wire.strings(number, CODES)
    for number in range(1 + max(getattr(fields, name) for name in fields.DECLARED))
)


def _cards(number: int, cards: Iterable[Card]) -> bytes:
    """A repeated string field of card codes."""
    table = _CARD_FIELDS[number]
    return b"".join([table[c] for c in cards])


def _card(number: int, card: Card) -> bytes:
    """A string field holding one card code (never empty)."""
    return _CARD_FIELDS[number][card]


# The card zones of a State, bound once: every answer that carries a state writes them.
_HAND, _PILE = _CARD_FIELDS[SEAT_STATE_HAND], _CARD_FIELDS[SEAT_STATE_CAPTURED]
_FLOOR, _DECK = _CARD_FIELDS[STATE_FLOOR], _CARD_FIELDS[STATE_DECK]
_UNCLAIMED = _CARD_FIELDS[STATE_UNCLAIMED]


def _seat_state(
    hand: tuple[Card, ...], pile: tuple[Card, ...], basras: int, total: int, label: str
) -> bytes:
    """The field of one SeatState of a State."""
    body = (
        b"".join([_HAND[c] for c in hand])
        + b"".join([_PILE[c] for c in pile])
        + integer(SEAT_STATE_BASRAS, basras)
        + integer(SEAT_STATE_TOTAL, total)
        + text(SEAT_STATE_LABEL, label)
    )
    return message(STATE_SEATS, body)


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
            integer(STATE_SEQ, state.seq),
            optional_int(STATE_TO_MOVE, state.to_move),
            integer(STATE_DEALER, state.dealer),
            integer(STATE_HAND_NUMBER, state.hand_number),
            b"".join([_FLOOR[c] for c in state.floor]),
            b"".join([_DECK[c] for c in state.deck]),
            integer(STATE_CARRY, state.carry),
            integer(STATE_STATUS, PROTO_STATUS[state.status]),
            optional_int(STATE_WINNER, state.winner),
            _seat_state(hands[0], piles[0], basras[0], totals[0], labels[0]),
            _seat_state(hands[1], piles[1], basras[1], totals[1], labels[1]),
            wire.data(STATE_SEED, state.seed),
            optional_int(STATE_LAST_CAPTURER, state.last_capturer),
            b"".join([_UNCLAIMED[c] for c in state.unclaimed]),
        )
    )


def signed_state_bytes(state: bytes, key_id: str, signature: bytes) -> bytes:
    """An encoded basra.v1.SignedState."""
    return (
        wire.data(SIGNED_STATE_STATE, state)
        + text(SIGNED_STATE_KEY_ID, key_id)
        + wire.data(SIGNED_STATE_SIGNATURE, signature)
    )


def _groups(number: int, groups: Iterable[tuple[Card, ...]]) -> bytes:
    """A repeated CardList field."""
    return b"".join(message(number, _cards(CARD_LIST_CARDS, g)) for g in groups)


def _plan(plan: Plan) -> bytes:
    return (
        integer(PLAN_ID, plan.id)
        + _cards(PLAN_CARDS, plan.cards)
        + _groups(PLAN_GROUPS, plan.groups)
        + boolean(PLAN_BASRA, plan.basra)
        + _cards(PLAN_SAME_RANK, plan.same_rank)
        + boolean(PLAN_SWEEP, plan.sweep)
    )


_MOVE_CARD = _CARD_FIELDS[MOVE_CARD]


def _move(move: Move) -> bytes:
    plans = b"".join(message(MOVE_PLANS, _plan(p)) for p in move.plans)
    return _MOVE_CARD[move.card] + plans + boolean(MOVE_TRAILS, move.trails)


# The move field of a card that can only trail (most cards of most hands): card, trails.
_TRAILING_MOVES = tuple(
    message(LEGAL_MOVES_MOVES, _card(MOVE_CARD, c) + boolean(MOVE_TRAILS, True))
    for c in range(DECK_SIZE)
)


def moves_bytes(seat: int | None, moves: Sequence[Move]) -> bytes:
    """The encoded basra.v1.LegalMoves of the seat to move (None once the match is over)."""
    return optional_int(LEGAL_MOVES_SEAT, seat) + b"".join(
        [
            _TRAILING_MOVES[m.card]
            if m.trails and not m.plans
            else message(LEGAL_MOVES_MOVES, _move(m))
            for m in moves
        ]
    )


def legal_moves_response_bytes(seat: int | None, moves: Sequence[Move]) -> bytes:
    """An encoded LegalMovesResponse."""
    return message(LEGAL_MOVES_RESPONSE_LEGAL_MOVES, moves_bytes(seat, moves))


# ---- events ----


def _seat_score(score: SeatScore) -> bytes:
    return b"".join(
        (
            integer(SEAT_SCORE_CARDS, score.cards),
            integer(SEAT_SCORE_MAJORITY, score.majority),
            integer(SEAT_SCORE_JACKS, score.jacks),
            integer(SEAT_SCORE_ACES, score.aces),
            integer(SEAT_SCORE_TWO_OF_CLUBS, score.two_of_clubs),
            integer(SEAT_SCORE_TEN_OF_DIAMONDS, score.ten_of_diamonds),
            integer(SEAT_SCORE_BASRAS, score.basras),
            integer(SEAT_SCORE_BASRA_POINTS, score.basra_points),
            integer(SEAT_SCORE_HAND_TOTAL, score.hand_total),
            integer(SEAT_SCORE_RUNNING_TOTAL, score.running_total),
        )
    )


def _hand_started(event: HandStarted) -> bytes:
    return message(
        EVENT_HAND_STARTED,
        integer(HAND_STARTED_HAND_NUMBER, event.hand_number)
        + integer(HAND_STARTED_DEALER, event.dealer),
    )


def _cards_dealt(event: CardsDealt) -> bytes:
    body = optional_int(CARDS_DEALT_SEAT, event.seat) + _cards(CARDS_DEALT_CARDS, event.cards)
    return message(EVENT_CARDS_DEALT, body)


def _seat_and_card(kind: int, seat: int, card: int) -> Callable[[SeatAndCard], bytes]:
    """The writer of an event that holds just a seat and a card, under their own numbers.

    Every play brings one or two of these, so each one's 104 possible fields are written once.
    """
    written = tuple(
        tuple(message(kind, integer(seat, s) + _card(card, c)) for c in range(DECK_SIZE))
        for s in SEATS
    )

    def write(event: SeatAndCard) -> bytes:
        return written[event.seat][event.card]

    return write


_card_played = _seat_and_card(EVENT_CARD_PLAYED, CARD_PLAYED_SEAT, CARD_PLAYED_CARD)
_trailed = _seat_and_card(EVENT_TRAILED, TRAILED_SEAT, TRAILED_CARD)
_basra_scored = _seat_and_card(EVENT_BASRA_SCORED, BASRA_SCORED_SEAT, BASRA_SCORED_CARD)


def _floor_fixed(event: FloorFixed) -> bytes:
    return message(
        EVENT_FLOOR_FIXED,
        _cards(FLOOR_FIXED_RETURNED, event.returned)
        + _cards(FLOOR_FIXED_REPLACEMENTS, event.replacements),
    )


def _captured(event: Captured) -> bytes:
    return message(
        EVENT_CAPTURED,
        integer(CAPTURED_SEAT, event.seat)
        + _card(CAPTURED_CARD, event.card)
        + integer(CAPTURED_PLAN_ID, event.plan_id)
        + _cards(CAPTURED_CARDS, event.cards)
        + _cards(CAPTURED_SAME_RANK, event.same_rank)
        + _groups(CAPTURED_GROUPS, event.groups),
    )


def _swept(event: Swept) -> bytes:
    return message(
        EVENT_SWEPT,
        integer(SWEPT_SEAT, event.seat)
        + _card(SWEPT_CARD, event.card)
        + _cards(SWEPT_CARDS, event.cards),
    )


def _leftovers_awarded(event: LeftoversAwarded) -> bytes:
    return message(
        EVENT_LEFTOVERS_AWARDED,
        optional_int(LEFTOVERS_AWARDED_SEAT, event.seat)
        + _cards(LEFTOVERS_AWARDED_CARDS, event.cards),
    )


def _hand_scored(event: HandScored) -> bytes:
    return message(
        EVENT_HAND_SCORED,
        integer(HAND_SCORED_HAND_NUMBER, event.hand_number)
        + b"".join(message(HAND_SCORED_SEATS, _seat_score(s)) for s in event.seats)
        + integer(HAND_SCORED_CARRY_BEFORE, event.carry_before)
        + integer(HAND_SCORED_CARRY_AFTER, event.carry_after),
    )


def _match_over(event: MatchOver) -> bytes:
    body = integer(MATCH_OVER_WINNER, event.winner) + wire.packed(MATCH_OVER_TOTALS, event.totals)
    return message(EVENT_MATCH_OVER, body)


def _hidden_deal(event: HiddenDeal) -> bytes:
    body = integer(HIDDEN_DEAL_SEAT, event.seat) + integer(HIDDEN_DEAL_COUNT, event.count)
    return message(EVENT_HIDDEN_DEAL, body)


# The writer of each event type: its field in basra.v1.Event's oneof, with its body.
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


# ---- responses ----


def _seat_events(events: tuple[Event, ...], fields_: Sequence[bytes], seat: int) -> bytes:
    """One seat's basra.v1.SeatEvents; `fields_` are the events' fields as encoded."""
    # engine.seat_events passes visible events through as the same objects, so their bytes
    # are reused; anything else (hidden deals) is encoded.
    seen = seat_events(events, seat)
    body = b"".join(
        [
            field if shown is event else message(SEAT_EVENTS_EVENTS, event_bytes(shown))
            for shown, event, field in zip(seen, events, fields_, strict=True)
        ]
    )
    return integer(SEAT_EVENTS_SEAT, seat) + body


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
    # An event is encoded once; as the same field of the response and of SeatEvents, it is
    # used thrice, and its body once more in the public events.
    bodies = [event_bytes(e) for e in events]
    fields_ = [message(APPLY_RESPONSE_EVENTS, body) for body in bodies]
    return b"".join(
        (
            message(APPLY_RESPONSE_STATE, state),
            *fields_,
            message(APPLY_RESPONSE_LEGAL_MOVES, moves),
            message(APPLY_RESPONSE_SEAT_EVENTS, _seat_events(events, fields_, 0)),
            message(APPLY_RESPONSE_SEAT_EVENTS, _seat_events(events, fields_, 1)),
            wire.data(APPLY_RESPONSE_SEED_COMMITMENT, seed_commitment),
            *_public_events(events, bodies),
            b"" if signed_state is None else message(APPLY_RESPONSE_SIGNED_STATE, signed_state),
        )
    )


def _public_events(events: tuple[Event, ...], bodies: Sequence[bytes]) -> list[bytes]:
    """The response's public_events fields; `bodies` are the events' encodings."""
    shown = public_events(events)
    return [
        message(APPLY_RESPONSE_PUBLIC_EVENTS, body if public is event else event_bytes(public))
        for public, event, body in zip(shown, events, bodies, strict=True)
    ]


def refusal_bytes(reason: str, sentence: str, metadata: Mapping[str, str]) -> bytes:
    """An encoded basra.v1.Refusal (by protobuf: the order of map entries is its encoder's)."""
    return pb.Refusal(reason=reason, message=sentence, metadata=metadata).SerializeToString()


def replay_response_bytes(
    state: bytes,
    events: Iterable[Event],
    moves: bytes,
    *,
    refused_index: int | None,
    refusal: bytes | None,
    signed_state: bytes | None,
) -> bytes:
    """An encoded ReplayResponse from its encoded parts (refusal: an encoded Refusal)."""
    return b"".join(
        (
            message(REPLAY_RESPONSE_STATE, state),
            *[message(REPLAY_RESPONSE_EVENTS, event_bytes(e)) for e in events],
            message(REPLAY_RESPONSE_LEGAL_MOVES, moves),
            optional_int(REPLAY_RESPONSE_REFUSED_INDEX, refused_index),
            b"" if refusal is None else message(REPLAY_RESPONSE_REFUSAL, refusal),
            b"" if signed_state is None else message(REPLAY_RESPONSE_SIGNED_STATE, signed_state),
        )
    )


def _public_seat(view: PublicView, seat: int) -> bytes:
    return b"".join(
        (
            text(PUBLIC_SEAT_LABEL, view.labels[seat]),
            integer(PUBLIC_SEAT_HAND_SIZE, view.hand_sizes[seat]),
            integer(PUBLIC_SEAT_CAPTURED_COUNT, view.captured_counts[seat]),
            integer(PUBLIC_SEAT_BASRAS, view.basras[seat]),
            integer(PUBLIC_SEAT_TOTAL, view.totals[seat]),
        )
    )


_VIEW_HAND, _VIEW_FLOOR = _CARD_FIELDS[PLAYER_VIEW_HAND], _CARD_FIELDS[PLAYER_VIEW_FLOOR]


def view_bytes(view: SeatView) -> bytes:
    """The encoded basra.v1.PlayerView of one seat's view; legal moves only for the seat to move."""
    public = view.public
    moves = b""
    if public.to_move == view.seat:
        moves = message(PLAYER_VIEW_LEGAL_MOVES, moves_bytes(view.seat, view.legal_moves))
    return b"".join(
        (
            integer(PLAYER_VIEW_SEAT, view.seat),
            integer(PLAYER_VIEW_SEQ, public.seq),
            integer(PLAYER_VIEW_HAND_NUMBER, public.hand_number),
            integer(PLAYER_VIEW_ROUND_NUMBER, public.round_number),
            integer(PLAYER_VIEW_DEALER, public.dealer),
            optional_int(PLAYER_VIEW_TO_MOVE, public.to_move),
            b"".join([_VIEW_HAND[c] for c in view.hand]),
            b"".join([_VIEW_FLOOR[c] for c in public.floor]),
            integer(PLAYER_VIEW_DECK_SIZE, public.deck_size),
            message(PLAYER_VIEW_SEATS, _public_seat(public, 0)),
            message(PLAYER_VIEW_SEATS, _public_seat(public, 1)),
            integer(PLAYER_VIEW_CARRY, public.carry),
            integer(PLAYER_VIEW_STATUS, PROTO_STATUS[public.status]),
            optional_int(PLAYER_VIEW_WINNER, public.winner),
            moves,
            wire.data(PLAYER_VIEW_SEED_COMMITMENT, public.seed_commitment),
            optional_data(PLAYER_VIEW_SEED, public.seed),
        )
    )


def player_view_response_bytes(view: SeatView) -> bytes:
    """An encoded PlayerViewResponse of a seat's view."""
    return message(PLAYER_VIEW_RESPONSE_VIEW, view_bytes(view))


_PUBLIC_FLOOR = _CARD_FIELDS[PUBLIC_VIEW_FLOOR]


def public_view_bytes(view: PublicView) -> bytes:
    """The encoded basra.v1.PublicView: what anybody may see; it has no field for a hand."""
    return b"".join(
        (
            integer(PUBLIC_VIEW_SEQ, view.seq),
            integer(PUBLIC_VIEW_HAND_NUMBER, view.hand_number),
            integer(PUBLIC_VIEW_ROUND_NUMBER, view.round_number),
            integer(PUBLIC_VIEW_DEALER, view.dealer),
            optional_int(PUBLIC_VIEW_TO_MOVE, view.to_move),
            b"".join([_PUBLIC_FLOOR[c] for c in view.floor]),
            integer(PUBLIC_VIEW_DECK_SIZE, view.deck_size),
            message(PUBLIC_VIEW_SEATS, _public_seat(view, 0)),
            message(PUBLIC_VIEW_SEATS, _public_seat(view, 1)),
            integer(PUBLIC_VIEW_CARRY, view.carry),
            integer(PUBLIC_VIEW_STATUS, PROTO_STATUS[view.status]),
            optional_int(PUBLIC_VIEW_WINNER, view.winner),
            wire.data(PUBLIC_VIEW_SEED_COMMITMENT, view.seed_commitment),
            optional_data(PUBLIC_VIEW_SEED, view.seed),
        )
    )


def public_view_response_bytes(view: PublicView) -> bytes:
    """An encoded PlayerViewResponse of the public view."""
    return message(PLAYER_VIEW_RESPONSE_PUBLIC_VIEW, public_view_bytes(view))


def _suggested(seat: int, card: Card, plan_id: int | None) -> pb.Action:
    action = pb.Action(seat=seat, card=code(card))
    if plan_id is not None:
        action.plan_id = plan_id
    return action


def suggestion_bytes(suggestion: Suggestion) -> bytes:
    """The encoded SuggestMoveResponse of a suggestion (by protobuf: a double needs its encoder,
    and one suggestion costs far more than its message)."""
    seat = suggestion.seat
    return pb.SuggestMoveResponse(
        action=_suggested(seat, suggestion.card, suggestion.plan_id),
        candidates=[
            pb.Candidate(action=_suggested(seat, c.card, c.plan_id), value=c.value, deals=c.deals)
            for c in suggestion.candidates
        ],
        reason=suggestion.reason.value,
        level=PROTO_BOT_LEVEL[suggestion.level],
        work=pb.BotWork(deals=suggestion.deals, nodes=suggestion.nodes),
    ).SerializeToString()
