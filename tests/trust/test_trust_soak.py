"""A short soak: whole matches at a steady rate against a 2-worker server, every answer checked."""

from __future__ import annotations

import base64
import random
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from basra.v1 import rules_pb2 as pb

from testkit import harness, soak

DEADLINE_SECONDS = 120.0


@pytest.fixture(scope="module")
def server() -> Iterator[harness.ServedProcess]:
    """`basra-rules serve --workers 2`, signing states, on a loopback port of its choosing."""
    key = base64.b64encode(random.Random(0).randbytes(32)).decode()
    served = harness.start(["--workers", "2"], env={"BASRA_SIGNING_KEYS": f"soak:{key}"})
    yield served
    served.stop()


def test_short_soak_of_signed_states_finds_no_error_and_measures_every_worker(
    server: harness.ServedProcess,
) -> None:
    workers = server.workers()
    assert len(workers) == 2
    rate = 150.0
    # Two whole matches, played, checked and replayed; the duration is only a deadline, far
    # beyond what they need (a few seconds at this rate), so a slow machine takes longer but
    # passes the same way.
    report = soak.run(
        server.target,
        duration=DEADLINE_SECONDS,
        rate=rate,
        tables=2,
        seed=1,
        workers=server.workers,
        until_matches=2,
    )
    print(report.text())  # shown with -s or on failure
    assert report.total_errors == 0, report.error_samples
    assert report.matches >= 2, f"two matches not played within {DEADLINE_SECONDS} s"
    assert set(report.calls) == {"NewMatch", "Apply", "LegalMoves", "PlayerView", "Replay"}
    # The pacer never exceeds the rate asked (a bound that holds however slow the machine).
    assert report.total_calls <= rate * report.duration_seconds + 1
    assert sum(report.expected_refusals.values()) >= 1
    assert report.workers_start == report.workers_end == workers
    assert server.find("worker died, replacing it") == []
    for pid in workers:
        start, end = report.rss_kib_start[pid], report.rss_kib_end[pid]
        assert start is not None and end is not None and start > 0 and end > 0


class _TamperingStub:
    """A stub whose Apply answers come back with one card of the floor changed."""

    def __init__(self, real: Any) -> None:
        self._real = real

    def __getattr__(self, method: str) -> Any:
        call = getattr(self._real, method)
        if method != "Apply":
            return call

        def tampered(request: pb.ApplyRequest, timeout: float) -> pb.ApplyResponse:
            result: pb.ApplyResponse = call(request, timeout=timeout)
            result.state.seq += 1
            return result

        return tampered


def test_the_referee_catches_an_answer_that_differs(server: harness.ServedProcess) -> None:
    """The check is real: one changed field in an Apply answer is reported as a mismatch."""
    import grpc
    from basra.v1 import rules_pb2_grpc

    with grpc.insecure_channel(server.target) as channel:
        stub = _TamperingStub(rules_pb2_grpc.RulesServiceStub(channel))  # type: ignore[no-untyped-call]
        tally = soak.Tally()
        pacer = soak.Pacer(1000.0, float("inf"))
        table = soak.Table(stub, random.Random(3), pacer, tally)
        with pytest.raises(soak.Mismatch, match="Apply state"):
            table.play_match()
    assert tally.calls["NewMatch"] == 1 and tally.calls["Apply"] == 1


def test_the_pacer_never_exceeds_the_rate() -> None:
    """However many threads ask, slots are spaced by 1/rate and end at the deadline."""
    import time

    rate, seconds = 400.0, 0.5
    pacer = soak.Pacer(rate, time.monotonic() + seconds)
    got = []

    def take() -> None:
        count = 0
        while pacer.wait():
            count += 1
        got.append(count)

    threads = [threading.Thread(target=take) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert 1 <= sum(got) <= rate * seconds + 1
    assert not pacer.wait()
