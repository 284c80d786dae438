"""Writing answers: engine values as basra.v1's generated messages, serialized by protobuf.

Each answer is one constructor call of its generated class, given plain values: a dict for a
sub-message, a list for a repeated field. upb builds the whole tree from them in C, where
building it child by child would copy every child into its parent. Each function here fills
one message from its engine value, naming its fields once; an event's values are made once
and serve the response's events, both seats' lists and the public ones.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
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


def _shown(
    events: tuple[Event, ...], made: Sequence[Fields], shown: Iterable[Event | HiddenDeal]
) -> list[Fields]:
    """The values of the events as a seat or anybody sees them; `made` are the events' values.

    engine.seat_events and engine.public_events pass visible events through as the same
    objects, so their values are reused; anything else (hidden deals) is made here.
    """
    return [
        fields if seen is event else event_fields(seen)
        for seen, event, fields in zip(shown, events, made, strict=True)
    ]


def match_response_bytes(
    state: Fields,
    events: tuple[Event, ...],
    moves: Fields,
    seed_commitment: bytes,
    signed_state: Fields | None,
) -> bytes:
    """An encoded ApplyResponse, which is also the encoded NewMatchResponse (same fields, same
    numbers: tests/contract), from the values of its state, moves and signed state."""
    made = [event_fields(e) for e in events]
    return pb.ApplyResponse(
        state=state,
        events=made,
        legal_moves=moves,
        seat_events=[
            {"seat": seat, "events": _shown(events, made, seat_events(events, seat))}
            for seat in SEATS
        ],
        seed_commitment=seed_commitment,
        public_events=_shown(events, made, public_events(events)),
        signed_state=signed_state,
    ).SerializeToString()


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
