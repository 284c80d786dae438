"""The health service (service/health_status.py) on real in-process servers: Check answers as
grpc_health's servicer did, Watch sends the status at once and then each change, a graceful
shutdown tells every open Watch NOT_SERVING, and a stop never hangs on Watches ending with it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from concurrent import futures
from contextlib import contextmanager
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from service.config import Config
from service.health_status import HEALTH_NAMES
from testkit.calls import InProcess, start_server
from wire.contract import SERVICE_NAME

WAIT = 10.0  # the longest any step may take before the test fails (never reached when it passes)
CHECK = "/grpc.health.v1.Health/Check"
UNKNOWN_NAME = "basra.v1.NoSuchService"
SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING
SERVICE_UNKNOWN = health_pb2.HealthCheckResponse.SERVICE_UNKNOWN
# The race a stop used to lose: this many Watches cancelled as the stop begins, this many
# times over (grpc_health's servicer hung in every round of it); each stop must end within
# STOP_SECONDS (it takes milliseconds).
ROUNDS = 30
WATCHES = 40
STOP_SECONDS = 5.0


@pytest.fixture
def server() -> Iterator[InProcess]:
    """A started in-process server, stopped at the end."""
    running = start_server(Config())
    yield running
    running.close()


def _request(name: str) -> Any:
    return health_pb2.HealthCheckRequest(service=name)


def _watch(server: InProcess, name: str) -> Any:
    return health_pb2_grpc.HealthStub(server.channel).Watch(_request(name), timeout=WAIT)


def _raw_check(channel: grpc.Channel, name: str) -> tuple[Any, ...]:
    """A Check as bytes: its code, details, response bytes and trailing metadata."""
    call = channel.unary_unary(CHECK, None, None)
    try:
        body, state = call.with_call(_request(name).SerializeToString(), timeout=WAIT)
    except grpc.RpcError as error:
        return error.code(), error.details(), None, error.trailing_metadata()
    return state.code(), state.details(), body, state.trailing_metadata()


@contextmanager
def _grpc_health_server() -> Iterator[tuple[Any, grpc.Channel]]:
    """grpc_health's own servicer, on a bare server, with the worker's names SERVING."""
    servicer = health.HealthServicer()
    server = grpc.server(futures.ThreadPoolExecutor(2))
    health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    for name in HEALTH_NAMES:
        servicer.set(name, SERVING)
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            yield servicer, channel
    finally:
        server.stop(0).wait()


def _until(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + WAIT
    while not condition():
        assert time.monotonic() < deadline, "the server never got there"
        time.sleep(0.01)


def test_check_answers_as_grpc_health_did(server: InProcess) -> None:
    """Every name, before and after the shutdown began: the same code, details, bytes and
    trailing metadata as grpc_health's servicer (NOT_FOUND for an unknown name)."""
    names = (*HEALTH_NAMES, UNKNOWN_NAME)
    with _grpc_health_server() as (reference, channel):
        serving = [_raw_check(server.channel, name) for name in names]
        assert serving == [_raw_check(channel, name) for name in names]
        server.built.health.enter_graceful_shutdown()
        reference.enter_graceful_shutdown()
        shutting_down = [_raw_check(server.channel, name) for name in names]
        assert shutting_down == [_raw_check(channel, name) for name in names]
    statuses = [
        None if body is None else health_pb2.HealthCheckResponse.FromString(body).status
        for _, _, body, _ in (*serving, *shutting_down)
    ]
    assert statuses == [SERVING, SERVING, None, NOT_SERVING, NOT_SERVING, None]
    assert serving[-1][0] is grpc.StatusCode.NOT_FOUND


def test_watch_sends_the_status_at_once_then_each_change(server: InProcess) -> None:
    """A Watch gets its name's status at once, then each change of it: nothing for another
    name's change nor for a set that changes nothing."""
    statuses = server.built.health
    watch = _watch(server, SERVICE_NAME)
    assert next(watch).status == SERVING
    statuses.set(SERVICE_NAME, NOT_SERVING)
    assert next(watch).status == NOT_SERVING
    statuses.set("", NOT_SERVING)  # another name
    statuses.set(SERVICE_NAME, NOT_SERVING)  # no change
    statuses.set(SERVICE_NAME, SERVING)
    assert next(watch).status == SERVING
    watch.cancel()


def test_watch_of_an_unknown_name_says_so_until_it_is_set(server: InProcess) -> None:
    """SERVICE_UNKNOWN at once for a name never set (the call stays open), then its status once
    it is set."""
    watch = _watch(server, UNKNOWN_NAME)
    assert next(watch).status == SERVICE_UNKNOWN
    server.built.health.set(UNKNOWN_NAME, SERVING)
    assert next(watch).status == SERVING
    watch.cancel()


def test_graceful_shutdown_tells_every_open_watch_not_serving_for_good(server: InProcess) -> None:
    """Every open Watch of a known name is told NOT_SERVING; later sets are ignored: Check and
    a new Watch say NOT_SERVING, and a name first set after it stays unknown."""
    statuses = server.built.health
    watches = {name: _watch(server, name) for name in HEALTH_NAMES}
    for watch in watches.values():
        assert next(watch).status == SERVING
    statuses.enter_graceful_shutdown()
    for name, watch in watches.items():
        assert next(watch).status == NOT_SERVING, name
    statuses.set(SERVICE_NAME, SERVING)
    statuses.set(UNKNOWN_NAME, SERVING)
    stub = health_pb2_grpc.HealthStub(server.channel)
    assert stub.Check(_request(SERVICE_NAME), timeout=WAIT).status == NOT_SERVING
    late = _watch(server, SERVICE_NAME)
    assert next(late).status == NOT_SERVING
    with pytest.raises(grpc.RpcError) as unknown:
        stub.Check(_request(UNKNOWN_NAME), timeout=WAIT)
    assert unknown.value.code() is grpc.StatusCode.NOT_FOUND
    for watch in (*watches.values(), late):
        watch.cancel()


def test_a_watch_ends_at_the_server_when_its_client_goes(server: InProcess) -> None:
    """Cancelled Watches end at the server too (none stays open there)."""
    watches = [_watch(server, SERVICE_NAME) for _ in range(5)]
    for watch in watches:
        assert next(watch).status == SERVING
    assert server.open_watches() == len(watches)
    for watch in watches:
        watch.cancel()
    _until(lambda: server.open_watches() == 0)


def test_a_watch_left_open_ends_with_the_stop_at_its_grace() -> None:
    """A Watch still open as the server stops is told NOT_SERVING, then cut when the grace
    ends: the stop ends within its grace, with no Watch left open at the server."""
    running = start_server(Config())
    watch = _watch(running, SERVICE_NAME)
    assert next(watch).status == SERVING
    grace = 0.5
    stopping = threading.Thread(target=running.stop, args=(grace,), daemon=True)
    stopping.start()
    assert next(watch).status == NOT_SERVING
    with pytest.raises(grpc.RpcError) as cut:
        next(watch)
    assert cut.value.code() in (grpc.StatusCode.CANCELLED, grpc.StatusCode.UNAVAILABLE)
    stopping.join(grace + STOP_SECONDS)
    assert not stopping.is_alive(), "the stop outlasted its grace"
    assert running.open_watches() == 0
    running.channel.close()


def _stop_as_watches_end(running: InProcess, watches: list[Any]) -> bool:
    """Cancel `watches` and stop the server at the same moment; whether the stop ended within
    STOP_SECONDS."""
    together = threading.Barrier(2)

    def cancel() -> None:
        together.wait()
        for watch in watches:
            watch.cancel()

    def stop() -> None:
        together.wait()
        running.stop(0.0)

    cancelling = threading.Thread(target=cancel, daemon=True)
    stopping = threading.Thread(target=stop, daemon=True)
    cancelling.start()
    stopping.start()
    stopping.join(STOP_SECONDS)
    cancelling.join(WAIT)
    return not stopping.is_alive()


def test_stops_end_while_watches_end_with_them() -> None:
    """Many Watches cancelled as the stop begins (its NOT_SERVING racing their ends), round
    after round: every stop ends, within seconds."""
    for round_number in range(ROUNDS):
        running = start_server(Config())
        watches = [_watch(running, SERVICE_NAME) for _ in range(WATCHES)]
        for watch in watches:
            assert next(watch).status == SERVING
        assert _stop_as_watches_end(running, watches), f"round {round_number}: the stop hung"
        running.channel.close()
