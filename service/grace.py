"""The code a client saw for a call that ended before its handler did, so that the call's log
line, counts and span say the same.

A handler runs to its end whatever happened to its call meanwhile, and its answer is then
dropped. Three things end a call first: its deadline (the client saw DEADLINE_EXCEEDED), the
client going away (CANCELLED), and the server's stop, which at the end of the grace cuts the
calls still running (grpc's cancel_all_calls: the client saw UNAVAILABLE "Cancelling all
calls"). `Grace` knows when that cut comes; the interceptor asks `seen_by_client` for the code
of a call it finds ended when the handler returns.
"""

from __future__ import annotations

import time
from typing import Any

import grpc


class Grace:
    """When this server's grace ends (its stop cuts the calls still running): unset until the
    stop begins."""

    __slots__ = ("_ends",)

    def __init__(self) -> None:
        self._ends: float | None = None

    def begin(self, seconds: float) -> None:
        """The server's stop begins now, with `seconds` of grace."""
        self._ends = time.monotonic() + seconds

    def over(self) -> bool:
        """Whether the stop has begun and its grace has passed."""
        ends = self._ends
        return ends is not None and time.monotonic() >= ends


def expired(context: Any) -> bool:
    """Whether the call's deadline has passed."""
    remaining = context.time_remaining()
    return remaining is not None and remaining <= 0


def seen_by_client(context: Any, grace: Grace) -> grpc.StatusCode:
    """The code the client saw of a call that ended before its handler returned."""
    if expired(context):
        return grpc.StatusCode.DEADLINE_EXCEEDED
    if grace.over():
        return grpc.StatusCode.UNAVAILABLE
    return grpc.StatusCode.CANCELLED
