"""Admission control: a bound on the calls a worker holds, and lanes that keep probes apart.

What the bound does, the refusal past it (OVERLOADED with a retry delay), the lanes of probes
and refusals and how refused calls are counted: docs/service.md, "Overload" (measurements:
docs/capacity.md). Here: `Admission`, the bound and the running stay behind the retry delay;
`WorkPool`, the thread pool that holds admitted calls; `AdmissionInterceptor`, which decides
as each call arrives, in grpc's polling thread.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from concurrent import futures
from dataclasses import dataclass, field, replace
from time import perf_counter
from typing import Any

import grpc

from service import errors, grpc_surface, outcomes
from service.errors import Refusal, ServiceReason
from service.interceptors import CallObserver, HandlerCache, Metadata, MethodObserver
from service.outcomes import Ended
from service.running_mean import RunningMean
from wire.contract import PREFIX

# Unary health methods answered on the probe lane (Watch streams stay on the work pool: a
# blocking stream would hold the lane's thread for as long as the client watches).
PROBE_METHODS = ("/grpc.health.v1.Health/Check", "/grpc.health.v1.Health/List")
# Health Watch (client-side health checking: a stream per client subchannel) is non-blocking:
# grpc's call of it returns at once and its answers go out through a callback, so it also runs
# on the probe lane, and never holds a work thread or a place under the bound.
WATCH_METHOD = "/grpc.health.v1.Health/Watch"
PROBE_THREADS = 1
# The retry delay: the running mean time an admitted call stays, jittered by +-50 %, within
# these bounds (seconds).
MIN_RETRY_DELAY = 0.05
MAX_RETRY_DELAY = 2.0
FIRST_RETRY_DELAY = 0.1
JITTER = 0.5
# Weight of the newest call in the running mean of the time a call stays.
STAY_WEIGHT = 0.05
# While shedding, one warning line per this many seconds says how much (calls are not logged).
SHED_LOG_SECONDS = 10.0

Handler = Any
Context = Any


@dataclass
class Admission:
    """The calls one worker holds against its bound, and the running mean of their stay."""

    limit: int
    """Most calls held at once; 0: no bound."""
    held: int = 0
    stay: RunningMean = field(default_factory=lambda: RunningMean(STAY_WEIGHT, FIRST_RETRY_DELAY))
    """Seconds an admitted call stays, from its admission to its end."""
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _shed_since_log: int = 0
    _last_log: float = 0.0
    _admitted: int = 0
    """1 from a call's admission to its enter(): its place, which a batch's take() must not
    fill meanwhile. grpc's one polling thread admits and submits one call at a time, so a
    call arriving finds the one before it entered (or never submitted): the mark is set, not
    added to, and a call admitted but never submitted costs nothing past the next arrival."""

    def full(self) -> bool:
        """Whether a call arriving now must be refused."""
        return 0 < self.limit <= self.held

    def admit(self) -> bool:
        """Whether a call arriving now may come in; if so, keep its place until it enters
        (decided and kept under the lock a batch's take() holds, so a call and a batch never
        both pass when together they are past the bound)."""
        with self._lock:
            if self.full():
                return False
            self._admitted = 1
            return True

    def enter(self) -> None:
        """Count an admitted call as held (the place admit() kept becomes its own)."""
        with self._lock:
            self.held += 1
            self._admitted = 0

    def enter_nothing(self) -> None:
        """Give back the place admit() kept for a call that will not enter (no such method)."""
        with self._lock:
            self._admitted = 0

    def leave(self, stayed: float) -> None:
        """Count a held call as done after `stayed` seconds since its admission."""
        with self._lock:
            self.held -= 1
            self.stay.add(stayed)

    def take(self, wanted: int) -> int:
        """Hold up to `wanted` more units now, as far as the bound has room; return how many
        (the items of a batch beyond its call's own unit)."""
        with self._lock:
            room = self.limit - self.held - self._admitted
            room = wanted if self.limit == 0 else max(0, min(wanted, room))
            self.held += room
            return room

    def release(self, count: int) -> None:
        """Give back units held by `take` (the running stay stays the calls')."""
        with self._lock:
            self.held -= count

    def retry_delay(self) -> float:
        """Seconds a refused caller should wait: about one turn of the queue, jittered."""
        base = min(max(self.stay.value, MIN_RETRY_DELAY), MAX_RETRY_DELAY)
        return round(base * random.uniform(1 - JITTER, 1 + JITTER), 3)

    def overloaded(self) -> Refusal:
        """The refusal of a call past the bound."""
        refusal = errors.refusal(
            ServiceReason.OVERLOADED,
            f"This server holds {self.limit} calls already; retry after the RetryInfo delay.",
            limit=self.limit,
        )
        return replace(refusal, retry_delay=self.retry_delay())

    def shed_report(self, refused: int = 1) -> int:
        """Count refused calls (or batch items); every SHED_LOG_SECONDS, return how many."""
        now = time.monotonic()
        with self._lock:
            self._shed_since_log += refused
            if now - self._last_log < SHED_LOG_SECONDS:
                return 0
            count, self._shed_since_log, self._last_log = self._shed_since_log, 0, now
        return count


class WorkPool(futures.ThreadPoolExecutor):
    """The server's thread pool: counts the calls it holds, times their wait for a thread,
    and counts the RulesService calls grpc ends before their handler runs (caller gone)."""

    def __init__(
        self,
        admission: Admission,
        threads: int,
        observe_wait: Callable[[float], None],
        gone: Callable[[str, Ended, Metadata], None],
    ) -> None:
        super().__init__(max_workers=threads, thread_name_prefix="rpc")
        self._admission = admission
        self._observe_wait = observe_wait
        self._gone = gone
        self.arriving: tuple[str, Metadata] | None = None
        """The RulesService method and request metadata of the call grpc submits next: set by
        the interceptor, in
        grpc's polling thread, which submits that call next (INTERCEPTED_THEN_SUBMITTED; grpc
        gives a registered method's submit no name)."""
        self.moved = time.monotonic()
        """When a call last started or ended here: a pool that holds calls and moves none is
        wedged (service/worker_probes.py)."""

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> futures.Future[Any]:
        """Hold the call from now until it ends; time its wait before it starts."""
        admission, observe_wait, gone = self._admission, self._observe_wait, self._gone
        arriving, self.arriving = self.arriving, None
        admitted = perf_counter()

        def run() -> Any:
            observe_wait(perf_counter() - admitted)
            self.moved = time.monotonic()
            with grpc_surface.seeing_start() as reached:
                try:
                    return fn(*args, **kwargs)
                finally:
                    self.moved = time.monotonic()
                    # grpc runs no handler for a call whose caller is gone (deadline passed,
                    # or cancelled) by the time a thread takes it: no work was done, and it is
                    # counted (HANDLER_IN_SUBMITTED).
                    if arriving is not None and not reached():
                        gone(arriving[0], ended_before_start(args), arriving[1])
                    admission.leave(perf_counter() - admitted)

        admission.enter()
        try:
            return super().submit(run)
        except BaseException:  # a stopped pool refuses work: it was never held
            admission.leave(0.0)
            raise


# Its deadline passed while it waited: its client saw DEADLINE_EXCEEDED.
EXPIRED = Ended("DEADLINE_EXCEEDED", ServiceReason.DEADLINE_EXPIRED.value)
# Its client went away (cancelled) first.
CANCELLED = Ended("CANCELLED")
# gRPC core refused its message (past grpc.max_receive_message_length): the client saw
# RESOURCE_EXHAUSTED "Received message larger than max", and the stream came half-closed
# with no message.
TOO_LARGE = Ended("RESOURCE_EXHAUSTED", ServiceReason.REQUEST_TOO_LARGE.value)


def ended_before_start(args: tuple[Any, ...]) -> Ended:
    """How a unary call grpc gave up before its handler ran ended, as its client saw it, from
    what grpc submitted for it (SUBMITTED_CALL: its deadline, and how its client side ended);
    what cannot be read counts as the caller's deadline."""
    call = grpc_surface.submitted(args)
    if call.deadline is not None and call.deadline <= time.time():
        return EXPIRED
    if call.client == "closed" and call.code is None:
        return TOO_LARGE
    if call.client == "cancelled":
        return CANCELLED
    return EXPIRED


def lane(name: str, threads: int) -> futures.ThreadPoolExecutor:
    """A small pool of its own for calls that must not wait behind the work."""
    return futures.ThreadPoolExecutor(max_workers=threads, thread_name_prefix=name)


def _unary(handler: Handler, behaviour: Callable[..., Any]) -> Handler:
    return grpc.unary_unary_rpc_method_handler(
        behaviour, handler.request_deserializer, handler.response_serializer
    )


@dataclass
class _Shedding:
    """What refusing a call past the bound needs: the bound, the calls' observer, the log."""

    admission: Admission
    observer: CallObserver
    _methods: dict[str, MethodObserver] = field(default_factory=dict)

    def _observed(self, method: str) -> MethodObserver:
        observed = self._methods.get(method)
        if observed is None:
            service, _, name = method.lstrip("/").rpartition("/")
            observed = self._methods[method] = self.observer.unary(service, name)
        return observed

    def gone(self, method: str, ended: Ended = EXPIRED, metadata: Metadata = None) -> None:
        """Count a call that ended before its work started (no handler ran) as its client saw it."""
        self._observed(method).count(ended, metadata=metadata)

    def refused(self, method: str, refusal: Refusal, metadata: Metadata = None) -> None:
        """Count a call refused past the bound in the standard series and by reason (and
        transport, from its `metadata`); log now and then."""
        self._observed(method).count(outcomes.ended(refusal), metadata=metadata)
        self.report(1)

    def report(self, refused: int) -> None:
        """Add refused calls (or batch items) to the periodic "shedding load" warning."""
        shed = self.admission.shed_report(refused)
        if shed:
            self.observer.logger.warning(
                "shedding load",
                refused=shed,
                reason=ServiceReason.OVERLOADED.value,
                limit=self.admission.limit,
                held=self.admission.held,
            )


class AdmissionInterceptor(grpc.ServerInterceptor):  # type: ignore[type-arg]
    """Refuse past the bound as calls arrive; probes and refusals on their lanes.

    It must be the first (outermost) interceptor: a refused call meets no other.
    """

    def __init__(
        self,
        admission: Admission,
        observer: CallObserver,
        threads: int,
        observe_wait: Callable[[float], None],
    ) -> None:
        self.admission = admission
        self._shedding = _Shedding(admission, observer)
        self.pool = WorkPool(admission, threads, observe_wait, self._shedding.gone)
        """The server's thread pool (give it to grpc.server)."""
        self.shed = self._shedding.report
        """Add refused batch items to the "shedding load" warning (they are tallied apart)."""
        self.probe_lane = lane("probe", PROBE_THREADS)
        self.inline = grpc_surface.Inline()
        self._refusers: dict[str, Handler] = {}
        self._moved = HandlerCache()
        self.taken_in = 0
        """Calls taken in from gRPC core so far, any method (only grpc's one polling thread
        runs this interceptor, so a plain count is exact)."""

    def intercept_service(
        self, continuation: Callable[[Any], Handler], handler_call_details: Any
    ) -> Handler:
        """Refuse a RulesService call past the bound; put probes on their lane."""
        self.taken_in += 1
        method = handler_call_details.method
        ours = method.startswith(PREFIX)
        if ours and not self.admission.admit():
            refuser = self._refusers.get(method)
            if refuser is None:
                handler = continuation(handler_call_details)
                if handler is None:
                    return None
                # The first refusal of a method builds its refuser.
                self._refusers[method] = refuser = self._refuser(method, handler)
            return refuser
        handler = continuation(handler_call_details)
        if handler is None:
            if ours:
                self.admission.enter_nothing()
            return None
        if ours:
            # (read defensively: the metadata only names the transport of the call's count)
            metadata = getattr(handler_call_details, "invocation_metadata", None)
            self.pool.arriving = (method, metadata)
            return self._moved.get(
                method,
                handler,
                lambda: _unary(handler, grpc_surface.noting_start(handler.unary_unary)),
            )
        if method == WATCH_METHOD and grpc_surface.is_non_blocking(handler.unary_stream):
            return self._moved.get(method, handler, lambda: self._watch(handler))
        if method in PROBE_METHODS:
            return self._moved.get(
                method,
                handler,
                lambda: _unary(handler, grpc_surface.on_pool(handler.unary_unary, self.probe_lane)),
            )
        return handler

    def _watch(self, handler: Handler) -> Handler:
        """Health Watch on the probe lane, still non-blocking (NON_BLOCKING keeps through
        on_pool)."""
        return grpc.unary_stream_rpc_method_handler(
            grpc_surface.on_pool(handler.unary_stream, self.probe_lane),
            handler.request_deserializer,
            handler.response_serializer,
        )

    def _refuser(self, method: str, handler: Handler) -> Handler:
        shedding = self._shedding

        def refuse(requests: Any, context: Context) -> None:
            refusal = shedding.admission.overloaded()
            shedding.refused(method, refusal, context.invocation_metadata())
            grpc_surface.abort_with(context, refusal.status())

        # Declared client-streaming, so grpc hands it the call without reading the request
        # (a unary method's body is read before its handler runs); run in the polling thread
        # itself, since it never waits: no thread, no queue, the cheapest refusal grpc allows
        # (INLINE).
        return grpc.stream_unary_rpc_method_handler(
            grpc_surface.on_pool(refuse, self.inline), None, handler.response_serializer
        )

    def stop(self) -> None:
        """Stop the lanes' threads (after the server stopped)."""
        self.probe_lane.shutdown(wait=False, cancel_futures=True)
