"""Deadlines: no work for a caller that has given up, no search that cannot end in time.

A call whose deadline has passed when a worker picks it up is refused before any rule or bot
work (DEADLINE_EXCEEDED, reason DEADLINE_EXPIRED): its caller has stopped waiting, and an
answer would be thrown away. SuggestMove, the costly call, is also refused up front
(DEADLINE_EXCEEDED, DEADLINE_TOO_SHORT) when the time its caller has left is less than what a
search of its level and budget takes here, by the worker's running estimate. A search is never
cut short by time: for a given budget the answer stays the same whatever the load.

The estimate is a running mean, per level, of a search's seconds per node of its budget, as
measured on this worker (wall time, so it follows how busy the worker is); a worker that has
run no search of a level yet refuses none of it.
"""

from __future__ import annotations

import threading

from engine import bot
from service import errors
from service.errors import Refusal, ServiceReason
from service.running_mean import RunningMean

# Weight of the newest search in the running mean.
WEIGHT = 0.05


def past_deadline() -> Refusal:
    """The refusal of a call (or a batch item) whose deadline passed, or would pass, before
    its work could be done."""
    return errors.refusal(
        ServiceReason.DEADLINE_EXPIRED,
        "The call's deadline passed before the server could start it; nothing was done.",
    )


def expired(seconds_left: float | None) -> Refusal | None:
    """The refusal of a call whose deadline has passed (None: time is left, or no deadline)."""
    if seconds_left is None or seconds_left > 0:
        return None
    return past_deadline()


class SearchClock:
    """The running estimate of how long a SuggestMove search takes on this worker."""

    def __init__(self) -> None:
        self._per_node: dict[bot.Level, RunningMean] = {}
        self._lock = threading.Lock()

    def observe(self, level: bot.Level, budget: bot.Budget, seconds: float) -> None:
        """Count one search of `level` with `budget` that took `seconds`."""
        per_node = seconds / budget.nodes
        with self._lock:
            known = self._per_node.get(level)
            if known is None:
                self._per_node[level] = RunningMean(WEIGHT, per_node)
            else:
                known.add(per_node)

    def expected(self, level: bot.Level, budget: bot.Budget) -> float | None:
        """Seconds a search of `level` with `budget` is expected to take (None: no estimate)."""
        per_node = self._per_node.get(level)
        return None if per_node is None else per_node.value * budget.nodes

    def refusal(
        self, level: bot.Level, budget: bot.Budget, seconds_left: float | None
    ) -> Refusal | None:
        """The refusal of a search that `seconds_left` cannot cover (None: go ahead)."""
        if seconds_left is None:
            return None
        expected = self.expected(level, budget)
        if expected is None or expected <= seconds_left:
            return None
        return errors.refusal(
            ServiceReason.DEADLINE_TOO_SHORT,
            f"The call has {seconds_left * 1000:.0f} ms left and a search of its budget takes "
            f"about {expected * 1000:.0f} ms here; send it with a longer deadline or a smaller "
            "budget.",
            seconds_left_ms=round(seconds_left * 1000),
            expected_ms=round(expected * 1000),
        )
