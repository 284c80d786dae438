"""A short soak: whole matches at a steady rate against a 2-worker server, every answer checked."""

from __future__ import annotations

import base64
import json
import random
import threading
from collections.abc import Callable, Iterator
from typing import Any

import grpc
import pytest
from basra.v1 import rules_pb2 as pb
from basra.v1 import rules_pb2_grpc

from testkit import harness, soak
from testkit.ports import reserved_port

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


def _later_seq(result: pb.ApplyResponse) -> None:
    result.state.seq += 1


def _public_event_lost(result: pb.ApplyResponse) -> None:
    del result.public_events[-1]


class _TamperingStub:
    """A stub whose Apply answers come back with one thing changed by `tamper`."""

    def __init__(self, real: Any, tamper: Callable[[pb.ApplyResponse], None]) -> None:
        self._real = real
        self._tamper = tamper

    def __getattr__(self, method: str) -> Any:
        call = getattr(self._real, method)
        if method != "Apply":
            return call

        def tampered(request: pb.ApplyRequest, timeout: float) -> pb.ApplyResponse:
            result: pb.ApplyResponse = call(request, timeout=timeout)
            self._tamper(result)
            return result

        return tampered


@pytest.mark.parametrize(
    ("tamper", "found"),
    [(_later_seq, "Apply state"), (_public_event_lost, "Apply public_events")],
)
def test_the_referee_catches_an_answer_that_differs(
    server: harness.ServedProcess, tamper: Callable[[pb.ApplyResponse], None], found: str
) -> None:
    """The check is real: one changed field in an Apply answer (the state's seq, or one public
    event dropped) is reported as a mismatch of that field."""
    with grpc.insecure_channel(server.target) as channel:
        real = rules_pb2_grpc.RulesServiceStub(channel)  # type: ignore[no-untyped-call]
        stub = _TamperingStub(real, tamper)
        counts = soak.SoakCounts()
        pacer = soak.Pacer(1000.0, float("inf"))
        table = soak.Table(stub, random.Random(3), pacer, counts)
        with pytest.raises(soak.Mismatch, match=found):
            table.play_match()
    assert counts.calls["NewMatch"] == 1 and counts.calls["Apply"] == 1


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


def test_a_refusal_check_cut_off_by_a_kill_counts_as_a_call_cut_off(tmp_path: Any) -> None:
    """Workers killed right before deliberately wrong requests: the soak still exits 0.

    The one worker is killed just before each request whose refusal is known in advance, so
    those requests meet a dead worker and fail UNAVAILABLE. That is what a kill does to any
    call; the soak counts it with the calls cut off by kills, not as a wrong refusal.
    """
    report_path = tmp_path / "soak.json"
    argv = ["--workers", "1", "--duration", "6", "--rate", "100", "--tables", "2", "--seed", "4"]
    code = soak.main([*argv, "--kill-before-wrong", "--json", str(report_path)])
    report = json.loads(report_path.read_text())
    assert report["total_errors"] == 0, report["error_samples"]
    assert code == 0
    assert report["workers_killed"] >= 1
    assert report["refusal_checks_cut_off"] >= 1
    assert report["unavailable_during_kills"] >= report["refusal_checks_cut_off"]


@pytest.fixture(scope="module")
def unavailable() -> grpc.RpcError:
    """The error of a real call to a port where no worker listens (as after a kill)."""
    with reserved_port() as port, grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = rules_pb2_grpc.RulesServiceStub(channel)  # type: ignore[no-untyped-call]
        with pytest.raises(grpc.RpcError) as raised:
            stub.NewMatch(pb.NewMatchRequest(), timeout=10)
    assert raised.value.code() is grpc.StatusCode.UNAVAILABLE
    return raised.value


def test_a_refusal_check_that_meets_a_dead_worker_fails_like_any_call() -> None:
    """UNAVAILABLE where a refusal was expected is the transport's answer, not a mismatch."""
    counts = soak.SoakCounts()
    with reserved_port() as port, grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = rules_pb2_grpc.RulesServiceStub(channel)  # type: ignore[no-untyped-call]
        table = soak.Table(stub, random.Random(0), soak.Pacer(1000.0, float("inf")), counts)
        request = pb.ApplyRequest(action=pb.Action(seat=1, card="AC"), expected_seq=1)
        with pytest.raises(grpc.RpcError) as raised:
            table.refused("Apply", request, grpc.StatusCode.ABORTED, "SEQ_MISMATCH")
    assert raised.value.code() is grpc.StatusCode.UNAVAILABLE
    assert counts.cut_off_checks == 1


def test_a_wrong_refusal_is_still_a_mismatch(server: harness.ServedProcess) -> None:
    """A deliberately wrong request refused for another reason than expected is reported."""
    with grpc.insecure_channel(server.target) as channel:
        stub = rules_pb2_grpc.RulesServiceStub(channel)  # type: ignore[no-untyped-call]
        table = soak.Table(
            stub, random.Random(0), soak.Pacer(1000.0, float("inf")), soak.SoakCounts()
        )
        started = stub.NewMatch(pb.NewMatchRequest(seed=b"mismatch"), timeout=10)
        to_move = started.legal_moves.seat
        card = started.legal_moves.moves[0].card
        wrong_seat = pb.ApplyRequest(
            signed_state=started.signed_state, action=pb.Action(seat=1 - to_move, card=card)
        )
        with pytest.raises(soak.Mismatch, match=r"NOT_YOUR_TURN.*SEQ_MISMATCH"):
            table.refused("Apply", wrong_seat, grpc.StatusCode.ABORTED, "SEQ_MISMATCH")


@pytest.mark.parametrize(
    ("failure", "kills", "counted"),
    [
        ("unavailable", True, "apart"),
        ("unavailable", False, "UNAVAILABLE"),
        ("mismatch", True, "MISMATCH"),
        ("mismatch", False, "MISMATCH"),
    ],
)
def test_only_unavailable_during_injected_kills_is_counted_apart(
    failure: str, kills: bool, counted: str, unavailable: grpc.RpcError
) -> None:
    """A mismatch fails a run with kills too; UNAVAILABLE without kills is an error."""
    counts, faults = soak.SoakCounts(), soak.Faults()
    found = unavailable if failure == "unavailable" else soak.Mismatch("Apply refused with ...")
    soak.count_failure(found, counts, faults, kills=kills)
    if counted == "apart":
        assert (faults.unavailable, counts.errors) == (1, {})
    else:
        assert (faults.unavailable, dict(counts.errors)) == (0, {counted: 1})
