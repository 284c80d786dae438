"""Reading requests: the basra.v1 messages a call carries, into engine values.

Strict on everything received: a state whose cards, seats or status cannot be read is refused
here (INVALID_STATE, naming the zone or field); the engine's check_state judges the rest. An
action is read as the clients read one (wire.actions). Requests are parsed by protobuf
(upb) before they get here; reading a state is one table lookup per card code.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import NoReturn

from basra.v1 import rules_pb2 as pb

from engine import Reason, RuleError, State, code, parse_card
from engine.cards import Card
from engine.facts import DECK_SIZE
from service.enums import ENGINE_STATUS

__all__ = ["labels_from_proto", "state_from_proto"]

_CARD_BY_CODE: dict[str, Card] = {code(card): card for card in range(DECK_SIZE)}


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
    status = ENGINE_STATUS.get(message_.status)
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


def labels_from_proto(labels: Sequence[str]) -> tuple[str, str]:
    """Return the two labels of a request (missing ones are ""); the caller checks the count."""
    padded = [*labels, "", ""]
    return (padded[0], padded[1])
