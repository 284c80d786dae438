"""Writing answers: engine values as basra.v1's generated messages, serialized by protobuf.

Each message is one constructor call of its generated class, given plain values: a dict for a
sub-message, a list for a repeated field. Each function here fills one message from its
engine value, naming its fields once.

Apply's answer repeats its parts: an event stands in the response's events, in both seats'
lists and in the public ones, and the same few events and moves recur from call to call (a
card played, a card that only trails). What upb charges for is handing it Python values, per
sub-message, far more than its encoding or parsing in C. So an event's or a move's encoding
as one entry of its list is made once, kept, and joined with the others: protobuf parses
concatenated encodings of a message as their merge (repeated entries appended in order), and
one parse of the joined parts then one serialization give the answer's canonical bytes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import lru_cache
from typing import Any

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
    public_events,
    seat_events,
)
from engine.bot import Suggestion
from engine.cards import Card
from engine.facts import CODES, DECK_SIZE, SEATS
from service.enums import PROTO_BOT_LEVEL, PROTO_STATUS

Fields = dict[str, Any]
"""The values of one message, by field name: what its generated class's constructor takes."""


def _codes(cards: Iterable[Card]) -> list[str]:
    return [CODES[c] for c in cards]


def state_fields(state: State) -> Fields:
    """The values of the basra.v1.State of an engine state."""
    hands, piles, basras, totals, labels = (
        state.hands,
        state.captured,
        state.basras,
        state.totals,
        state.labels,
    )
    return {
        "seq": state.seq,
        "to_move": state.to_move,
        "dealer": state.dealer,
        "hand_number": state.hand_number,
        "floor": [CODES[c] for c in state.floor],
        "deck": [CODES[c] for c in state.deck],
        "carry": state.carry,
        "status": PROTO_STATUS[state.status],
        "winner": state.winner,
        "seats": [
            {
                "hand": [CODES[c] for c in hands[seat]],
                "captured": [CODES[c] for c in piles[seat]],
                "basras": basras[seat],
                "total": totals[seat],
                "label": labels[seat],
            }
            for seat in SEATS
        ],
        "seed": state.seed,
        "last_capturer": state.last_capturer,
        "unclaimed": [CODES[c] for c in state.unclaimed],
    }


def state_bytes(state: Fields) -> bytes:
    """The encoded basra.v1.State of a state's values (what a seal covers)."""
    return pb.State(**state).SerializeToString()


def signed_state_fields(state: bytes, key_id: str, signature: bytes) -> Fields:
    """The values of a basra.v1.SignedState."""
    return {"state": state, "key_id": key_id, "signature": signature}


def _groups(groups: Iterable[tuple[Card, ...]]) -> list[Fields]:
    return [{"cards": _codes(g)} for g in groups]


def _plan(plan: Plan) -> Fields:
    return {
        "id": plan.id,
        "cards": _codes(plan.cards),
        "groups": _groups(plan.groups),
        "basra": plan.basra,
        "same_rank": _codes(plan.same_rank),
        "sweep": plan.sweep,
    }


# The move of a card that can only trail (most cards of most hands), per card.
_TRAILING_MOVES: tuple[Fields, ...] = tuple(
    {"card": CODES[c], "trails": True} for c in range(DECK_SIZE)
)


def moves_fields(seat: int | None, moves: Sequence[Move]) -> Fields:
    """The values of the basra.v1.LegalMoves of the seat to move (None once the match is over)."""
    return {
        "seat": seat,
        "moves": [
            _TRAILING_MOVES[m.card]
            if m.trails and not m.plans
            else {"card": CODES[m.card], "plans": [_plan(p) for p in m.plans], "trails": m.trails}
            for m in moves
        ],
    }


# Enough entries for the events and moves of many matches at once; a miss only costs its making.
_KEPT = 4096


@lru_cache(maxsize=_KEPT)
def _move_entry(move: Move) -> bytes:
    """A move's encoding as one entry of a LegalMoves' moves."""
    return pb.LegalMoves(**moves_fields(None, (move,))).SerializeToString()


def moves_bytes(seat: int | None, moves: Sequence[Move]) -> bytes:
    """The encoded basra.v1.LegalMoves of the seat to move, joined from its moves' entries."""
    return b"".join([pb.LegalMoves(seat=seat).SerializeToString(), *map(_move_entry, moves)])


def legal_moves_response_bytes(seat: int | None, moves: Sequence[Move]) -> bytes:
    """An encoded LegalMovesResponse."""
    return pb.LegalMovesResponse(legal_moves=moves_fields(seat, moves)).SerializeToString()


# ---- events ----


# engine.SeatScore holds basra.v1.SeatScore's fields under the same names, all numbers.
_SEAT_SCORE_FIELDS = tuple(f.name for f in pb.SeatScore.DESCRIPTOR.fields)


def _seat_score(score: SeatScore) -> Fields:
    return {name: getattr(score, name) for name in _SEAT_SCORE_FIELDS}


def _hand_started(event: HandStarted) -> Fields:
    return {"hand_started": {"hand_number": event.hand_number, "dealer": event.dealer}}


def _cards_dealt(event: CardsDealt) -> Fields:
    return {"cards_dealt": {"seat": event.seat, "cards": _codes(event.cards)}}


SeatAndCard = CardPlayed | Trailed | BasraScored


def _seat_and_card(kind: str) -> Callable[[SeatAndCard], Fields]:
    """The values of an event that holds just a seat and a card (every play brings one or two),
    made once for each of the 104 seats and cards."""
    made = tuple(
        tuple({kind: {"seat": s, "card": CODES[c]}} for c in range(DECK_SIZE)) for s in SEATS
    )

    def fields(event: SeatAndCard) -> Fields:
        return made[event.seat][event.card]

    return fields


_card_played = _seat_and_card("card_played")
_trailed = _seat_and_card("trailed")
_basra_scored = _seat_and_card("basra_scored")


def _floor_fixed(event: FloorFixed) -> Fields:
    return {
        "floor_fixed": {
            "returned": _codes(event.returned),
            "replacements": _codes(event.replacements),
        }
    }


def _captured(event: Captured) -> Fields:
    return {
        "captured": {
            "seat": event.seat,
            "card": CODES[event.card],
            "plan_id": event.plan_id,
            "cards": _codes(event.cards),
            "same_rank": _codes(event.same_rank),
            "groups": _groups(event.groups),
        }
    }


def _swept(event: Swept) -> Fields:
    return {"swept": {"seat": event.seat, "card": CODES[event.card], "cards": _codes(event.cards)}}


def _leftovers_awarded(event: LeftoversAwarded) -> Fields:
    return {"leftovers_awarded": {"seat": event.seat, "cards": _codes(event.cards)}}


def _hand_scored(event: HandScored) -> Fields:
    return {
        "hand_scored": {
            "hand_number": event.hand_number,
            "seats": [_seat_score(s) for s in event.seats],
            "carry_before": event.carry_before,
            "carry_after": event.carry_after,
        }
    }


def _match_over(event: MatchOver) -> Fields:
    return {"match_over": {"winner": event.winner, "totals": list(event.totals)}}


def _hidden_deal(event: HiddenDeal) -> Fields:
    return {"hidden_deal": {"seat": event.seat, "count": event.count}}


# The values of each event type: its member of basra.v1.Event's oneof, with that member's values.
_EVENT_FIELDS: dict[type, Callable[[Any], Fields]] = {
    HandStarted: _hand_started,
    CardsDealt: _cards_dealt,
    FloorFixed: _floor_fixed,
    CardPlayed: _card_played,
    Captured: _captured,
    Trailed: _trailed,
    Swept: _swept,
    BasraScored: _basra_scored,
    LeftoversAwarded: _leftovers_awarded,
    HandScored: _hand_scored,
    MatchOver: _match_over,
    HiddenDeal: _hidden_deal,
}


def event_fields(event: Event | HiddenDeal) -> Fields:
    """The values of the basra.v1.Event of one engine event (or of a hidden deal)."""
    fields = _EVENT_FIELDS.get(type(event))
    if fields is None:
        raise TypeError(f"unknown event type {type(event).__name__}")
    return fields(event)


# ---- responses ----


@lru_cache(maxsize=_KEPT)
def _event_entries(event: Event | HiddenDeal) -> tuple[bytes, bytes, bytes]:
    """An event's encodings as one entry of a response's events, of a seat's list and of a
    response's public events."""
    fields = event_fields(event)
    return (
        pb.ApplyResponse(events=[fields]).SerializeToString(),
        pb.SeatEvents(events=[fields]).SerializeToString(),
        pb.ApplyResponse(public_events=[fields]).SerializeToString(),
    )


def _seat_list(events: tuple[Event, ...], seat: int) -> bytes:
    """The events of a basra.v1.SeatEvents, as that seat sees them (hidden deals included)."""
    return b"".join([_event_entries(e)[1] for e in seat_events(events, seat)])


def match_response_bytes(
    state: Fields,
    events: tuple[Event, ...],
    moves: bytes,
    seed_commitment: bytes,
    signed_state: Fields | None,
) -> bytes:
    """An encoded ApplyResponse, which is also the encoded NewMatchResponse (same fields, same
    numbers: tests/contract), from the values of its state and signed state and the encoded
    LegalMoves."""
    response = pb.ApplyResponse(
        state=state, seed_commitment=seed_commitment, signed_state=signed_state
    )
    response.legal_moves.MergeFromString(moves)
    for seat in SEATS:
        response.seat_events.add(seat=seat).MergeFromString(_seat_list(events, seat))
    everyone = [_event_entries(e)[0] for e in events]
    public = [_event_entries(e)[2] for e in public_events(events)]
    response.MergeFromString(b"".join(everyone + public))
    return response.SerializeToString()


def refusal_fields(reason: str, sentence: str, metadata: Mapping[str, str]) -> Fields:
    """The values of a basra.v1.Refusal."""
    return {"reason": reason, "message": sentence, "metadata": metadata}


def replay_response_bytes(
    state: Fields,
    events: Iterable[Event],
    moves: Fields,
    *,
    refused_index: int | None,
    refusal: Fields | None,
    signed_state: Fields | None,
) -> bytes:
    """An encoded ReplayResponse from the values of its parts."""
    return pb.ReplayResponse(
        state=state,
        events=[event_fields(e) for e in events],
        legal_moves=moves,
        refused_index=refused_index,
        refusal=refusal,
        signed_state=signed_state,
    ).SerializeToString()


def _public_seat(view: PublicView, seat: int) -> Fields:
    return {
        "label": view.labels[seat],
        "hand_size": view.hand_sizes[seat],
        "captured_count": view.captured_counts[seat],
        "basras": view.basras[seat],
        "total": view.totals[seat],
    }


def _public_fields(view: PublicView) -> Fields:
    """The values PlayerView and PublicView share (the same names, other numbers)."""
    return {
        "seq": view.seq,
        "hand_number": view.hand_number,
        "round_number": view.round_number,
        "dealer": view.dealer,
        "to_move": view.to_move,
        "floor": _codes(view.floor),
        "deck_size": view.deck_size,
        "seats": [_public_seat(view, seat) for seat in SEATS],
        "carry": view.carry,
        "status": PROTO_STATUS[view.status],
        "winner": view.winner,
        "seed_commitment": view.seed_commitment,
        "seed": view.seed,
    }


def view_fields(view: SeatView) -> Fields:
    """The values of basra.v1.PlayerView of one seat's view; legal moves only for the seat to
    move."""
    public = view.public
    moves = moves_fields(view.seat, view.legal_moves) if public.to_move == view.seat else None
    return {
        "seat": view.seat,
        "hand": _codes(view.hand),
        "legal_moves": moves,
        **_public_fields(public),
    }


def player_view_response_bytes(view: SeatView) -> bytes:
    """An encoded PlayerViewResponse of a seat's view."""
    return pb.PlayerViewResponse(view=view_fields(view)).SerializeToString()


def public_view_response_bytes(view: PublicView) -> bytes:
    """An encoded PlayerViewResponse of the public view."""
    return pb.PlayerViewResponse(public_view=_public_fields(view)).SerializeToString()


def _action(seat: int, card: Card, plan_id: int | None) -> Fields:
    return {"seat": seat, "card": CODES[card], "plan_id": plan_id}


def suggestion_fields(suggestion: Suggestion) -> Fields:
    """The values of the SuggestMoveResponse of a suggestion."""
    seat = suggestion.seat
    return {
        "action": _action(seat, suggestion.card, suggestion.plan_id),
        "candidates": [
            {"action": _action(seat, c.card, c.plan_id), "value": c.value, "deals": c.deals}
            for c in suggestion.candidates
        ],
        "reason": suggestion.reason.value,
        "level": PROTO_BOT_LEVEL[suggestion.level],
        "work": {"deals": suggestion.deals, "nodes": suggestion.nodes},
    }


def suggestion_bytes(suggestion: Suggestion) -> bytes:
    """The encoded SuggestMoveResponse of a suggestion."""
    return pb.SuggestMoveResponse(**suggestion_fields(suggestion)).SerializeToString()
