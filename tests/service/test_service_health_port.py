"""The health port: probes answered by the supervisor, whatever its workers are doing.

Every test runs a real `basra-rules serve`. Busy is made, never timed: the workers are stopped
outright (SIGSTOP), so that no thread of any worker can run while the probes are asked, and a
drain is held open by a health Watch on the gRPC port.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from testkit import harness
from wire.contract import SERVICE_NAME

APPLY = "/basra.v1.RulesService/Apply"
WAIT = 10.0  # the longest any step may take before the test fails (never reached when it passes)
SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING
# Probes asked while the workers cannot run: each on a new connection, as the kubelet does.
PROBES = 20


def _fresh_channel(target: str) -> grpc.Channel:
    """A channel with a connection of its own (channels of one process share them otherwise)."""
    return grpc.insecure_channel(target, options=[("grpc.use_local_subchannel_pool", 1)])


@contextlib.contextmanager
def _served(*flags: str) -> Iterator[harness.ServedProcess]:
    server = harness.start(list(flags), health=True)
    try:
        yield server
    finally:
        server.kill()


@contextlib.contextmanager
def _frozen(pids: list[int]) -> Iterator[None]:
    """Stop the processes outright for the block (SIGSTOP), then let them run on."""
    for pid in pids:
        os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        for pid in pids:
            os.kill(pid, signal.SIGCONT)


def _until(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + WAIT
    while not condition():
        assert time.monotonic() < deadline, "the server never got there"
        time.sleep(0.01)


def _check(target: str, service: str, timeout: float = WAIT) -> Any:
    """One health Check on a new connection; its status."""
    with _fresh_channel(target) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        return stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=timeout).status


@pytest.mark.timeout(60)
def test_the_health_port_answers_while_no_thread_of_any_worker_can_run() -> None:
    """Both workers stopped outright: the gRPC port answers nothing, while every probe on the
    health port, each on a new connection, is answered SERVING for both names."""
    with _served("--workers", "2") as server:
        workers = server.workers()
        assert len(workers) == 2
        with _frozen(workers):
            with pytest.raises(grpc.RpcError) as unanswered:
                _check(server.target, "", timeout=0.5)
            assert unanswered.value.code() is grpc.StatusCode.DEADLINE_EXCEEDED
            for number in range(PROBES):
                name = ("", SERVICE_NAME)[number % 2]
                assert _check(server.health_target, name) == SERVING, number
        assert _check(server.target, "") == SERVING  # the workers run on
        assert server.stop() == 0


def test_the_health_port_serves_health_only() -> None:
    """No RulesService, no reflection and no Watch on the health port; an unknown name is
    NOT_FOUND."""
    with _served("--workers", "1") as server:
        with _fresh_channel(server.health_target) as channel:
            for path in (APPLY, "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo"):
                with pytest.raises(grpc.RpcError) as refused:
                    channel.unary_unary(path, None, None)(b"", timeout=WAIT)
                assert refused.value.code() is grpc.StatusCode.UNIMPLEMENTED, path
            watch = health_pb2_grpc.HealthStub(channel).Watch(
                health_pb2.HealthCheckRequest(service=SERVICE_NAME), timeout=WAIT
            )
            with pytest.raises(grpc.RpcError) as refused:
                next(watch)
            assert refused.value.code() is grpc.StatusCode.UNIMPLEMENTED  # watches: gRPC port
        with pytest.raises(grpc.RpcError) as unknown:
            _check(server.health_target, "basra.v1.NoSuchService")
        assert unknown.value.code() is grpc.StatusCode.NOT_FOUND


@pytest.mark.timeout(60)
def test_no_worker_alive_is_not_serving_until_its_replacement_serves() -> None:
    """The one worker killed: the health port says NOT_SERVING until the supervisor's
    replacement serves, then SERVING again."""
    with _served("--workers", "1") as server:
        (worker,) = server.workers()
        assert _check(server.health_target, SERVICE_NAME) == SERVING
        os.kill(worker, signal.SIGKILL)
        _until(lambda: _check(server.health_target, SERVICE_NAME) == NOT_SERVING)
        assert not server.find("worker replaced")  # seen before the replacement served
        server.wait_for("worker replaced", WAIT * 3)
        assert _check(server.health_target, SERVICE_NAME) == SERVING
        assert _check(server.health_target, "") == SERVING
        assert server.workers() != [worker]
        assert server.stop() == 0


@pytest.mark.timeout(60)
def test_a_draining_server_says_not_serving_on_both_ports() -> None:
    """`basra-rules serve`: SERVING on both ports; from SIGTERM on, a health watcher on the
    gRPC port is told NOT_SERVING and the health port answers NOT_SERVING for both names for
    as long as the drain lasts (held here by that watcher); then it exits cleanly."""
    server = harness.start(["--workers", "1", "--grace-seconds", "20"], health=True)
    try:
        with _fresh_channel(server.target) as channel:
            watch = health_pb2_grpc.HealthStub(channel).Watch(
                health_pb2.HealthCheckRequest(service=SERVICE_NAME), timeout=WAIT * 3
            )
            assert next(watch).status == SERVING
            assert _check(server.health_target, "") == SERVING
            assert _check(server.health_target, SERVICE_NAME) == SERVING
            server.process.send_signal(signal.SIGTERM)
            assert next(watch).status == NOT_SERVING
            assert _check(server.health_target, "") == NOT_SERVING
            assert _check(server.health_target, SERVICE_NAME) == NOT_SERVING
            assert server.process.poll() is None  # still draining: the watcher holds it
            watch.cancel()  # the watcher leaves, so the drain ends before its grace
        assert server.wait(WAIT) == 0
    finally:
        server.kill()


def test_a_health_port_in_use_stops_the_start() -> None:
    """A health port someone else listens on: exit 1, saying which port could not be had."""
    with harness.taken_port() as port:
        taken = subprocess.run(
            harness.serve_command("--health-port", str(port)),
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    assert taken.returncode == 1, taken.stdout
    assert "cannot serve the health port" in taken.stdout
