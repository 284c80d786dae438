"""Soak run: whole matches at a steady call rate, every answer checked against a local referee.

Each table (a thread with its own channel, so tables spread over the worker processes) plays
matches from NewMatch to the end with random legal actions, looks at LegalMoves and
PlayerView now and then, sends a few deliberately wrong requests whose refusal is known in
advance, and ends each match with a Replay of all its actions. The referee is the engine run
in this process on the same actions: every response must equal what it computes. Calls are
paced by one shared clock to the requested rate. The report gives calls per method, expected
refusals, errors (any other answer, with samples), and the memory of each worker process at
start and end.

    python -m testkit.soak --duration 600 --rate 100          # starts its own 2-worker server
    python -m testkit.soak --duration 300 --kill-every 10      # with a worker killed every 10 s
    python -m testkit.soak --workers 1 --kill-before-wrong     # a kill before each wrong request
    python -m testkit.soak --target 127.0.0.1:50051 --server-pid PID
    python -m testkit.soak --duration 3600 --workers 1 --metrics --sample-every 300  # defaults
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import hashlib
import json
import os
import random
import signal
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import grpc
from basra.v1 import rules_pb2 as pb
from basra.v1 import rules_pb2_grpc
from google.protobuf.message import Message

import engine
from clients import channels
from clients.refusals import reason_of
from engine import Action, Event, State, Status
from service import errors
from testkit import harness, messages
from testkit.actions import action_to_proto, random_action

CALL_TIMEOUT = 10.0
# Fractions of plays that also look at the state, or that first send a request that must fail.
LOOK_SHARE = 0.1
WRONG_SHARE = 0.02
MAX_ERROR_SAMPLES = 20


class Mismatch(Exception):  # noqa: N818 (a finding of the soak, reported as an error)
    """A response that differs from the referee's."""


@dataclass
class SoakCounts:
    """Counts shared by the tables (guarded by `lock`)."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    calls: Counter[str] = field(default_factory=Counter)
    refusals: Counter[str] = field(default_factory=Counter)
    errors: Counter[str] = field(default_factory=Counter)
    samples: list[str] = field(default_factory=list)
    matches: int = 0
    cut_off_checks: int = 0
    """Deliberately wrong requests that failed UNAVAILABLE instead of being refused."""

    def call(self, method: str) -> None:
        """Count one call."""
        with self.lock:
            self.calls[method] += 1

    def refused(self, reason: str) -> None:
        """Count one expected refusal."""
        with self.lock:
            self.refusals[reason] += 1

    def error(self, kind: str, sample: str) -> None:
        """Count one error and keep its first samples."""
        with self.lock:
            self.errors[kind] += 1
            if len(self.samples) < MAX_ERROR_SAMPLES:
                self.samples.append(f"{kind}: {sample}"[:500])

    def cut_off_check(self) -> None:
        """Count one deliberately wrong request that met a dead worker."""
        with self.lock:
            self.cut_off_checks += 1

    def finished(self) -> None:
        """Count one match played to its end and replayed."""
        with self.lock:
            self.matches += 1


class Pacer:
    """Hands out call slots at a steady rate, shared by every table."""

    def __init__(self, rate: float, deadline: float) -> None:
        self._gap = 1.0 / rate
        self._next = time.monotonic()
        self._deadline = deadline
        self._lock = threading.Lock()

    def stop(self) -> None:
        """End the run now: every later `wait` returns False."""
        with self._lock:
            self._deadline = float("-inf")

    def wait(self) -> bool:
        """Sleep until the next slot; False once the run's time is up."""
        with self._lock:
            slot = max(self._next, time.monotonic())
            self._next = slot + self._gap
        if slot >= self._deadline:
            return False
        delay = slot - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        return True


class TimeUp(Exception):  # noqa: N818 (control flow, not an error)
    """The run's time is over; the table stops where it is."""


@dataclass
class Table:
    """One table: a channel, a random source, and the shared pacer and counts."""

    stub: Any
    rnd: random.Random
    pacer: Pacer
    counts: SoakCounts
    before_wrong: Callable[[], None] | None = None
    """Called right before each deliberately wrong request (fault injection)."""

    def call(self, method: str, request: Message) -> Any:
        """Make one paced call; return the response or raise grpc.RpcError."""
        if not self.pacer.wait():
            raise TimeUp
        self.counts.call(method)
        return getattr(self.stub, method)(request, timeout=CALL_TIMEOUT)

    def refused(self, method: str, request: Message, code: grpc.StatusCode, reason: str) -> None:
        """Make a call that must be refused with this code and reason.

        A call that fails UNAVAILABLE never reached a worker able to judge it (one was killed
        under it): that error goes on to the caller like that of any other call.
        """
        try:
            self.call(method, request)
        except grpc.RpcError as error:
            if error.code() is grpc.StatusCode.UNAVAILABLE:
                self.counts.cut_off_check()
                raise
            got = (error.code(), reason_of(error))
            if got != (code, reason):
                raise Mismatch(f"{method} refused with {got}, expected {(code, reason)}") from None
            self.counts.refused(reason)
            return
        raise Mismatch(f"{method} succeeded but must be refused with {reason}")

    def play_match(self) -> None:
        """Play one match to its end, checking every answer, then replay it."""
        rnd = self.rnd
        seed = b"" if rnd.random() < 0.125 else rnd.randbytes(rnd.randint(1, 64))
        labels = [f"soak-{rnd.randrange(1000)}", ""]
        result = self.call("NewMatch", pb.NewMatchRequest(seed=seed, labels=labels))
        seed = seed or result.state.seed
        state, events = engine.new_match(seed, (labels[0], labels[1]))
        _same_result("NewMatch", result, state, events)
        history: list[Event] = list(events)
        actions: list[Action] = []
        wire = _carried(result)
        while state.status is Status.IN_PROGRESS:
            if rnd.random() < LOOK_SHARE:
                self._look(wire, state)
            if rnd.random() < WRONG_SHARE:
                self._wrong(wire, state)
            action = random_action(state, rnd, any_spelling=True)
            request = pb.ApplyRequest(
                **wire, action=action_to_proto(action), expected_seq=state.seq
            )
            result = self.call("Apply", request)
            state, events = engine.apply(state, action)
            _same_result("Apply", result, state, events)
            history.extend(events)
            actions.append(action)
            wire = _carried(result)
        self._look(wire, state)
        replay = self.call(
            "Replay",
            pb.ReplayRequest(
                seed=seed, actions=[action_to_proto(a) for a in actions], labels=labels
            ),
        )
        _same("Replay state", replay.state, messages.state_to_proto(state))
        _same("Replay events", list(replay.events), messages.events_to_proto(history))
        if replay.HasField("refused_index"):
            raise Mismatch(f"Replay refused action {replay.refused_index} of an honest match")
        self.counts.finished()

    def _look(self, wire: dict[str, Any], state: State) -> None:
        """LegalMoves and a PlayerView of a random seat, both checked."""
        moves = self.call("LegalMoves", pb.LegalMovesRequest(**wire))
        _same(
            "LegalMoves",
            moves.legal_moves,
            messages.moves_to_proto(state.to_move, engine.legal_moves(state)),
        )
        seat = self.rnd.randrange(2)
        view = self.call("PlayerView", pb.PlayerViewRequest(**wire, seat=seat))
        _same("PlayerView", view.view, messages.view_to_proto(engine.seat_view(state, seat)))

    def _wrong(self, wire: dict[str, Any], state: State) -> None:
        """One request whose refusal is known: wrong seat, or a stale expected_seq."""
        assert state.to_move is not None
        card = engine.code(state.hands[state.to_move][0])
        if self.before_wrong is not None:
            self.before_wrong()
        if self.rnd.random() < 0.5:
            action = pb.Action(seat=1 - state.to_move, card=card)
            request = pb.ApplyRequest(**wire, action=action)
            self.refused("Apply", request, grpc.StatusCode.FAILED_PRECONDITION, "NOT_YOUR_TURN")
        else:
            action = pb.Action(seat=state.to_move, card=card)
            request = pb.ApplyRequest(**wire, action=action, expected_seq=state.seq + 1)
            self.refused(
                "Apply", request, grpc.StatusCode.ABORTED, errors.ServiceReason.SEQ_MISMATCH
            )


def _carried(result: pb.NewMatchResponse | pb.ApplyResponse) -> dict[str, Any]:
    """The state field of the next request: the sealed state when the server signs."""
    if result.HasField("signed_state"):
        if pb.State.FromString(result.signed_state.state) != result.state:
            raise Mismatch("the signed state holds another state than the plain one")
        return {"signed_state": result.signed_state}
    return {"state": result.state}


def _same(what: str, got: Any, want: Any) -> None:
    if got != want:
        raise Mismatch(f"{what} differs from the referee's")


def _same_result(
    method: str,
    result: pb.NewMatchResponse | pb.ApplyResponse,
    state: State,
    events: Sequence[Event],
) -> None:
    """A NewMatch or Apply result equals the referee's state, events (all, each seat's and the
    public ones), moves and seed commitment."""
    _same(f"{method} state", result.state, messages.state_to_proto(state))
    _same(f"{method} events", list(result.events), messages.events_to_proto(events))
    for seat in (0, 1):
        _same(
            f"{method} seat_events[{seat}]",
            list(result.seat_events[seat].events),
            messages.events_to_proto(engine.seat_events(tuple(events), seat)),
        )
    _same(
        f"{method} public_events",
        list(result.public_events),
        messages.events_to_proto(engine.public_events(tuple(events))),
    )
    _same(
        f"{method} legal_moves",
        result.legal_moves,
        messages.moves_to_proto(state.to_move, engine.legal_moves(state)),
    )
    _same(f"{method} seed_commitment", result.seed_commitment, hashlib.sha256(state.seed).digest())


@dataclass(frozen=True)
class Report:
    """What a soak run did and found."""

    target: str
    duration_seconds: float
    rate_asked: float
    tables: int
    calls: dict[str, int]
    total_calls: int
    calls_per_second: float
    matches: int
    expected_refusals: dict[str, int]
    errors: dict[str, int]
    total_errors: int
    error_samples: list[str]
    rss_kib_start: dict[int, int | None]
    rss_kib_end: dict[int, int | None]
    workers_start: list[int]
    workers_end: list[int]
    workers_killed: int = 0
    unavailable_during_kills: int = 0
    refusal_checks_cut_off: int = 0
    longest_restore_seconds: float = 0.0
    rss_samples: list[tuple[float, dict[int, int | None]]] = field(default_factory=list)
    """(seconds since the start, RSS of each worker) every `sample_every` seconds."""

    def text(self) -> str:
        """A readable summary."""
        lines = [
            f"target {self.target}, {self.tables} tables, asked {self.rate_asked:g} calls/s",
            f"{self.total_calls} calls in {self.duration_seconds:.1f} s "
            f"({self.calls_per_second:.1f}/s): "
            + ", ".join(f"{k} {v}" for k, v in sorted(self.calls.items())),
            f"matches played to the end and replayed: {self.matches}",
            "expected refusals: "
            + (", ".join(f"{k} {v}" for k, v in sorted(self.expected_refusals.items())) or "0"),
            f"errors: {self.total_errors}"
            + (
                ""
                if not self.errors
                else " (" + ", ".join(f"{k} {v}" for k, v in self.errors.items()) + ")"
            ),
        ]
        lines += [f"  {s}" for s in self.error_samples]
        if self.workers_killed:
            lines.append(
                f"workers killed: {self.workers_killed}, calls failed UNAVAILABLE meanwhile: "
                f"{self.unavailable_during_kills} ({self.refusal_checks_cut_off} of them "
                "deliberately wrong requests)"
                + (
                    f", longest wait for all workers again: {self.longest_restore_seconds:.2f} s"
                    if self.longest_restore_seconds
                    else ""
                )
            )
        for pid in sorted(set(self.rss_kib_start) | set(self.rss_kib_end)):
            start, end = self.rss_kib_start.get(pid), self.rss_kib_end.get(pid)
            lines.append(f"worker {pid}: RSS {_kib(start)} at start, {_kib(end)} at end")
        for seconds, rss in self.rss_samples:
            shown = ", ".join(f"{pid} {_kib(kib)}" for pid, kib in sorted(rss.items()))
            lines.append(f"  at {seconds / 60:5.1f} min: RSS {shown}")
        return "\n".join(lines)


def _kib(value: int | None) -> str:
    return "-" if value is None else f"{value / 1024:.1f} MiB"


def _rss(pids: Sequence[int]) -> dict[int, int | None]:
    return {pid: harness.rss_kib(pid) for pid in pids}


def run(
    target: str,
    *,
    duration: float,
    rate: float,
    tables: int,
    seed: int = 0,
    workers: Callable[[], list[int]] = list,
    kill_every: float | None = None,
    kill_before_wrong: bool = False,
    sample_every: float | None = None,
    until_matches: int | None = None,
) -> Report:
    """Soak `target` for `duration` seconds at `rate` calls/s over `tables` tables.

    With `until_matches`, the run ends as soon as that many matches were played to the end
    and replayed (`duration` is then the deadline). With `kill_every`, a worker chosen at
    random is killed (SIGKILL) that often; with `kill_before_wrong`, one is killed right
    before each deliberately wrong request. Calls that fail UNAVAILABLE are then counted
    apart, as explained by the kills, not as errors. With `sample_every`, the workers'
    memory is sampled that often (to see whether it levels off).
    """
    counts = SoakCounts()
    start_pids = workers()
    rss_start = _rss(start_pids)
    started = time.monotonic()
    pacer = Pacer(rate, started + duration)
    opened = [channels.channel(target) for _ in range(tables)]
    faults = Faults()
    done = threading.Event()
    killing = bool(kill_every) or kill_before_wrong
    victims = random.Random(seed)
    kill_lock = threading.Lock()

    def kill_one() -> None:
        """Kill a worker and send the wrong request only once it is gone."""
        with kill_lock:
            victim = _kill(workers, victims)
            if victim is None:
                return
            faults.kills += 1
            deadline = time.monotonic() + GONE_WAIT_SECONDS
            while victim in workers() and time.monotonic() < deadline:
                time.sleep(0.01)

    def table_loop(index: int, channel: grpc.Channel) -> None:
        table = Table(
            rules_pb2_grpc.RulesServiceStub(channel),  # type: ignore[no-untyped-call]
            random.Random(seed * 1000 + index),
            pacer,
            counts,
            before_wrong=kill_one if kill_before_wrong else None,
        )
        while True:
            try:
                table.play_match()
                if until_matches is not None and counts.matches >= until_matches:
                    pacer.stop()
            except TimeUp:
                return
            except (Mismatch, grpc.RpcError) as failure:
                count_failure(failure, counts, faults, kills=killing)

    threads = [
        threading.Thread(target=table_loop, args=(i, c), name=f"table-{i}")
        for i, c in enumerate(opened)
    ]
    samples: list[tuple[float, dict[int, int | None]]] = []
    if sample_every:

        def sample() -> None:
            while not done.wait(sample_every):
                samples.append((time.monotonic() - started, _rss(workers())))

        threads.append(threading.Thread(target=sample, name="memory"))
    if kill_every:
        killer = threading.Thread(
            target=_kill_workers,
            args=(workers, kill_every, done, faults, random.Random(seed)),
            name="killer",
        )
        threads.append(killer)
    for thread in threads:
        thread.start()
    for thread in threads[:tables]:
        thread.join()
    done.set()
    for thread in threads[tables:]:
        thread.join()
    elapsed = time.monotonic() - started
    for channel in opened:
        channel.close()
    end_pids = workers()
    total = sum(counts.calls.values())
    return Report(
        target=target,
        duration_seconds=elapsed,
        rate_asked=rate,
        tables=tables,
        calls=dict(counts.calls),
        total_calls=total,
        calls_per_second=total / elapsed if elapsed else 0.0,
        matches=counts.matches,
        expected_refusals=dict(counts.refusals),
        errors=dict(counts.errors),
        total_errors=sum(counts.errors.values()),
        error_samples=list(counts.samples),
        rss_kib_start=rss_start,
        rss_kib_end=_rss(sorted(set(start_pids) | set(end_pids))),
        workers_start=start_pids,
        workers_end=end_pids,
        workers_killed=faults.kills,
        unavailable_during_kills=faults.unavailable,
        refusal_checks_cut_off=counts.cut_off_checks,
        longest_restore_seconds=faults.longest_restore,
        rss_samples=samples,
    )


@dataclass
class Faults:
    """Workers killed, calls they made fail, and the longest wait for a full set again."""

    kills: int = 0
    unavailable: int = 0
    longest_restore: float = 0.0


RESTORE_WAIT_SECONDS = 60.0
# How long a killed worker may take to leave the process table before the call goes anyway.
GONE_WAIT_SECONDS = 5.0


def count_failure(
    failure: Mismatch | grpc.RpcError, counts: SoakCounts, faults: Faults, *, kills: bool
) -> None:
    """Count a match cut short: UNAVAILABLE apart while the soak kills workers, else an error."""
    if isinstance(failure, Mismatch):
        counts.error("MISMATCH", str(failure))
        return
    code = failure.code()
    if kills and code is grpc.StatusCode.UNAVAILABLE:
        with counts.lock:
            faults.unavailable += 1
    else:
        counts.error(code.name, str(failure.details()))


def _kill(workers: Callable[[], list[int]], rnd: random.Random) -> int | None:
    """SIGKILL one live worker chosen at random; return its pid (None: none was alive)."""
    alive = workers()
    if not alive:
        return None
    victim = rnd.choice(alive)
    with contextlib.suppress(ProcessLookupError):
        os.kill(victim, signal.SIGKILL)
    return victim


def _kill_workers(
    workers: Callable[[], list[int]],
    every: float,
    done: threading.Event,
    faults: Faults,
    rnd: random.Random,
) -> None:
    """Every `every` seconds kill one worker, then time how long until the set is whole again."""
    wanted = len(workers())
    while not done.wait(every):
        victim = _kill(workers, rnd)
        if victim is None:
            return
        killed_at = time.monotonic()
        faults.kills += 1
        while time.monotonic() - killed_at < RESTORE_WAIT_SECONDS:
            now = workers()
            if len(now) >= wanted and victim not in now:
                break
            time.sleep(0.05)
        faults.longest_restore = max(faults.longest_restore, time.monotonic() - killed_at)


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: soak a server (started here unless --target is given); 1 on any error."""
    parser = argparse.ArgumentParser(
        prog="python -m testkit.soak", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--target", help="host:port of a running server (loopback only)")
    parser.add_argument("--server-pid", type=int, help="supervisor pid of --target, for memory")
    parser.add_argument("--workers", type=int, default=2, help="workers of the started server")
    parser.add_argument("--duration", type=float, default=60.0, help="seconds (default 60)")
    parser.add_argument("--rate", type=float, default=100.0, help="calls per second (default 100)")
    parser.add_argument("--tables", type=int, default=4, help="concurrent matches (default 4)")
    parser.add_argument("--seed", type=int, default=0, help="random seed of the tables")
    parser.add_argument("--json", help="also write the report as JSON to this file")
    parser.add_argument(
        "--signing", action="store_true", help="start the server with a fresh signing key"
    )
    parser.add_argument(
        "--kill-every", type=float, help="SIGKILL a random worker this often (seconds)"
    )
    parser.add_argument(
        "--kill-before-wrong",
        action="store_true",
        help="SIGKILL a random worker right before each deliberately wrong request",
    )
    parser.add_argument(
        "--metrics", action="store_true", help="start the server with /metrics on, its default"
    )
    parser.add_argument(
        "--sample-every", type=float, help="sample the workers' memory this often (seconds)"
    )
    args = parser.parse_args(argv)
    served = None
    if args.target:
        host = args.target.rpartition(":")[0].strip("[]")
        if host not in ("127.0.0.1", "localhost", "::1"):
            parser.error("--target must be a loopback address")
        target = args.target
        pid = args.server_pid
        workers = (lambda: harness.worker_pids(pid) or [pid]) if pid else list
    else:
        env = {}
        if args.signing:
            env["BASRA_SIGNING_KEYS"] = "soak:" + base64.b64encode(os.urandom(32)).decode()
        served = harness.start(
            ["--workers", str(args.workers)], env=env, keep_calls=False, metrics=args.metrics
        )
        target = served.target
        workers = served.ready_workers
    try:
        report = run(
            target,
            duration=args.duration,
            rate=args.rate,
            tables=args.tables,
            seed=args.seed,
            workers=workers,
            kill_every=args.kill_every,
            kill_before_wrong=args.kill_before_wrong,
            sample_every=args.sample_every,
        )
    finally:
        if served is not None:
            served.stop()
    print(report.text())
    if args.json:
        with open(args.json, "w") as out:
            json.dump(asdict(report), out, indent=2)
    return 1 if report.total_errors else 0


if __name__ == "__main__":
    sys.exit(main())
