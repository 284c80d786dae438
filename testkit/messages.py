"""The engine's values as basra.v1 messages, for tests and test machinery.

Each *_to_proto function gives its generated class the values service/writing.py fills it
with, so a message here is, by construction, what the server sends. The inverse, for events,
is clients.messages.event_from_proto.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from basra.v1 import rules_pb2 as pb

from engine import Event, HiddenDeal, Move, SeatView, State
from engine.bot import Suggestion
from service import writing


def state_to_proto(state: State) -> pb.State:
    """Return the message of an engine state."""
    return pb.State(**writing.state_fields(state))


def moves_to_proto(seat: int | None, moves: Sequence[Move]) -> pb.LegalMoves:
    """Return the legal moves of the seat to move (seat None once the match is over)."""
    return pb.LegalMoves(**writing.moves_fields(seat, moves))


def event_to_proto(event: Event | HiddenDeal) -> pb.Event:
    """Return the message of one engine event (or of a hidden deal from seat_events)."""
    return pb.Event(**writing.event_fields(event))


def events_to_proto(events: Iterable[Event | HiddenDeal]) -> list[pb.Event]:
    """Return the messages of several events, in order."""
    return [event_to_proto(e) for e in events]


def view_to_proto(view: SeatView) -> pb.PlayerView:
    """Return the message of one seat's view; legal moves only when that seat is to move."""
    return pb.PlayerView(**writing.view_fields(view))


def suggestion_to_proto(suggestion: Suggestion) -> pb.SuggestMoveResponse:
    """Return the SuggestMove response of a suggestion."""
    return pb.SuggestMoveResponse(**writing.suggestion_fields(suggestion))
