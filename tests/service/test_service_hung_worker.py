"""A hung worker is found and replaced: SIGSTOP on a worker of `basra-rules serve --workers 2`
while calls run, on loopback; the probes' verdicts (service/worker_probes.py) in process: an
answer other than SERVING, a silent server, a work pool that holds calls and moves none.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from concurrent import futures
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest
from basra.v1 import rules_pb2 as pb
from basra.v1 import rules_pb2_grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from service.config import Config, ConfigError, load
from service.health_status import HEALTH_NAMES, HealthStatuses
from service.logs import make_logger
from service.outcomes import Facts
from service.server import SYNC_THREADS, make_handlers
from service.worker_probes import PoolWatch, WorkerProbes, close_listener, listening_inodes
from testkit import harness
from testkit.calls import scrape, start_server
from testkit.harness import ServedProcess
from testkit.hung_worker import CUT_SECONDS, FAST_FAILURE, RECONNECT_WINDOW, REPLACED_WITHIN

# Several channels, each its own connection, so that the kernel gives both workers some.
CHANNELS = 8
CALL_DEADLINE = 2.0
# How soon the new worker serves depends on the machine's load (an interpreter's start), so
# it is printed; the callers run on this long after.
RUN_AFTER_REPLACEMENT = 3.0
# The flood: more callers than the admission bound lets in, for several probe timeouts.
FLOOD_THREADS = 80
FLOOD_SECONDS = 8.0
# Connections made once a listener left the port: with two in the group, each would reach the
# one that left with a chance of one half, were it still there.
CONNECTIONS = 40
# At the least, OK calls a second after the kill (an idle loopback run makes hundreds).
CALLS_FLOOR = 20


@dataclass(frozen=True, slots=True)
class Call:
    """One call: when it started and ended (monotonic) and its code."""

    start: float
    end: float
    code: grpc.StatusCode


class Callers:
    """Threads calling NewMatch back to back, each on a channel (a connection) of its own."""

    def __init__(self, target: str) -> None:
        self.calls: list[Call] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        # A local subchannel pool: each channel makes its own connection.
        self.channels = [
            grpc.insecure_channel(target, options=[("grpc.use_local_subchannel_pool", 1)])
            for _ in range(CHANNELS)
        ]
        self.threads = [
            threading.Thread(target=self._run, args=(n, channel), daemon=True)
            for n, channel in enumerate(self.channels)
        ]

    def _run(self, n: int, channel: grpc.Channel) -> None:
        stub = rules_pb2_grpc.RulesServiceStub(channel)  # type: ignore[no-untyped-call]
        made = 0
        while not self._stop.is_set():
            request = pb.NewMatchRequest(seed=f"hung-{n}-{made}".encode(), labels=["a", "b"])
            start = time.monotonic()
            try:
                stub.NewMatch(request, timeout=CALL_DEADLINE)
                code = grpc.StatusCode.OK
            except grpc.RpcError as error:
                code = error.code()
            with self._lock:
                self.calls.append(Call(start, time.monotonic(), code))
            made += 1

    def start(self) -> None:
        """Start calling."""
        for thread in self.threads:
            thread.start()

    def stop(self) -> None:
        """Stop calling and close the channels."""
        self._stop.set()
        for thread in self.threads:
            thread.join(CALL_DEADLINE + 5)
        for channel in self.channels:
            channel.close()

    def since(self, moment: float) -> list[Call]:
        """The calls started at or after `moment`."""
        with self._lock:
            return [call for call in self.calls if call.start >= moment]


def _busiest_worker(served: ServedProcess, workers: list[int]) -> int:
    """The worker that served the most calls so far, by the workers' own log lines."""
    served_by = Counter(
        line.get("worker") for line in served.log_lines() if line.get("event") == "rpc"
    )
    return max(workers, key=lambda pid: served_by[pid])


def test_a_stopped_worker_is_replaced_and_its_callers_move_on() -> None:
    """SIGSTOP on one of two workers under calls: within 5 s it is killed (reason hung) and
    replaced, no call started after that waits out its deadline, and calls flowed throughout."""
    served = harness.start(["--workers", "2"], health=True, metrics=True)
    callers = Callers(served.target)
    victim = 0
    try:
        deadline = time.monotonic() + 30
        while len(served.ready_workers()) < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        workers = served.ready_workers()
        assert len(workers) == 2
        callers.start()
        time.sleep(1.5)
        victim = _busiest_worker(served, workers)
        stopped = time.monotonic()
        os.kill(victim, signal.SIGSTOP)

        gone = replaced = 0.0
        while time.monotonic() - stopped < REPLACED_WITHIN + 5:
            now = time.monotonic()
            live = served.workers()
            if not gone and victim not in live:
                gone = now
            if gone and len(live) == 2:
                replaced = now
                break
            time.sleep(0.02)
        assert gone, f"the stopped worker {victim} was never killed: {served.log_text()[-2000:]}"
        assert replaced, f"no worker replaced {victim}: {served.log_text()[-2000:]}"
        new = served.wait_for("worker replaced", timeout=harness.START_SECONDS, replaced=victim)
        serving = time.monotonic()
        time.sleep(RUN_AFTER_REPLACEMENT)
        callers.stop()

        hung = served.find("worker hung, killing and replacing it", pid=victim)
        assert len(hung) == 1, served.log_text()[-2000:]
        assert new["reason"] == "hung" and new["pid"] in served.ready_workers()
        samples = scrape(served)
        assert samples['basra_workers_replaced_total{reason="hung"}'] == 1
        assert samples['basra_workers_replaced_total{reason="died"}'] == 0

        calls = callers.since(0.0)
        during = [c for c in calls if c.start < gone and c.end > stopped]
        after = callers.since(gone)
        late = [c for c in after if c.code == grpc.StatusCode.DEADLINE_EXCEEDED]
        slow_failures = [
            c for c in after if c.code != grpc.StatusCode.OK and c.end - c.start > FAST_FAILURE
        ]
        ok_after = [c for c in after if c.code == grpc.StatusCode.OK]
        closed = hung[0]["listener_closed"]
        settled = callers.since(gone + (CUT_SECONDS if closed else RECONNECT_WINDOW))
        last_failure = max((c.end for c in after if c.code != grpc.StatusCode.OK), default=gone)
        failed = Counter(c.code.name for c in calls if c.code != grpc.StatusCode.OK)
        print(
            f"\nstopped worker {victim}: killed after {gone - stopped:.2f} s (probe: "
            f"{hung[0]['probe']}, unanswered {hung[0]['unanswered_seconds']} s, listener "
            f"closed first: {closed}), a new worker "
            f"started after {replaced - stopped:.2f} s and serving after "
            f"{serving - stopped:.2f} s; calls {len(calls)}, failed {dict(failed)}; started "
            f"after the kill: {len(after)} calls, {len(ok_after)} OK, {len(late)} past their "
            f"deadline, the last failure {last_failure - gone:.2f} s after the kill"
        )
        assert replaced - stopped <= REPLACED_WITHIN
        # The victim had connections: calls on them waited while it was stopped.
        assert any(c.code != grpc.StatusCode.OK or c.end - c.start > 1.0 for c in during)
        assert late == [] and slow_failures == []
        assert len(ok_after) >= CALLS_FLOOR * (serving + RUN_AFTER_REPLACEMENT - gone)
        assert settled and all(c.code == grpc.StatusCode.OK for c in settled)
    finally:
        callers.stop()
        if victim:
            for signum in (signal.SIGCONT, signal.SIGKILL):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(victim, signum)
        served.kill()


def test_the_probe_settings_are_bounded() -> None:
    """A timeout of 0 would find every worker hung: at least 0.1 s; probes at most a minute
    apart, 0 turning them off."""
    assert load(["--worker-probe-timeout-seconds", "0.1"], {}).worker_probe_timeout_seconds == 0.1
    assert load(["--worker-probe-seconds", "0"], {}).worker_probe_seconds == 0
    for flags in (["--worker-probe-timeout-seconds", "0"], ["--worker-probe-seconds", "61"]):
        with pytest.raises(ConfigError, match=flags[0]):
            load(flags, {})


def _probe_until(probes: WorkerProbes, seconds: float) -> list[Any]:
    """Send due probes for up to `seconds`; return the first verdict of a hung worker."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        now = time.monotonic()
        found = probes.hung(now)
        if found:
            return found
        probes.send_due(now)
        time.sleep(0.05)
    return []


class _Refusing(HealthStatuses):
    """Health whose Check is refused (as gRPC core refuses calls under overload) when asked."""

    refuse = False

    def Check(self, request: Any, context: Any) -> Any:  # noqa: N802
        """Refused RESOURCE_EXHAUSTED while `refuse`, else answered."""
        if self.refuse:
            context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, "refused")
        return super().Check(request, context)


def test_the_probes_find_a_worker_that_says_not_serving_or_answers_nothing(
    tmp_path: Path,
) -> None:
    """A worker answering SERVING is never hung; NOT_SERVING is hung at once; refusals count
    once no SERVING answer came for the timeout; a server that stopped answering is hung once
    its probe has waited the timeout."""
    probes = WorkerProbes(str(tmp_path), interval=0.1, timeout=0.5)
    health = _Refusing()
    server = grpc.server(futures.ThreadPoolExecutor(2))
    health_pb2_grpc.add_HealthServicer_to_server(health, server)
    assert server.add_insecure_port(probes.address(0))
    for name in HEALTH_NAMES:
        health.set(name, health_pb2.HealthCheckResponse.SERVING)
    server.start()
    try:
        probes.watch(0, pid=4321)
        assert _probe_until(probes, 1.5) == []
        health.set("", health_pb2.HealthCheckResponse.NOT_SERVING)
        (hung,) = _probe_until(probes, 1.5)
        assert (hung.slot, hung.pid, hung.failure) == (0, 4321, "status 2")
        health.set("", health_pb2.HealthCheckResponse.SERVING)
        probes.watch(0, pid=4322)  # a new worker in the slot: judged afresh
        assert _probe_until(probes, 1.0) == []
        health.refuse = True
        refused = time.monotonic()
        (hung,) = _probe_until(probes, 3.0)
        assert hung.failure == "RESOURCE_EXHAUSTED" and time.monotonic() - refused >= 0.4
        health.refuse = False
        probes.watch(0, pid=4322)
        assert _probe_until(probes, 1.0) == []
        server.stop(0).wait()
        started = time.monotonic()
        (hung,) = _probe_until(probes, 3.0)
        # wait_for_ready: a refused connection is no verdict; the probe's deadline is.
        assert hung.failure == "DEADLINE_EXCEEDED" and hung.pid == 4322
        assert 0.4 <= time.monotonic() - started <= 2.0
    finally:
        probes.close()
        server.stop(0)


class _Gate:
    """Handlers whose NewMatch waits until the gate opens."""

    def __init__(self, handlers: Any) -> None:
        self._handlers = handlers
        self.opened = threading.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._handlers, name)

    def new_match(self, request: pb.NewMatchRequest, facts: Facts) -> bytes:
        """Wait for the gate, then start the match."""
        assert self.opened.wait(30)
        result: bytes = self._handlers.new_match(request, facts)
        return result


def test_a_work_pool_that_holds_calls_and_moves_none_says_not_serving() -> None:
    """Every thread of a worker's pool held up: its health turns NOT_SERVING after the stall,
    on the same server the supervisor probes, and SERVING again once calls move."""
    config = Config()
    gate = _Gate(make_handlers(config, None))
    handlers: Any = gate
    server = start_server(config, handlers=handlers)
    built = server.built
    statuses = []

    def set_serving(serving: bool) -> None:
        statuses.append(serving)
        for name in HEALTH_NAMES:
            built.health.set(
                name,
                health_pb2.HealthCheckResponse.SERVING
                if serving
                else health_pb2.HealthCheckResponse.NOT_SERVING,
            )

    pool, bound = built.admission.pool, built.admission.admission
    watch = PoolWatch(
        lambda: bound.held, lambda: pool.moved, set_serving, make_logger("error"), 0.5
    )
    check = health_pb2_grpc.HealthStub(server.channel).Check
    stub = rules_pb2_grpc.RulesServiceStub(server.channel)  # type: ignore[no-untyped-call]
    watch.start()
    try:
        time.sleep(1.0)  # idle: nothing held, never wedged
        assert statuses == [] and not watch.wedged
        held = [
            stub.NewMatch.future(pb.NewMatchRequest(seed=bytes([n]) * 8), timeout=30)
            for n in range(SYNC_THREADS + 2)
        ]
        deadline = time.monotonic() + 5
        while not watch.wedged and time.monotonic() < deadline:
            time.sleep(0.05)
        assert watch.wedged and statuses == [False]
        answer = check(health_pb2.HealthCheckRequest(), timeout=5)
        assert answer.status == health_pb2.HealthCheckResponse.NOT_SERVING
        gate.opened.set()
        assert all(call.result(timeout=10).HasField("state") for call in held)
        deadline = time.monotonic() + 5
        while watch.wedged and time.monotonic() < deadline:
            time.sleep(0.05)
        assert statuses == [False, True]
        answer = check(health_pb2.HealthCheckRequest(), timeout=5)
        assert answer.status == health_pb2.HealthCheckResponse.SERVING
    finally:
        watch.stop()
        gate.opened.set()
        server.close()


def _health(target: str) -> int | None:
    """The health port's answer for the whole server now (None: no answer)."""
    with grpc.insecure_channel(target) as channel:
        try:
            reply = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(), timeout=1.0
            )
        except grpc.RpcError:
            return None
    return int(reply.status)


def test_a_lone_hung_worker_turns_the_health_port_not_serving_until_replaced() -> None:
    """--workers 1: the supervisor is there all the same; its one worker stopped, the health
    port says SERVING until the probe finds it, NOT_SERVING once it is killed, and SERVING
    again when the new worker serves."""
    served = harness.start(["--workers", "1"], health=True)
    victim = 0
    try:
        (victim,) = served.ready_workers()
        assert _health(served.health_target) == health_pb2.HealthCheckResponse.SERVING
        serving, not_serving = (
            health_pb2.HealthCheckResponse.SERVING,
            health_pb2.HealthCheckResponse.NOT_SERVING,
        )
        os.kill(victim, signal.SIGSTOP)
        seen: list[int | None] = []
        deadline = time.monotonic() + REPLACED_WITHIN + harness.START_SECONDS
        while time.monotonic() < deadline:
            status = _health(served.health_target)
            if not seen or seen[-1] != status:
                seen.append(status)
            if served.find("worker replaced", replaced=victim) and seen[-1] == serving:
                break
            time.sleep(0.05)
        assert seen == [serving, not_serving, serving], served.log_text()[-2000:]
        assert victim not in served.workers() and len(served.ready_workers()) == 1
        assert served.find("worker hung, killing and replacing it", pid=victim)
    finally:
        if victim:
            for signum in (signal.SIGCONT, signal.SIGKILL):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(victim, signum)
        served.kill()


def test_a_worker_flooded_with_the_costliest_calls_is_not_taken_for_hung() -> None:
    """--workers 1 held full (the admission bound reached) by SuggestMove calls at the largest
    budget the server allows, for several probe timeouts: its probes are answered, nothing is
    replaced, and the calls flowed."""
    served = harness.start(["--workers", "1"], health=True, metrics=True, keep_calls=False)
    config = Config()
    budget = pb.BotWork(deals=config.bot_max_deals, nodes=config.bot_max_nodes)
    stop = threading.Event()
    answered: list[grpc.StatusCode] = []
    lock = threading.Lock()

    def flood(channel: grpc.Channel, request: pb.SuggestMoveRequest) -> None:
        stub = rules_pb2_grpc.RulesServiceStub(channel)  # type: ignore[no-untyped-call]
        while not stop.is_set():
            try:
                stub.SuggestMove(request, timeout=10)
                code = grpc.StatusCode.OK
            except grpc.RpcError as error:
                code = error.code()
            with lock:
                answered.append(code)

    checks: list[float] = []
    check_failures: list[str] = []

    def check() -> None:
        # The probe's path on the gRPC port (the supervisor's unix socket reaches the same
        # server): how long its answers take, for the figures.
        with grpc.insecure_channel(served.target) as own:
            health = health_pb2_grpc.HealthStub(own)
            while not stop.wait(0.1):
                start = time.monotonic()
                try:
                    health.Check(health_pb2.HealthCheckRequest(), timeout=5)
                    checks.append(time.monotonic() - start)
                except grpc.RpcError as error:
                    check_failures.append(error.code().name)

    channel = grpc.insecure_channel(served.target)
    threads: list[threading.Thread] = [threading.Thread(target=check, daemon=True)]
    try:
        stub = rules_pb2_grpc.RulesServiceStub(channel)  # type: ignore[no-untyped-call]
        match = stub.NewMatch(pb.NewMatchRequest(seed=b"flood", labels=["a", "b"]), timeout=10)
        request = pb.SuggestMoveRequest(
            state=match.state, seat=match.legal_moves.seat, budget=budget
        )
        threads += [
            threading.Thread(target=flood, args=(channel, request), daemon=True)
            for _ in range(FLOOD_THREADS)
        ]
        for thread in threads:
            thread.start()
        time.sleep(FLOOD_SECONDS)
        stop.set()
        for thread in threads:
            thread.join(15)
        codes = Counter(code.name for code in answered)
        samples = scrape(served)
        checks.sort()
        print(
            f"\nflood of {FLOOD_SECONDS} s on one worker: {dict(codes)}; health Checks on the "
            f"gRPC port: {len(checks)} answered, median {checks[len(checks) // 2]:.3f} s, "
            f"max {checks[-1]:.3f} s, failed {check_failures}"
        )
        assert served.find("worker hung, killing and replacing it") == []
        assert samples['basra_workers_replaced_total{reason="hung"}'] == 0
        assert served.find("work pool wedged") == []
        assert codes["OK"] >= FLOOD_SECONDS  # about one call a second at the least
        assert codes["RESOURCE_EXHAUSTED"] > 0  # the worker was held full: it shed calls
    finally:
        stop.set()
        for thread in threads:
            thread.join(15)
        channel.close()
        served.kill()


def test_a_listener_taken_out_of_the_port_gets_no_new_connection() -> None:
    """close_listener: the other process's listener leaves the SO_REUSEPORT group (it no longer
    listens), and every new connection reaches the listener that stays."""
    staying = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    staying.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    staying.bind(("127.0.0.1", 0))
    staying.listen(128)
    port = staying.getsockname()[1]
    other = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import socket, sys, time\n"
            "s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)\n"
            "s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)\n"
            f"s.bind(('127.0.0.1', {port}))\n"
            "s.listen(128)\n"
            "print('listening', flush=True)\n"
            "time.sleep(60)\n",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert other.stdout is not None and other.stdout.readline() == "listening\n"
        assert len(listening_inodes(other.pid, port)) == 2
        assert close_listener(other.pid, port) is None
        assert len(listening_inodes(other.pid, port)) == 1
        staying.settimeout(5)
        for _ in range(CONNECTIONS):
            with socket.create_connection(("127.0.0.1", port), timeout=5):
                accepted, _ = staying.accept()
                accepted.close()
        assert close_listener(other.pid, port) == "no listening socket found"
    finally:
        other.kill()
        other.wait(10)
        staying.close()
