"""Events a server sent, read back into the engine's values: for `basra-rules verify`, the
soak and tests."""

from __future__ import annotations

from collections.abc import Sequence

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
    SeatScore,
    Swept,
    Trailed,
    parse_card,
    parse_cards,
)


def _seat_score_from_proto(message: pb.SeatScore) -> SeatScore:
    # Both hold the same fields under the same names.
    return SeatScore(**{f.name: getattr(message, f.name) for f in message.DESCRIPTOR.fields})


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
