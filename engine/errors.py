"""The one exception type of the engine and its stable reason codes."""

from __future__ import annotations

from enum import StrEnum


class Reason(StrEnum):
    """Stable, machine-readable reason codes for refused input."""

    NOT_YOUR_TURN = "NOT_YOUR_TURN"
    CARD_NOT_IN_HAND = "CARD_NOT_IN_HAND"
    PLAN_REQUIRED = "PLAN_REQUIRED"
    UNKNOWN_PLAN = "UNKNOWN_PLAN"
    ILLEGAL_CAPTURE = "ILLEGAL_CAPTURE"
    MUST_CAPTURE = "MUST_CAPTURE"
    MATCH_OVER = "MATCH_OVER"
    INVALID_STATE = "INVALID_STATE"
    INVALID_CARD = "INVALID_CARD"
    INVALID_ACTION = "INVALID_ACTION"
    INVALID_LABEL = "INVALID_LABEL"
    INVALID_SEED = "INVALID_SEED"
    INVALID_SEAT = "INVALID_SEAT"
    STATE_TOO_COMPLEX = "STATE_TOO_COMPLEX"


class RuleError(Exception):
    """A refusal: a stable reason code, one clear sentence, and the values involved."""

    def __init__(self, reason: Reason, message: str, **details: str | int) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message
        self.details: dict[str, str] = {k: str(v) for k, v in details.items()}

    def __repr__(self) -> str:
        return f"RuleError({self.reason.value}, {self.message!r})"
