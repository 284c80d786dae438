"""The field numbers of the basra.v1 messages the service writes, by name, from the descriptors.

Answers are written straight to their wire bytes (service/writing.py), which needs each field's
number. Each is declared here once, as MESSAGE_FIELD (State.to_move is STATE_TO_MOVE), and its
value is read from the generated descriptors when this module is imported: no number is
written by hand outside gen/, and a call only reads a module global (a nanosecond or two more
than a literal; the writers' tables built at import give more back, BENCHMARKS.md). A name
that no field of basra.v1 has stops the import; tests/service/test_service_fields.py checks
every name against proto/basra/v1/rules.proto and that every field of these messages is named.
NewMatchResponse has ApplyResponse's fields with the same numbers (tests/contract), so both
are written with APPLY_RESPONSE_*.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from basra.v1 import rules_pb2 as pb

# basra.v1.State
STATE_SEQ: int
STATE_TO_MOVE: int
STATE_DEALER: int
STATE_HAND_NUMBER: int
STATE_FLOOR: int
STATE_DECK: int
STATE_CARRY: int
STATE_STATUS: int
STATE_WINNER: int
STATE_SEATS: int
STATE_SEED: int
STATE_LAST_CAPTURER: int
STATE_UNCLAIMED: int

# basra.v1.SeatState
SEAT_STATE_HAND: int
SEAT_STATE_CAPTURED: int
SEAT_STATE_BASRAS: int
SEAT_STATE_TOTAL: int
SEAT_STATE_LABEL: int

# basra.v1.CardList
CARD_LIST_CARDS: int

# basra.v1.SignedState
SIGNED_STATE_STATE: int
SIGNED_STATE_KEY_ID: int
SIGNED_STATE_SIGNATURE: int

# basra.v1.LegalMoves
LEGAL_MOVES_SEAT: int
LEGAL_MOVES_MOVES: int

# basra.v1.Move
MOVE_CARD: int
MOVE_PLANS: int
MOVE_TRAILS: int

# basra.v1.Plan
PLAN_ID: int
PLAN_CARDS: int
PLAN_GROUPS: int
PLAN_BASRA: int
PLAN_SAME_RANK: int
PLAN_SWEEP: int

# basra.v1.Event
EVENT_HAND_STARTED: int
EVENT_CARDS_DEALT: int
EVENT_FLOOR_FIXED: int
EVENT_CARD_PLAYED: int
EVENT_CAPTURED: int
EVENT_TRAILED: int
EVENT_SWEPT: int
EVENT_BASRA_SCORED: int
EVENT_LEFTOVERS_AWARDED: int
EVENT_HAND_SCORED: int
EVENT_MATCH_OVER: int
EVENT_HIDDEN_DEAL: int

# basra.v1.HandStarted
HAND_STARTED_HAND_NUMBER: int
HAND_STARTED_DEALER: int

# basra.v1.CardsDealt
CARDS_DEALT_SEAT: int
CARDS_DEALT_CARDS: int

# basra.v1.HiddenDeal
HIDDEN_DEAL_SEAT: int
HIDDEN_DEAL_COUNT: int

# basra.v1.FloorFixed
FLOOR_FIXED_RETURNED: int
FLOOR_FIXED_REPLACEMENTS: int

# basra.v1.CardPlayed
CARD_PLAYED_SEAT: int
CARD_PLAYED_CARD: int

# basra.v1.Captured
CAPTURED_SEAT: int
CAPTURED_CARD: int
CAPTURED_PLAN_ID: int
CAPTURED_CARDS: int
CAPTURED_SAME_RANK: int
CAPTURED_GROUPS: int

# basra.v1.Trailed
TRAILED_SEAT: int
TRAILED_CARD: int

# basra.v1.Swept
SWEPT_SEAT: int
SWEPT_CARD: int
SWEPT_CARDS: int

# basra.v1.BasraScored
BASRA_SCORED_SEAT: int
BASRA_SCORED_CARD: int

# basra.v1.LeftoversAwarded
LEFTOVERS_AWARDED_SEAT: int
LEFTOVERS_AWARDED_CARDS: int

# basra.v1.HandScored
HAND_SCORED_HAND_NUMBER: int
HAND_SCORED_SEATS: int
HAND_SCORED_CARRY_BEFORE: int
HAND_SCORED_CARRY_AFTER: int

# basra.v1.SeatScore
SEAT_SCORE_CARDS: int
SEAT_SCORE_MAJORITY: int
SEAT_SCORE_JACKS: int
SEAT_SCORE_ACES: int
SEAT_SCORE_TWO_OF_CLUBS: int
SEAT_SCORE_TEN_OF_DIAMONDS: int
SEAT_SCORE_BASRAS: int
SEAT_SCORE_BASRA_POINTS: int
SEAT_SCORE_HAND_TOTAL: int
SEAT_SCORE_RUNNING_TOTAL: int

# basra.v1.MatchOver
MATCH_OVER_WINNER: int
MATCH_OVER_TOTALS: int

# basra.v1.SeatEvents
SEAT_EVENTS_SEAT: int
SEAT_EVENTS_EVENTS: int

# basra.v1.ApplyResponse
APPLY_RESPONSE_STATE: int
APPLY_RESPONSE_EVENTS: int
APPLY_RESPONSE_LEGAL_MOVES: int
APPLY_RESPONSE_SEAT_EVENTS: int
APPLY_RESPONSE_SEED_COMMITMENT: int
APPLY_RESPONSE_PUBLIC_EVENTS: int
APPLY_RESPONSE_SIGNED_STATE: int

# basra.v1.ReplayResponse
REPLAY_RESPONSE_STATE: int
REPLAY_RESPONSE_EVENTS: int
REPLAY_RESPONSE_LEGAL_MOVES: int
REPLAY_RESPONSE_REFUSED_INDEX: int
REPLAY_RESPONSE_REFUSAL: int
REPLAY_RESPONSE_SIGNED_STATE: int

# basra.v1.LegalMovesResponse
LEGAL_MOVES_RESPONSE_LEGAL_MOVES: int

# basra.v1.PlayerViewResponse
PLAYER_VIEW_RESPONSE_VIEW: int
PLAYER_VIEW_RESPONSE_PUBLIC_VIEW: int

# basra.v1.PlayerView
PLAYER_VIEW_SEAT: int
PLAYER_VIEW_SEQ: int
PLAYER_VIEW_HAND_NUMBER: int
PLAYER_VIEW_ROUND_NUMBER: int
PLAYER_VIEW_DEALER: int
PLAYER_VIEW_TO_MOVE: int
PLAYER_VIEW_HAND: int
PLAYER_VIEW_FLOOR: int
PLAYER_VIEW_DECK_SIZE: int
PLAYER_VIEW_SEATS: int
PLAYER_VIEW_CARRY: int
PLAYER_VIEW_STATUS: int
PLAYER_VIEW_WINNER: int
PLAYER_VIEW_LEGAL_MOVES: int
PLAYER_VIEW_SEED_COMMITMENT: int
PLAYER_VIEW_SEED: int

# basra.v1.PublicSeat
PUBLIC_SEAT_LABEL: int
PUBLIC_SEAT_HAND_SIZE: int
PUBLIC_SEAT_CAPTURED_COUNT: int
PUBLIC_SEAT_BASRAS: int
PUBLIC_SEAT_TOTAL: int

# basra.v1.PublicView
PUBLIC_VIEW_SEQ: int
PUBLIC_VIEW_HAND_NUMBER: int
PUBLIC_VIEW_ROUND_NUMBER: int
PUBLIC_VIEW_DEALER: int
PUBLIC_VIEW_TO_MOVE: int
PUBLIC_VIEW_FLOOR: int
PUBLIC_VIEW_DECK_SIZE: int
PUBLIC_VIEW_SEATS: int
PUBLIC_VIEW_CARRY: int
PUBLIC_VIEW_STATUS: int
PUBLIC_VIEW_WINNER: int
PUBLIC_VIEW_SEED_COMMITMENT: int
PUBLIC_VIEW_SEED: int


def constant_name(message: str, field: str) -> str:
    """The name of a field's number here: State.to_move is STATE_TO_MOVE."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", message).upper() + "_" + field.upper()


def _numbers(names: Iterable[str]) -> dict[str, int]:
    """The number of each named field, refusing a name that no field or several fields have."""
    found: dict[str, list[int]] = {}
    for message in pb.DESCRIPTOR.message_types_by_name.values():
        for field in message.fields:
            found.setdefault(constant_name(message.name, field.name), []).append(field.number)
    numbers = {}
    for name in names:
        matches = found.get(name, [])
        if len(matches) != 1:
            raise ImportError(f"{name} names {len(matches)} fields of basra.v1, not one")
        numbers[name] = matches[0]
    return numbers


DECLARED = tuple(name for name in __annotations__ if name not in globals())
"""Every name declared above, in order."""
globals().update(_numbers(DECLARED))
