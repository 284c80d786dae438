"""What a RulesService call came to: the facts its handler read, and its outcome.

The one value the servicer, the batch, the metrics, the log line and the span all take as it
is: nothing about a call is read back from its request or from the status sent.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from service.errors import Failure, Refusal

# An answer (the encoded response), a refusal, or a failure (INTERNAL).
Outcome = bytes | Refusal | Failure


@dataclass(slots=True)
class Facts:
    """What a call was about, noted by its handler as it read the request; never a card or
    the seed (they go into the log line and the span)."""

    seq: int | None = None
    """The seq of the state the call was about (of the result for NewMatch and Replay)."""
    seat: int | None = None
    """Apply's action's seat, PlayerView's and SuggestMove's seat."""
    items: int | None = None
    """BatchApply: the requests of the batch."""
    outcomes: Mapping[str, int] | None = None
    """BatchApply: how many items ended how ("OK", else the refusal's reason)."""

    def fields(self) -> dict[str, Any]:
        """The facts noted, by name (those never noted are left out)."""
        noted = {"seq": self.seq, "seat": self.seat, "items": self.items}
        fields: dict[str, Any] = {k: v for k, v in noted.items() if v is not None}
        if self.outcomes is not None:
            fields["outcomes"] = dict(self.outcomes)
        return fields


def code_name(outcome: Outcome) -> str:
    """The name of the status code an outcome ends its call with."""
    return "OK" if isinstance(outcome, bytes) else outcome.code.name


def reason(outcome: Outcome) -> str | None:
    """The reason of a refusal, else None."""
    return outcome.reason if isinstance(outcome, Refusal) else None
