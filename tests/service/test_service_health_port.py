"""The health port: probes answered by a server of each worker's own, while the work waits.

Saturation is made, never timed: the workers here run in this process with Apply calls that
wait at a gate the test opens, so every work thread of every worker is held when the test says.
The drain is a real `basra-rules serve`, held open by a health Watch on its gRPC port.
"""

from __future__ import annotations

import functools
import io
import signal
import socket
import subprocess
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import grpc
import pytest
from basra.v1 import rules_pb2 as pb
from grpc_health.v1 import health_pb2, health_pb2_grpc

import engine
from clients.messages import state_to_proto
from service import health
from service.config import Config
from service.handlers import Handlers
from service.interceptors import CallObserver
from service.logs import make_logger
from service.server import SYNC_THREADS, SyncServer, build_sync, make_handlers
from service.servicer import SERVICE_NAME
from testkit import harness
from testkit.actions import action_to_proto

APPLY = "/basra.v1.RulesService/Apply"
WAIT = 10.0  # the longest any step may take before the test fails (never reached when it passes)
SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING
WORKERS = 2
# Fresh connections tried before the test gives up on reaching every worker; the kernel picks
# a worker per connection, so all of them reaching one of two has odds of 2**-63.
CONNECTIONS = 64


def _apply_request() -> bytes:
    state, _ = engine.new_match(b"health-port")
    action = next(engine.legal_actions(state))
    request = pb.ApplyRequest(state=state_to_proto(state), action=action_to_proto(action))
    return request.SerializeToString()


def _fresh_channel(target: str) -> grpc.Channel:
    """A channel with a connection of its own (channels of one process share them otherwise)."""
    return grpc.insecure_channel(target, options=[("grpc.use_local_subchannel_pool", 1)])


class Gate:
    """Handlers whose Apply waits until the gate opens, counting the calls that reached it."""

    def __init__(self, handlers: Handlers) -> None:
        self._handlers = handlers
        self.reached = 0
        self._lock = threading.Lock()
        self.opened = threading.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._handlers, name)

    def apply(self, request: pb.ApplyRequest) -> bytes:
        """Wait for the gate, then apply."""
        with self._lock:
            self.reached += 1
        assert self.opened.wait(WAIT)
        return self._handlers.apply(request)


@dataclass
class Worker:
    """One worker as service.workers runs it: its server and, beside it, its health port."""

    name: str
    server: SyncServer
    probes: health.HealthPort
    gate: Gate


def _worker(name: str, config: Config, port: int, health_port: int) -> Worker:
    observer = CallObserver(None, make_logger("warning", "json", io.StringIO()))
    gate = Gate(make_handlers(config, None))
    handlers: Any = gate
    server = build_sync(config, observer, port, handlers)
    probes = health.build(config.host, health_port, server.health)
    # A name only this worker knows, so that a probe tells which worker answered it.
    server.health.set(name, SERVING)
    probes.start()
    server.start()
    return Worker(name, server, probes, gate)


@pytest.fixture
def workers() -> Iterator[list[Worker]]:
    """Two workers sharing a gRPC port and a health port (SO_REUSEPORT), with gated Apply."""
    config = Config(host="127.0.0.1", admission_limit=0)
    first = _worker("worker-0", config, 0, 0)
    started = [first]
    try:
        for number in range(1, WORKERS):
            name = f"worker-{number}"
            started.append(_worker(name, config, first.server.port, first.probes.port))
        yield started
    finally:
        for worker in started:
            worker.gate.opened.set()
            worker.server.stop(0)
            worker.probes.stop()


def _until(condition: Callable[[], bool]) -> None:
    deadline = threading.Event()
    timer = threading.Timer(WAIT, deadline.set)
    timer.start()
    try:
        while not condition():
            assert not deadline.wait(0.01), "the workers never got there"
    finally:
        timer.cancel()


def _who_answers(target: str, workers: list[Worker]) -> str:
    """Probe as the kubelet does (a new connection, both names); return the worker that
    answered."""
    with _fresh_channel(target) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        for name in ("", SERVICE_NAME):
            reply = stub.Check(health_pb2.HealthCheckRequest(service=name), timeout=WAIT)
            assert reply.status == SERVING, name
        for worker in workers:
            try:
                stub.Check(health_pb2.HealthCheckRequest(service=worker.name), timeout=WAIT)
            except grpc.RpcError as error:
                assert error.code() is grpc.StatusCode.NOT_FOUND
                continue
            return worker.name
    raise AssertionError("no worker knew its own name")


def _held(worker: Worker) -> int:
    """The calls a worker holds: running at the gate, or queued behind it."""
    return int(worker.server.admission.admission.held)


def _holding(workers: list[Worker], calls: int) -> bool:
    """Whether the workers hold `calls` calls in all."""
    return sum(map(_held, workers)) == calls


def _full(worker: Worker, calls: int) -> bool:
    """Whether every work thread of `worker` waits at its gate, with `calls` held in all."""
    return worker.gate.reached == SYNC_THREADS and _held(worker) == calls


def _saturate(workers: list[Worker], channels: list[grpc.Channel]) -> list[grpc.Future[Any]]:
    """Open connections until every work thread of every worker waits at its gate and a call
    queues behind them; return the calls sent."""
    target = f"127.0.0.1:{workers[0].server.port}"
    sent: list[grpc.Future[Any]] = []
    for _ in range(CONNECTIONS):
        if all(w.gate.reached == SYNC_THREADS for w in workers):
            break
        channel = _fresh_channel(target)
        channels.append(channel)
        apply = channel.unary_unary(APPLY, None, None)
        before = [_held(w) for w in workers]
        sent.append(apply.future(_apply_request(), timeout=WAIT * 3))
        _until(functools.partial(_holding, workers, sum(before) + 1))
        # The kernel gave the connection to one worker: fill its threads, and one more.
        (worker,) = [w for w, b in zip(workers, before, strict=True) if _held(w) > b]
        holding = before[workers.index(worker)] + 1
        more = max(0, SYNC_THREADS + 1 - holding)
        sent += [apply.future(_apply_request(), timeout=WAIT * 3) for _ in range(more)]
        wanted = holding + more
        _until(functools.partial(_full, worker, wanted))
    return sent


def test_the_health_port_answers_while_every_work_thread_of_every_worker_is_busy(
    workers: list[Worker],
) -> None:
    """Every work thread of both workers held at the gate, and calls queued behind them: fresh
    connections to the health port reach each worker and are answered SERVING for both names."""
    channels: list[grpc.Channel] = []
    held: list[grpc.Future[Any]] = []
    try:
        held = _saturate(workers, channels)
        assert all(w.gate.reached == SYNC_THREADS for w in workers), "a worker has idle threads"
        assert all(_held(w) > SYNC_THREADS for w in workers)
        probes = f"127.0.0.1:{workers[0].probes.port}"
        answered: set[str] = set()
        for _ in range(CONNECTIONS):
            answered.add(_who_answers(probes, workers))
            if len(answered) == WORKERS:
                break
        assert answered == {w.name for w in workers}
        # Still busy: no work call was answered meanwhile.
        assert all(w.gate.reached == SYNC_THREADS for w in workers)
        assert not any(call.done() for call in held)
    finally:
        for worker in workers:
            worker.gate.opened.set()
        for call in held:
            call.result(WAIT)
        for channel in channels:
            channel.close()


def test_the_health_port_serves_health_only(workers: list[Worker]) -> None:
    """No RulesService and no reflection on the health port."""
    with _fresh_channel(f"127.0.0.1:{workers[0].probes.port}") as channel:
        for path in (APPLY, "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo"):
            with pytest.raises(grpc.RpcError) as refused:
                channel.unary_unary(path, None, None)(b"", timeout=WAIT)
            assert refused.value.code() is grpc.StatusCode.UNIMPLEMENTED, path


def _check(target: str, service: str) -> Any:
    with _fresh_channel(target) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        return stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=WAIT).status


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
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        taken = subprocess.run(
            [
                *harness.command(),
                "serve",
                "--host",
                "127.0.0.1",
                "--port",
                "0",
                "--metrics-port",
                "0",
                "--health-port",
                str(port),
            ],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    assert taken.returncode == 1, taken.stdout
    assert "cannot reserve the health port" in taken.stdout
