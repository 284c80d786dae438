"""deploy/grpc-service-config.json, loaded whole by one grpcio channel over two servers: it
balances (round_robin), retries a shed call on the other server, and skips a server whose
health says NOT_SERVING (client-side health checking); health Watch streams, one per client
subchannel, hold no work thread and no place under the admission bound.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from basra.v1 import rules_pb2 as pb
from grpc_health.v1 import health_pb2, health_pb2_grpc

from service.config import Config
from service.handlers import Handlers
from service.outcomes import Facts
from service.server import SYNC_THREADS, make_handlers
from testkit.calls import InProcess, start_server

SERVICE_CONFIG = Path(__file__).resolve().parents[2] / "deploy" / "grpc-service-config.json"
NEW_MATCH = "/basra.v1.RulesService/NewMatch"
WAIT = 10.0  # the longest any step may take before the test fails (never reached when it passes)
HOLD = "hold"  # a NewMatch label that makes the gated server wait at its gate
STOP_GRACE = 1.0  # what a call still running when the test ends has to finish


class Gated:
    """Handlers whose NewMatch labelled HOLD waits until the gate opens."""

    def __init__(self, handlers: Handlers) -> None:
        self._handlers = handlers
        self.waiting = threading.Event()
        self.opened = threading.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._handlers, name)

    def new_match(self, request: pb.NewMatchRequest, facts: Facts) -> Any:
        """Wait at the gate when asked to."""
        if list(request.labels[:1]) == [HOLD]:
            self.waiting.set()
            assert self.opened.wait(WAIT)
        return self._handlers.new_match(request, facts)


@pytest.fixture
def servers() -> Iterator[Callable[..., InProcess]]:
    """Start in-process sync servers; stop them after the test."""
    started: list[tuple[InProcess, Gated | None]] = []

    def start(config: Config | None = None, gated: Gated | None = None) -> InProcess:
        handlers: Any = gated
        running = start_server(config or Config(), handlers)
        started.append((running, gated))
        return running

    yield start
    for running, gated in started:
        if gated is not None:
            gated.opened.set()
        running.close(STOP_GRACE)


def _channel(*servers: InProcess) -> grpc.Channel:
    """One channel to every server, with the published service config and nothing else."""
    target = "ipv4:" + ",".join(f"127.0.0.1:{s.port}" for s in servers)
    config = SERVICE_CONFIG.read_text(encoding="utf-8")
    return grpc.insecure_channel(target, options=[("grpc.service_config", config)])


def _started(server: InProcess) -> float:
    server.tally.flush()
    value = server.registry.get_sample_value(
        "grpc_server_started_total",
        {
            "grpc_type": "UNARY",
            "grpc_service": "basra.v1.RulesService",
            "grpc_method": "NewMatch",
            "transport": "grpc",
        },
    )
    return 0.0 if value is None else value


def _new_match(channel: grpc.Channel, label: str = "x") -> bytes:
    request = pb.NewMatchRequest(labels=[label]).SerializeToString()
    answer: bytes = channel.unary_unary(NEW_MATCH, None, None)(request, timeout=WAIT)
    return answer


def _until(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + WAIT
    while not condition():
        assert time.monotonic() < deadline, "the channel never got there"
        time.sleep(0.01)


def test_the_published_config_is_one_whole_config() -> None:
    """Retry policy, throttle, round_robin and health checking in one file."""
    config = json.loads(SERVICE_CONFIG.read_text(encoding="utf-8"))
    assert config["loadBalancingConfig"] == [{"round_robin": {}}]
    assert config["healthCheckConfig"] == {"serviceName": "basra.v1.RulesService"}
    assert config["retryThrottling"]
    assert config["methodConfig"][0]["retryPolicy"]["maxAttempts"] >= 2


def test_one_channel_spreads_calls_over_two_servers(servers: Callable[..., InProcess]) -> None:
    """round_robin: once both servers are ready, calls alternate between them."""
    first, second = servers(), servers()
    with _channel(first, second) as channel:
        _until(lambda: bool(_new_match(channel)) and _started(second) > 0 < _started(first))
        before = (_started(first), _started(second))
        for _ in range(10):
            _new_match(channel)
        assert _started(first) - before[0] == 5 == _started(second) - before[1]


def test_one_channel_skips_a_server_that_says_not_serving(
    servers: Callable[..., InProcess],
) -> None:
    """Client-side health checking: a server NOT_SERVING for the service gets no call."""
    first, second = servers(), servers()
    with _channel(first, second) as channel:
        _until(lambda: bool(_new_match(channel)) and _started(second) > 0 < _started(first))
        health = health_pb2_grpc.HealthStub(second.channel)
        assert health.Check(health_pb2.HealthCheckRequest(), timeout=WAIT).status == 1
        # What a draining worker tells open Watches after its GOAWAY (RulesServer.stop).
        second_health = _health_servicer_of(second)
        second_health.set("basra.v1.RulesService", health_pb2.HealthCheckResponse.NOT_SERVING)

        def settled() -> bool:
            count = _started(second)
            for _ in range(4):
                _new_match(channel)
            return _started(second) == count

        _until(settled)
        count = _started(second)
        for _ in range(10):
            _new_match(channel)
        assert _started(second) == count


def test_one_channel_retries_a_shed_call_on_the_other_server(
    servers: Callable[..., InProcess],
) -> None:
    """A server at its bound sheds (OVERLOADED); the channel's retry takes the call elsewhere."""
    gated = Gated(make_handlers(Config(), None))
    full = servers(Config(admission_limit=1), gated)
    free = servers()

    def shed() -> float:
        full.tally.flush()
        value = full.registry.get_sample_value(
            "basra_refusals_total", {"grpc_method": "NewMatch", "reason": "OVERLOADED"}
        )
        return 0.0 if value is None else value

    with _channel(full, free) as channel:
        # Both subchannels ready first, with no failure (each would cost a throttle token).
        _until(lambda: bool(_new_match(channel)) and _started(free) > 0 < _started(full))
        held = full.channel.unary_unary(NEW_MATCH, None, None).future(
            pb.NewMatchRequest(labels=[HOLD]).SerializeToString(), timeout=WAIT
        )
        assert gated.waiting.wait(WAIT)
        # Few enough that the failed attempts leave the throttle more than half its tokens.
        for _ in range(3):
            assert _new_match(channel)
        assert shed() >= 1  # some attempts went to the full server, and were retried
    gated.opened.set()
    assert held.result(WAIT)


def test_health_watches_hold_no_work_thread(servers: Callable[..., InProcess]) -> None:
    """More Watch streams than work threads, and a RulesService call is still answered, with
    nothing held against the bound but itself."""
    server = servers()
    health = health_pb2_grpc.HealthStub(server.channel)
    watches = [
        health.Watch(health_pb2.HealthCheckRequest(service="basra.v1.RulesService"), timeout=WAIT)
        for _ in range(2 * SYNC_THREADS)
    ]
    try:
        for watch in watches:
            assert next(watch).status == health_pb2.HealthCheckResponse.SERVING
        assert _new_match(server.channel)
        _until(lambda: _admission_of(server).held == 0)  # the answered call leaves just after
    finally:
        for watch in watches:
            watch.cancel()


def _health_servicer_of(server: InProcess) -> Any:
    return server.built.health


def _admission_of(server: InProcess) -> Any:
    return server.built.admission.admission
