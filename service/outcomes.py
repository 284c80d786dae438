"""What a RulesService call came to: the facts its handler read, its outcome, and how it ended.

`respond` (service/servicer.py) returns the outcome; `ended` turns it, with the facts, into the
one value the call's metrics, log line and span take as it is (`Ended`, given to the call's
observer, service/interceptors.py): nothing about a call is read back from its request, from
its log line or from the status sent.
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


@dataclass(frozen=True, slots=True)
class Ended:
    """How a call ended as its client saw it: what its counts, its log line and its span say."""

    code: str
    """The name of the status code ("OK", "INVALID_ARGUMENT", ...)."""
    reason: str | None = None
    """A refusal's reason (its ErrorInfo's), else None."""
    facts: Facts | None = None
    """What its handler read of the request (None: no handler ran, or not a RulesService call)."""
    error: BaseException | None = None
    """A Failure's exception: the traceback of the call's line, the span's exception event."""


def ended(outcome: Outcome, facts: Facts | None = None, seen: str | None = None) -> Ended:
    """How a call that its handler ended with `outcome` ended; `seen`: the code its client saw
    instead, when the call had ended before its handler returned (deadline, client gone, the
    end of the server's grace). The refusal's reason stays: the handler's refusal is counted."""
    error = outcome.error if isinstance(outcome, Failure) else None
    return Ended(seen or code_name(outcome), reason(outcome), facts, error)


def code_name(outcome: Outcome) -> str:
    """The name of the status code an outcome ends its call with."""
    return "OK" if isinstance(outcome, bytes) else outcome.code.name


def reason(outcome: Outcome) -> str | None:
    """The reason of a refusal, else None."""
    return outcome.reason if isinstance(outcome, Refusal) else None
