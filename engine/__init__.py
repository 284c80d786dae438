"""Basra rules engine: pure, deterministic, immutable values, no I/O."""

from engine.cards import Card, code, codes, parse_card, parse_cards
from engine.errors import Reason, RuleError
from engine.events import (
    BasraScored,
    Captured,
    CardPlayed,
    CardsDealt,
    Event,
    FloorFixed,
    HandScored,
    HandStarted,
    LeftoversAwarded,
    MatchOver,
    SeatScore,
    Swept,
    Trailed,
)
from engine.facts import DEFAULT_WORK_LIMIT, MAX_PLANS
from engine.infoset import InformationSet
from engine.match import Action, Move, apply, legal_actions, legal_moves, new_match
from engine.plans import Plan, plans_for
from engine.replay import ReplayResult, replay
from engine.scoring import match_winner, score_hand
from engine.state import State, Status
from engine.validate import check_state
from engine.view import (
    HiddenDeal,
    PublicView,
    SeatView,
    information_set,
    public_events,
    public_view,
    seat_events,
    seat_view,
)

__all__ = [
    "DEFAULT_WORK_LIMIT",
    "MAX_PLANS",
    "Action",
    "BasraScored",
    "Captured",
    "Card",
    "CardPlayed",
    "CardsDealt",
    "Event",
    "FloorFixed",
    "HandScored",
    "HandStarted",
    "HiddenDeal",
    "InformationSet",
    "LeftoversAwarded",
    "MatchOver",
    "Move",
    "Plan",
    "PublicView",
    "Reason",
    "ReplayResult",
    "RuleError",
    "SeatScore",
    "SeatView",
    "State",
    "Status",
    "Swept",
    "Trailed",
    "apply",
    "check_state",
    "code",
    "codes",
    "information_set",
    "legal_actions",
    "legal_moves",
    "match_winner",
    "new_match",
    "parse_card",
    "parse_cards",
    "plans_for",
    "public_events",
    "public_view",
    "replay",
    "score_hand",
    "seat_events",
    "seat_view",
]
