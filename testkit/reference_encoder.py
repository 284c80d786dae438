"""The answers of Apply, LegalMoves and PlayerView built as protobuf messages, field by field.

The service writes its answers straight to wire bytes (service/wire.py) for speed. This is
the slow, plain way to the same answers, written from the .proto: every message built by
protobuf's own classes and encoded by protobuf. The in-process fuzzer (tests/fuzz) holds every
answer the service gives to this oracle, byte for byte, on states no corpus holds. It reads
requests with the service's own reader (what is checked here is the writing) and answers
unsigned requests only, as a server without signing keys does; it never ships.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from basra.v1 import rules_pb2 as pb

import engine
from engine import code, codes
from engine.rng import commitment
from service import reading

_STATUS = {engine.Status.IN_PROGRESS: pb.STATUS_IN_PROGRESS, engine.Status.OVER: pb.STATUS_OVER}


def state_message(state: engine.State) -> pb.State:
    """The State message of an engine state."""
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
        status=_STATUS[state.status],
        winner=state.winner,
        seats=seats,
        seed=state.seed,
        last_capturer=state.last_capturer,
        unclaimed=codes(state.unclaimed),
    )


def _card_lists(groups: Iterable[tuple[int, ...]]) -> list[pb.CardList]:
    return [pb.CardList(cards=codes(g)) for g in groups]


def _plan(plan: engine.Plan) -> pb.Plan:
    return pb.Plan(
        id=plan.id,
        cards=codes(plan.cards),
        groups=_card_lists(plan.groups),
        basra=plan.basra,
        same_rank=codes(plan.same_rank),
        sweep=plan.sweep,
    )


def moves_message(seat: int | None, moves: Sequence[engine.Move]) -> pb.LegalMoves:
    """The LegalMoves message of the seat to move (None once the match is over)."""
    return pb.LegalMoves(
        seat=seat,
        moves=[
            pb.Move(card=code(m.card), plans=[_plan(p) for p in m.plans], trails=m.trails)
            for m in moves
        ],
    )


def _seat_score(score: engine.SeatScore) -> pb.SeatScore:
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


def event_message(event: engine.Event | engine.HiddenDeal) -> pb.Event:
    """The Event message of one engine event (or of a hidden deal, as a seat sees it)."""
    match event:
        case engine.CardPlayed(seat, card):
            return pb.Event(card_played=pb.CardPlayed(seat=seat, card=code(card)))
        case engine.Captured(seat, card, plan_id, cards, same_rank, groups):
            captured = pb.Captured(
                seat=seat,
                card=code(card),
                plan_id=plan_id,
                cards=codes(cards),
                same_rank=codes(same_rank),
                groups=_card_lists(groups),
            )
            return pb.Event(captured=captured)
        case engine.Trailed(seat, card):
            return pb.Event(trailed=pb.Trailed(seat=seat, card=code(card)))
        case engine.CardsDealt(seat, cards):
            return pb.Event(cards_dealt=pb.CardsDealt(seat=seat, cards=codes(cards)))
        case engine.HiddenDeal(seat, count):
            return pb.Event(hidden_deal=pb.HiddenDeal(seat=seat, count=count))
        case engine.Swept(seat, card, cards):
            return pb.Event(swept=pb.Swept(seat=seat, card=code(card), cards=codes(cards)))
        case engine.BasraScored(seat, card):
            return pb.Event(basra_scored=pb.BasraScored(seat=seat, card=code(card)))
        case engine.HandStarted(hand_number, dealer):
            return pb.Event(hand_started=pb.HandStarted(hand_number=hand_number, dealer=dealer))
        case engine.FloorFixed(returned, replacements):
            fixed = pb.FloorFixed(returned=codes(returned), replacements=codes(replacements))
            return pb.Event(floor_fixed=fixed)
        case engine.LeftoversAwarded(seat, cards):
            return pb.Event(leftovers_awarded=pb.LeftoversAwarded(seat=seat, cards=codes(cards)))
        case engine.HandScored(hand_number, seats, carry_before, carry_after):
            scored = pb.HandScored(
                hand_number=hand_number,
                seats=[_seat_score(s) for s in seats],
                carry_before=carry_before,
                carry_after=carry_after,
            )
            return pb.Event(hand_scored=scored)
        case engine.MatchOver(winner, totals):
            return pb.Event(match_over=pb.MatchOver(winner=winner, totals=list(totals)))
    raise TypeError(f"unknown event type {type(event).__name__}")


def _public_fields(view: engine.PublicView) -> dict[str, Any]:
    # The fields PlayerView and PublicView share, by name.
    seats = [
        pb.PublicSeat(
            label=view.labels[s],
            hand_size=view.hand_sizes[s],
            captured_count=view.captured_counts[s],
            basras=view.basras[s],
            total=view.totals[s],
        )
        for s in (0, 1)
    ]
    return {
        "seq": view.seq,
        "hand_number": view.hand_number,
        "round_number": view.round_number,
        "dealer": view.dealer,
        "to_move": view.to_move,
        "floor": codes(view.floor),
        "deck_size": view.deck_size,
        "seats": seats,
        "carry": view.carry,
        "status": _STATUS[view.status],
        "winner": view.winner,
        "seed_commitment": view.seed_commitment,
        "seed": view.seed,
    }


def view_message(view: engine.SeatView) -> pb.PlayerView:
    """The PlayerView message of one seat's view; legal moves only when that seat is to move."""
    message = pb.PlayerView(seat=view.seat, hand=codes(view.hand), **_public_fields(view.public))
    if view.public.to_move == view.seat:
        message.legal_moves.CopyFrom(moves_message(view.seat, view.legal_moves))
    return message


def public_view_message(view: engine.PublicView) -> pb.PublicView:
    """The PublicView message of what anybody may see."""
    return pb.PublicView(**_public_fields(view))


def _checked(message: pb.State) -> engine.State:
    state = reading.state_from_proto(message)
    engine.check_state(state)
    return state


def apply_answer(request: pb.ApplyRequest) -> bytes:
    """The ApplyResponse of an answered Apply request."""
    state = _checked(request.state)
    after, events = engine.apply(state, reading.action_from_proto(request.action), check=False)
    response = pb.ApplyResponse(
        state=state_message(after),
        events=[event_message(e) for e in events],
        legal_moves=moves_message(after.to_move, engine.legal_moves(after)),
        seat_events=[
            pb.SeatEvents(
                seat=seat, events=[event_message(e) for e in engine.seat_events(events, seat)]
            )
            for seat in (0, 1)
        ],
        seed_commitment=commitment(after.seed),
        public_events=[event_message(e) for e in engine.public_events(events)],
    )
    return response.SerializeToString()


def legal_moves_answer(request: pb.LegalMovesRequest) -> bytes:
    """The LegalMovesResponse of an answered LegalMoves request."""
    state = _checked(request.state)
    moves = moves_message(state.to_move, engine.legal_moves(state))
    return pb.LegalMovesResponse(legal_moves=moves).SerializeToString()


def player_view_answer(request: pb.PlayerViewRequest) -> bytes:
    """The PlayerViewResponse of an answered PlayerView request (a seat's or the public view)."""
    state = _checked(request.state)
    if request.spectator:
        public = public_view_message(engine.public_view(state))
        return pb.PlayerViewResponse(public_view=public).SerializeToString()
    view = engine.seat_view(state, request.seat)
    return pb.PlayerViewResponse(view=view_message(view)).SerializeToString()


# The RPCs whose answers this module builds, by method name.
ANSWERS: dict[str, Callable[[Any], bytes]] = {
    "Apply": apply_answer,
    "LegalMoves": legal_moves_answer,
    "PlayerView": player_view_answer,
}
