"""NewMatch calls sent at a fixed rate over one stub, open loop (a call is sent when it is due,
whatever the earlier ones are doing), each call's end handed to the caller: the client side of
the fault measurements (testkit.blackhole, testkit.clusterip_rollout)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from basra.v1 import rules_pb2 as pb


def send_new_matches(
    stub: Any,
    rate: float,
    deadline: float,
    ended: Callable[[float, Any], None],
    *,
    stop: threading.Event,
    seconds: float | None = None,
    settle: float = 0.0,
) -> int:
    """Send NewMatch at `rate` a second, each with `deadline`, until `stop` is set (or
    `seconds` have passed); `ended(sent_at, future)` gets each call as it ends. Wait up to
    `settle` seconds for the last calls to end; return how many were sent."""
    pending = threading.Semaphore(0)

    def done(sent: float, future: Any) -> None:
        ended(sent, future)
        pending.release()

    start = time.monotonic()
    sent_count = 0
    while not stop.is_set():
        due = start + sent_count / rate
        if seconds is not None and due >= start + seconds:
            break
        stop.wait(max(0.0, due - time.monotonic()))
        sent = time.monotonic()
        request = pb.NewMatchRequest(seed=sent_count.to_bytes(8, "big"))
        future = stub.NewMatch.future(request, timeout=deadline)
        future.add_done_callback(lambda f, sent=sent: done(sent, f))
        sent_count += 1
    waited_until = time.monotonic() + settle
    for _ in range(sent_count):
        pending.acquire(timeout=max(0.0, waited_until - time.monotonic()))
    return sent_count
