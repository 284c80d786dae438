"""The supervisor's probes of its workers, each through the worker's own gRPC server, and the
count of workers it replaced.

A worker that is alive but stuck (stopped, its interpreter or gRPC's polling thread wedged)
keeps its share of the gRPC port: the kernel goes on handing it connections whose calls wait
out their deadlines. So the supervisor asks each worker a health Check every
--worker-probe-seconds over a unix socket that the worker's server also listens on (in a
directory of the supervisor's, mode 0700: the socket skips TLS, so only the server's own user
may reach it). The Check takes the path a call takes: gRPC core, the polling thread, the
interceptors, a thread of the worker and its interpreter. A worker with a probe unanswered for
--worker-probe-timeout-seconds is hung; workers.py takes its listener out of the port
(`close_listener`), kills it and replaces it. Probes run on their
own lane (service/admission.py), so they say nothing of the work pool: a worker whose pool
holds calls and starts or ends none (every thread wedged) answers NOT_SERVING (`PoolWatch`),
which the parent counts as hung too. What it all means for callers: docs/service.md, "Worker
model".
"""

from __future__ import annotations

import ctypes
import os
import socket
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from prometheus_client import Metric
from prometheus_client.core import CounterMetricFamily
from prometheus_client.registry import Collector

# A worker whose work pool holds calls but has started or ended none for this long is wedged.
# Alone, the costliest call the limits allow (SuggestMove at --bot-max-deals/--bot-max-nodes)
# takes a few hundred milliseconds (docs/bot.md), and the pool's threads share one interpreter,
# so a pool that moves starts or ends a call within a few seconds even when every thread runs
# such a call.
POOL_STALL_SECONDS = 10.0
# How often a worker looks at its pool.
POOL_LOOK_SECONDS = 1.0
# Why the supervisor replaced a worker: its process ended, or it stopped answering its probes.
REPLACED_REASONS = ("died", "hung")
_SERVING = health_pb2.HealthCheckResponse.SERVING


# The longest path a unix socket may have (sun_path's 108 bytes, less the terminating NUL).
_SOCKET_PATH_MAX = 107


def socket_directory() -> str:
    """A new directory for the workers' probe sockets, mode 0700 (mkdtemp's: the sockets skip
    TLS, so only this user may reach them): under TMPDIR, or under /tmp when TMPDIR's path is
    too long for a socket's (gRPC refuses the port, and the worker would never start)."""
    directory = tempfile.mkdtemp(prefix="basra-probes-")
    if len(os.path.join(directory, "worker-1000.sock")) > _SOCKET_PATH_MAX:
        os.rmdir(directory)
        directory = tempfile.mkdtemp(prefix="basra-probes-", dir="/tmp")
    return directory


# pidfd_getfd(2): the same number on every architecture (the syscall table shared since 5.1).
_PIDFD_GETFD = 438
_TCP_LISTEN = "0A"


def listening_inodes(pid: int, port: int) -> set[str]:
    """The inodes of the TCP sockets listening on `port` in the network namespace of `pid`."""
    found = set()
    for table in ("tcp", "tcp6"):
        try:
            with open(f"/proc/{pid}/net/{table}", encoding="ascii") as listing:
                lines = listing.read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if fields[3] == _TCP_LISTEN and int(fields[1].rsplit(":", 1)[1], 16) == port:
                found.add(fields[9])
    return found


def close_listener(pid: int, port: int) -> str | None:
    """Take the listening socket of worker `pid` on `port` out of the port's group, so that no
    new connection lands in a queue that nobody will take (a killed worker's listener goes
    only after its connections are reset, and the callers that reconnect at once would reach
    it): shutdown() of a copy of its descriptor, had by pidfd_getfd. Return why it could not
    be done (no such syscall, no permission: a seccomp profile without it), None when done."""
    inodes = {f"socket:[{inode}]" for inode in listening_inodes(pid, port)}
    try:
        fds = [
            int(entry)
            for entry in os.listdir(f"/proc/{pid}/fd")
            if os.readlink(f"/proc/{pid}/fd/{entry}") in inodes
        ]
    except OSError as error:
        return f"cannot read its descriptors: {error.strerror}"
    if not fds:
        return "no listening socket found"
    libc = ctypes.CDLL(None, use_errno=True)
    try:
        pidfd = os.pidfd_open(pid)
    except OSError as error:
        return f"pidfd_open: {error.strerror}"
    try:
        for target in fds:
            copy = libc.syscall(_PIDFD_GETFD, pidfd, target, 0)
            if copy < 0:
                return f"pidfd_getfd: {os.strerror(ctypes.get_errno())}"
            with socket.socket(fileno=copy) as listener:
                listener.shutdown(socket.SHUT_RDWR)
    finally:
        os.close(pidfd)
    return None


class ReplacedWorkers(Collector):
    """basra_workers_replaced_total{reason}: the supervisor's own count, served from its
    registry (a collector, not a Counter: the supervisor writes no multiprocess file)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts = dict.fromkeys(REPLACED_REASONS, 0)

    def count(self, reason: str) -> None:
        """One more worker replaced for `reason`."""
        with self._lock:
            self._counts[reason] += 1

    def collect(self) -> list[Metric]:
        """The counter, every reason shown from the start."""
        family = CounterMetricFamily(
            "basra_workers_replaced",
            "Workers the supervisor killed or found dead and started again, by reason "
            '(reason="hung": no answer to its probe within the timeout).',
            labels=("reason",),
        )
        with self._lock:
            for reason, count in self._counts.items():
                family.add_metric([reason], count)
        return [family]


@dataclass(slots=True)
class _Probed:
    """One worker's probe channel and the state of its latest probe."""

    pid: int
    channel: grpc.Channel
    check: Any
    sent: float = 0.0
    """When the latest probe was sent (monotonic; 0: none yet)."""
    pending: bool = False
    answered: float = 0.0
    """When the latest SERVING answer came (monotonic)."""
    failure: str | None = None
    """Why the latest probe failed (None: it did not)."""


@dataclass(frozen=True, slots=True)
class Hung:
    """A worker found hung: its slot and pid, what its probe met, how long it went unanswered."""

    slot: int
    pid: int
    failure: str
    silent_seconds: float


class WorkerProbes:
    """Health Checks sent to each serving worker, one at a time per worker, without blocking."""

    def __init__(self, directory: str, interval: float, timeout: float) -> None:
        self.directory = directory
        self.interval = interval
        self.timeout = timeout
        self._lock = threading.Lock()
        self._probed: dict[int, _Probed] = {}

    def address(self, slot: int) -> str:
        """The unix socket the worker in `slot` also serves on (gRPC removes a stale one)."""
        return "unix:" + os.path.join(self.directory, f"worker-{slot}.sock")

    def watch(self, slot: int, pid: int) -> None:
        """Start probing the worker now serving in `slot`."""
        self.forget(slot)
        channel = grpc.insecure_channel(self.address(slot))
        check = health_pb2_grpc.HealthStub(channel).Check
        with self._lock:
            self._probed[slot] = _Probed(pid, channel, check, answered=time.monotonic())

    def forget(self, slot: int) -> None:
        """Stop probing `slot` (its worker is gone); its probe's answer, if any, is dropped."""
        with self._lock:
            probed = self._probed.pop(slot, None)
        if probed is not None:
            probed.channel.close()

    def send_due(self, now: float) -> None:
        """Send each worker whose last probe was answered at least `interval` ago a new one."""
        with self._lock:
            due = [
                probed
                for probed in self._probed.values()
                if not probed.pending and now - probed.sent >= self.interval
            ]
            for probed in due:
                probed.sent, probed.pending = now, True
        for probed in due:
            # wait_for_ready: a connection still being made is no failure; only the deadline
            # (or an answer other than SERVING) is.
            future = probed.check.future(
                health_pb2.HealthCheckRequest(), timeout=self.timeout, wait_for_ready=True
            )
            future.add_done_callback(lambda done, p=probed: self._answered(p, done))

    def _answered(self, probed: _Probed, done: Any) -> None:
        """Record a probe's outcome (in a gRPC thread)."""
        try:
            status = done.result().status
            failure = None if status == _SERVING else f"status {status}"
        except grpc.RpcError as error:
            failure = error.code().name
        except Exception as error:  # a cancelled future (channel closed): a forgotten worker
            failure = type(error).__name__
        with self._lock:
            probed.pending = False
            probed.failure = failure
            if failure is None:
                probed.answered = time.monotonic()

    def hung(self, now: float) -> list[Hung]:
        """The workers whose probe went unanswered past the timeout or was answered
        NOT_SERVING, or whose probes have failed otherwise (gRPC core refusing it under
        overload, say: the worker answered) for as long as the timeout."""
        found = []
        with self._lock:
            for slot, probed in self._probed.items():
                if probed.pending and now - probed.sent >= self.timeout:
                    failure = "DEADLINE_EXCEEDED"
                elif probed.pending or probed.failure is None:
                    continue
                elif probed.failure.startswith("status ") or (
                    now - probed.answered >= self.timeout
                ):
                    failure = probed.failure
                else:
                    continue
                found.append(Hung(slot, probed.pid, failure, round(now - probed.answered, 3)))
        return found

    def close(self) -> None:
        """Stop probing every worker."""
        for slot in list(self._probed):
            self.forget(slot)


class PoolWatch:
    """In a worker: its health NOT_SERVING while its work pool holds calls and moves none,
    SERVING again once it moves (a status the graceful stop set is never undone)."""

    def __init__(
        self,
        held: Callable[[], int],
        moved: Callable[[], float],
        set_serving: Callable[[bool], None],
        logger: Any,
        stall_seconds: float = POOL_STALL_SECONDS,
    ) -> None:
        self._held, self._moved, self._set_serving = held, moved, set_serving
        self._logger = logger
        self.stall_seconds = stall_seconds
        self.wedged = False
        self._seen: float | None = None
        self._still_since = time.monotonic()
        """Since when the pool has held calls with no call started or ended (as seen here:
        an idle pool's last move is old when a call arrives, and the call's start is near)."""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="pool-watch", daemon=True)

    def start(self) -> None:
        """Look at the pool every POOL_LOOK_SECONDS from now on."""
        self._thread.start()

    def stop(self) -> None:
        """Stop looking."""
        self._stop.set()

    def look(self, now: float) -> None:
        """Judge the pool now; say so in the health statuses when the judgement changes."""
        held, moved = self._held(), self._moved()
        if held == 0 or moved != self._seen:
            self._seen, self._still_since = moved, now
        still = now - self._still_since
        wedged = still >= self.stall_seconds
        if wedged == self.wedged:
            return
        self.wedged = wedged
        self._set_serving(not wedged)
        if wedged:
            self._logger.error("work pool wedged", held=held, still_seconds=round(still, 3))
        else:
            self._logger.warning("work pool moves again")

    def _run(self) -> None:
        while not self._stop.wait(min(POOL_LOOK_SECONDS, self.stall_seconds)):
            self.look(time.monotonic())
