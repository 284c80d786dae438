"""Overload: the admission bound, no work for callers that have given up, probes that answer,
and the published retry policy against a server that sheds.

Each server here runs in this process with Apply calls that wait at a gate the test opens, so
a server is saturated exactly when the test says (never by timing): with all its threads held.
"""

from __future__ import annotations

import io
import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import grpc
import pytest
from basra.v1 import rules_pb2 as pb
from google.rpc import error_details_pb2, status_pb2  # type: ignore[import-untyped]
from grpc_health.v1 import health_pb2, health_pb2_grpc
from prometheus_client import CollectorRegistry

import engine
from clients.refusals import error_infos, reason_of, retry_delay_of
from engine import bot
from service import admission, errors
from service.config import Config
from service.deadlines import SearchClock
from service.handlers import Handlers
from service.interceptors import CallObserver
from service.logs import make_logger
from service.metrics import Metrics, Tally
from service.outcomes import Facts
from service.server import (
    PENDING_CALLS,
    SYNC_THREADS,
    build_server,
    grpc_options,
    make_handlers,
)
from service.servicer import respond
from testkit.actions import action_to_proto
from testkit.messages import state_to_proto

REPO = Path(__file__).resolve().parents[2]
SERVICE_CONFIG = REPO / "deploy" / "grpc-service-config.json"
APPLY = "/basra.v1.RulesService/Apply"
SUGGEST = "/basra.v1.RulesService/SuggestMove"
WAIT = 10.0  # the longest any step may take before the test fails (never reached when it passes)


def _apply_request() -> bytes:
    state, _ = engine.new_match(b"overload")
    action = next(engine.legal_actions(state))
    request = pb.ApplyRequest(state=state_to_proto(state), action=action_to_proto(action))
    return request.SerializeToString()


def _suggest_request() -> bytes:
    state, _ = engine.new_match(b"overload")
    assert state.to_move is not None
    request = pb.SuggestMoveRequest(state=state_to_proto(state), seat=state.to_move)
    return request.SerializeToString()


def _rpc(channel: grpc.Channel, path: str) -> Any:
    """A raw-bytes unary method of a channel."""
    return channel.unary_unary(path, None, None)


class Gate:
    """Handlers whose Apply waits until the gate opens, counting the calls that wait."""

    def __init__(self, handlers: Handlers) -> None:
        self._handlers = handlers
        self.waiting = threading.Semaphore(0)
        self.opened = threading.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._handlers, name)

    def apply(self, request: pb.ApplyRequest, facts: Facts) -> bytes:
        """Wait for the gate, then apply."""
        self.waiting.release()
        assert self.opened.wait(WAIT)
        return self._handlers.apply(request, facts)

    def wait_for(self, calls: int) -> None:
        """Return once `calls` Apply calls wait at the gate."""
        for _ in range(calls):
            assert self.waiting.acquire(timeout=WAIT)


@dataclass
class Running:
    """An in-process server with its gate, metrics and log."""

    target: str
    gate: Gate
    tally: Tally
    registry: CollectorRegistry
    log: io.StringIO
    admission: Any

    def sample(self, name: str, **labels: str) -> float:
        """A metric's value now (what the worker would write at its next flush)."""
        self.tally.flush()
        value = self.registry.get_sample_value(name, labels)
        return 0.0 if value is None else float(value)

    def refusals(self, method: str, reason: str) -> float:
        """basra_refusals_total of a method and reason."""
        return self.sample("basra_refusals_total", grpc_method=method, reason=reason)


@pytest.fixture
def serve() -> Iterator[Callable[[Config], Running]]:
    """Start in-process servers with gated Apply; stop them after the test."""
    stops: list[Callable[[], None]] = []

    def start(config: Config) -> Running:
        config = replace(config, host="127.0.0.1")
        registry, log = CollectorRegistry(), io.StringIO()
        tally = Tally(Metrics.create(registry))
        observer = CallObserver(tally, make_logger("debug", "json", log))
        gate = Gate(make_handlers(config, tally))
        handlers: Any = gate
        server = build_server(config, observer, 0, handlers)
        server.start()

        def stop() -> None:
            gate.opened.set()
            server.stop(0)

        stops.append(stop)
        return Running(f"127.0.0.1:{server.port}", gate, tally, registry, log, server.admission)

    yield start
    for stop in stops:
        stop()


def _hold(server: Running, channel: grpc.Channel, calls: int) -> list[grpc.Future[Any]]:
    """Send `calls` Apply calls and return once the server holds them all: they hold the
    server's threads at the gate (queued past SYNC_THREADS)."""
    apply = _rpc(channel, APPLY)
    sent = [apply.future(_apply_request(), timeout=WAIT) for _ in range(calls)]
    server.gate.wait_for(min(calls, SYNC_THREADS))
    _until(lambda: server.admission.admission.held == calls)
    return sent


def _release(server: Running) -> None:
    """Let the held calls go on."""
    server.gate.opened.set()


def _until(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + WAIT
    while not condition():
        assert time.monotonic() < deadline, "the server never got there"
        time.sleep(0.01)


def test_a_saturated_server_refuses_past_its_bound_with_overloaded_and_retry_info(
    serve: Callable[[Config], Running],
) -> None:
    """Past the bound a call is refused at once: RESOURCE_EXHAUSTED, OVERLOADED, RetryInfo and
    grpc's pushback; counted, never logged call by call; the held calls are answered."""
    server = serve(Config(admission_limit=2))
    with grpc.insecure_channel(server.target) as channel:
        held = _hold(server, channel, 2)
        with pytest.raises(grpc.RpcError) as refused:
            _rpc(channel, APPLY)(_apply_request(), timeout=WAIT)
        error: Any = refused.value
        assert error.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
        assert reason_of(error) == "OVERLOADED"
        (info,) = error_infos(error.trailing_metadata())
        assert info.domain == errors.DOMAIN and info.metadata["limit"] == "2"
        delay = retry_delay_of(error)
        assert delay is not None
        assert admission.MIN_RETRY_DELAY * 0.5 <= delay <= admission.MAX_RETRY_DELAY * 1.5
        pushback = dict(error.trailing_metadata())[errors.PUSHBACK_KEY]
        assert int(pushback) == round(delay * 1000)
        assert server.refusals("Apply", "OVERLOADED") == 1
        handled = server.sample(
            "grpc_server_handled_total",
            grpc_type="UNARY",
            grpc_service="basra.v1.RulesService",
            grpc_method="Apply",
            grpc_code="RESOURCE_EXHAUSTED",
            transport="grpc",
        )
        assert handled == 1
        _release(server)
        assert all(len(call.result(WAIT)) > 0 for call in held)
        assert server.sample("basra_calls_held_limit") == 2
    logged = [json.loads(line) for line in server.log.getvalue().splitlines()]
    calls = [line for line in logged if line.get("event") == "rpc"]
    assert [line["code"] for line in calls] == ["OK", "OK"]  # the refusal: no line of its own
    assert [line["event"] for line in logged if line["level"] == "warning"] == ["shedding load"]


def test_a_burst_far_past_the_bound_is_refused_overloaded_never_cancelled(
    serve: Callable[[Config], Running],
) -> None:
    """A burst of many times the bound at once: every call past it is refused OVERLOADED by
    the service, none cancelled by gRPC core (its limit on calls not yet taken in is not the
    bound), and the server counts each refusal as its caller saw it."""
    server = serve(Config(admission_limit=2))
    burst = 60  # thirty times the bound; a core limit equal to the bound cancelled most of it
    with grpc.insecure_channel(server.target) as channel:
        held = _hold(server, channel, 2)
        apply = _rpc(channel, APPLY)
        sent = [apply.future(_apply_request(), timeout=WAIT) for _ in range(burst)]
        codes = [call.exception().code() for call in sent]
        assert codes == [grpc.StatusCode.RESOURCE_EXHAUSTED] * burst
        assert {reason_of(call.exception()) for call in sent} == {"OVERLOADED"}
        assert server.refusals("Apply", "OVERLOADED") == burst
        _release(server)
        assert all(len(call.result(WAIT)) > 0 for call in held)


def test_health_answers_while_every_worker_is_busy(
    serve: Callable[[Config], Running],
) -> None:
    """With every work thread busy and calls queued behind them, health Check still answers
    SERVING, for both names the probes ask."""
    server = serve(Config(admission_limit=SYNC_THREADS + 4))
    with grpc.insecure_channel(server.target) as channel:
        held = _hold(server, channel, SYNC_THREADS + 2)
        health = health_pb2_grpc.HealthStub(channel)
        for name in ("", "basra.v1.RulesService"):
            reply = health.Check(health_pb2.HealthCheckRequest(service=name), timeout=WAIT)
            assert reply.status == health_pb2.HealthCheckResponse.SERVING
        assert server.admission.admission.held == SYNC_THREADS + 2  # all still held
        _release(server)
        for call in held:
            call.result(WAIT)


def test_an_expired_call_does_no_work(serve: Callable[[Config], Running]) -> None:
    """A SuggestMove whose deadline passes while it waits is never searched: refused as
    DEADLINE_EXPIRED, and the bot's metrics show no search; a later one is searched."""
    server = serve(Config(admission_limit=64))
    with grpc.insecure_channel(server.target) as channel:
        held = _hold(server, channel, SYNC_THREADS + 1)
        suggest = _rpc(channel, SUGGEST)
        with pytest.raises(grpc.RpcError) as late:
            suggest(_suggest_request(), timeout=0.2)
        assert late.value.code() is grpc.StatusCode.DEADLINE_EXCEEDED
        _release(server)
        for call in held:
            call.result(WAIT)
        _until(lambda: server.admission.admission.held == 0)
        assert server.refusals("SuggestMove", "DEADLINE_EXPIRED") == 1
        assert server.sample("basra_suggest_seconds_count", level="STRONG") == 0
        assert len(suggest(_suggest_request(), timeout=WAIT)) > 0
        assert server.sample("basra_suggest_seconds_count", level="STRONG") == 1
        waited = server.sample("basra_queue_wait_seconds_count")
        assert waited >= SYNC_THREADS + 2  # the held Apply calls and the answered SuggestMove


def test_a_call_with_no_time_left_is_refused_before_its_handler_runs() -> None:
    """respond(): no time left is DEADLINE_EXPIRED and the handler is never called."""
    ran: list[object] = []

    def handler(request: object, facts: Facts) -> bytes:
        ran.append(request)
        return b"answered"

    refused = respond(handler, object(), Facts(), 0.0)
    assert isinstance(refused, errors.Refusal) and refused.reason == "DEADLINE_EXPIRED"
    assert refused.code is grpc.StatusCode.DEADLINE_EXCEEDED
    assert ran == []
    assert respond(handler, object(), Facts(), 0.5) == b"answered"
    assert respond(handler, object(), Facts(), None) == b"answered"


def test_a_search_that_cannot_end_in_time_is_refused_up_front() -> None:
    """SuggestMove refuses a search whose running estimate exceeds the caller's time left
    (DEADLINE_TOO_SHORT); with time enough, or no deadline, or no estimate yet, it answers."""
    request = pb.SuggestMoveRequest.FromString(_suggest_request())
    fresh = Handlers(search_clock=SearchClock())
    assert fresh.suggest_move(request, Facts(), seconds_left=1e-6)  # no estimate yet: searched
    clock = SearchClock()
    handlers = Handlers(search_clock=clock)
    clock.observe(bot.Level.STRONG, bot.DEFAULT_BUDGET, 0.5)  # pretend searches take long
    expected = clock.expected(bot.Level.STRONG, bot.DEFAULT_BUDGET)
    assert expected is not None and expected == pytest.approx(0.5)
    assert clock.expected(bot.Level.GREEDY, bot.DEFAULT_BUDGET) is None
    with pytest.raises(errors.Refusal) as refused:
        handlers.suggest_move(request, Facts(), seconds_left=0.05)
    assert refused.value.reason == "DEADLINE_TOO_SHORT"
    assert refused.value.code is grpc.StatusCode.DEADLINE_EXCEEDED
    assert refused.value.metadata["secondsLeftMs"] == "50"
    assert handlers.suggest_move(request, Facts(), seconds_left=expected * 2)
    assert handlers.suggest_move(request, Facts())  # no deadline


def _policy() -> dict[str, Any]:
    config: dict[str, Any] = json.loads(SERVICE_CONFIG.read_text())
    return config


def _retrying(target: str) -> grpc.Channel:
    """A channel that retries by the published service config, as a real client loads it."""
    options = [
        ("grpc.service_config", SERVICE_CONFIG.read_text()),
        ("grpc.enable_retries", 1),
    ]
    return grpc.insecure_channel(target, options=options)


def test_the_published_service_config_retries_a_shed_call_to_success(
    serve: Callable[[Config], Running],
) -> None:
    """A grpcio client with deploy/grpc-service-config.json: its call is shed once, retried
    after the server's delay, and answered within its deadline."""
    policy = _policy()["methodConfig"][0]["retryPolicy"]
    assert {"RESOURCE_EXHAUSTED", "UNAVAILABLE"} <= set(policy["retryableStatusCodes"])
    server = serve(Config(admission_limit=1))
    with grpc.insecure_channel(server.target) as plain, _retrying(server.target) as retrying:
        held = _hold(server, plain, 1)
        pending = _rpc(retrying, APPLY).future(_apply_request(), timeout=WAIT)
        _until(lambda: server.refusals("Apply", "OVERLOADED") >= 1)
        _release(server)  # the slot frees before the server's retry delay is over
        assert len(pending.result(WAIT)) > 0
        held[0].result(WAIT)
        assert 1 <= server.refusals("Apply", "OVERLOADED") < policy["maxAttempts"]


def test_the_published_service_config_makes_no_retry_storm(
    serve: Callable[[Config], Running],
) -> None:
    """Against a server that sheds every call, each call stops at maxAttempts, and the retry
    throttle stops retrying once most calls fail: far fewer attempts than calls x maxAttempts."""
    config = _policy()
    attempts = config["methodConfig"][0]["retryPolicy"]["maxAttempts"]
    server = serve(Config(admission_limit=1))
    calls = 12
    with grpc.insecure_channel(server.target) as plain, _retrying(server.target) as retrying:
        held = _hold(server, plain, 1)
        apply = _rpc(retrying, APPLY)
        for _ in range(calls):
            with pytest.raises(grpc.RpcError) as refused:
                apply(_apply_request(), timeout=WAIT)
            assert refused.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
        made = server.refusals("Apply", "OVERLOADED")
        throttle = config["retryThrottling"]
        # Each failure costs a token, retries stop at half the tokens: the first calls use up
        # the retries the throttle allows, the later ones are tried once.
        assert calls <= made <= calls + throttle["maxTokens"] + attempts
        assert made < calls * attempts
        _release(server)
        held[0].result(WAIT)


def test_the_published_service_config_does_not_retry_what_would_be_refused_again(
    serve: Callable[[Config], Running],
) -> None:
    """A RESOURCE_EXHAUSTED refusal of the request itself (here BUDGET_TOO_LARGE) carries a
    negative pushback: a client retrying by the published policy makes one attempt only."""
    server = serve(Config(bot_max_deals=4))
    request = pb.SuggestMoveRequest.FromString(_suggest_request())
    request.budget.deals = 5
    with _retrying(server.target) as retrying, pytest.raises(grpc.RpcError) as refused:
        _rpc(retrying, SUGGEST)(request.SerializeToString(), timeout=WAIT)
    error: Any = refused.value
    assert error.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
    assert reason_of(error) == "BUDGET_TOO_LARGE"
    assert dict(error.trailing_metadata())[errors.PUSHBACK_KEY] == errors.NO_RETRY
    _until(lambda: server.refusals("SuggestMove", "BUDGET_TOO_LARGE") >= 1)
    time.sleep(0.5)  # a retry would have come by now (the policy's first backoff is shorter)
    assert server.refusals("SuggestMove", "BUDGET_TOO_LARGE") == 1


def test_retry_delay_reads_the_server_s_retry_info() -> None:
    """clients.refusals.retry_delay_of reads RetryInfo; a refusal without one has none."""
    status = errors.Refusal(
        grpc.StatusCode.RESOURCE_EXHAUSTED, "OVERLOADED", "busy", {}, 0.25
    ).status()
    rich = status_pb2.Status.FromString(dict(status.trailing_metadata)[errors.DETAILS_KEY])
    kinds = [detail.type_url.rpartition("/")[2] for detail in rich.details]
    assert kinds == ["google.rpc.ErrorInfo", "google.rpc.RetryInfo"]
    retry = error_details_pb2.RetryInfo()
    assert rich.details[1].Unpack(retry) and retry.retry_delay.ToMilliseconds() == 250

    class Failed(grpc.RpcError):
        def __init__(self, trailing: Any) -> None:
            self._trailing = trailing

        def trailing_metadata(self) -> Any:
            return self._trailing

    assert retry_delay_of(Failed(status.trailing_metadata)) == 0.25
    plain = errors.refusal(errors.ServiceReason.SEQ_MISMATCH, "stale").status()
    assert retry_delay_of(Failed(plain.trailing_metadata)) is None
    assert errors.PUSHBACK_KEY not in dict(plain.trailing_metadata)  # ABORTED: not retried


def test_the_work_pool_counts_what_it_holds_and_lets_go_of_what_it_refuses() -> None:
    """WorkPool: a call is held from its submission to its end, and a refused submission
    (after shutdown) is never held."""
    bound = admission.Admission(limit=1)
    waits: list[float] = []
    pool = admission.WorkPool(bound, 1, waits.append, lambda method, ended, metadata: None)
    release = threading.Event()
    first = pool.submit(release.wait, WAIT)
    assert bound.held == 1 and bound.full()
    release.set()
    first.result(WAIT)
    _until(lambda: bound.held == 0)
    assert len(waits) == 1
    pool.shutdown()
    with pytest.raises(RuntimeError):
        pool.submit(print)
    assert bound.held == 0


def test_an_unbounded_server_never_sheds() -> None:
    """--admission-limit 0: no bound at all."""
    bound = admission.Admission(limit=0)
    for _ in range(1000):
        bound.enter()
    assert not bound.full()


def test_grpc_core_bounds_the_calls_waiting_to_be_taken_in() -> None:
    """With a bound, gRPC core holds at most PENDING_CALLS calls the server has not taken in
    (refusing at random up to twice it), whatever the bound, and none longer than a second;
    without a bound, its defaults."""
    for limit in (2, 64, 1000):
        options = dict(grpc_options(Config(admission_limit=limit)))
        assert options["grpc.server.max_pending_requests"] == PENDING_CALLS
        assert options["grpc.server.max_pending_requests_hard_limit"] == 2 * PENDING_CALLS
        assert options["grpc.server_max_unrequested_time_in_server"] == 1
    unbounded = dict(grpc_options(Config(admission_limit=0)))
    assert "grpc.server.max_pending_requests" not in unbounded
    assert "grpc.server_max_unrequested_time_in_server" not in unbounded
