"""Helpers of the service tests: ways to call the service, states of given shapes, processes."""

from __future__ import annotations

import asyncio
import io
import json
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import grpc_testing
from basra.v1 import rules_pb2 as pb
from basra.v1 import rules_pb2_grpc
from google.protobuf.message import Message
from google.rpc import error_details_pb2, status_pb2  # type: ignore[import-untyped]
from prometheus_client import CollectorRegistry

import engine
from engine import Action, State, Status
from service import convert
from service.config import Config
from service.handlers import Handlers
from service.interceptors import CallObserver
from service.logs import make_logger
from service.metrics import Metrics, Tally
from service.server import AsyncServer, SyncServer, build_async, build_sync
from service.servicer import METHODS, RulesServicer

REPO = Path(__file__).resolve().parents[2]
SERVICE = pb.DESCRIPTOR.services_by_name["RulesService"]
DETAILS_KEY = "grpc-status-details-bin"


@dataclass(frozen=True, slots=True)
class Outcome:
    """How a call ended: its response, or its code and its one ErrorInfo."""

    code: grpc.StatusCode
    response: Any = None
    details: str = ""
    infos: tuple[error_details_pb2.ErrorInfo, ...] = ()

    @property
    def info(self) -> error_details_pb2.ErrorInfo:
        """The ErrorInfo of a refusal, checking that there is exactly one."""
        assert len(self.infos) == 1, f"expected exactly one ErrorInfo, got {self.infos}"
        return self.infos[0]


def infos_in(trailing: Any) -> tuple[error_details_pb2.ErrorInfo, ...]:
    """Return the ErrorInfo details of a call's trailing metadata (and nothing else may be)."""
    found: list[error_details_pb2.ErrorInfo] = []
    for key, value in trailing or ():
        if key != DETAILS_KEY:
            continue
        rich = status_pb2.Status.FromString(value)
        for detail in rich.details:
            info = error_details_pb2.ErrorInfo()
            assert detail.Unpack(info), f"unexpected detail type {detail.type_url}"
            found.append(info)
    return tuple(found)


Caller = Callable[[str, Message], Outcome]


def grpc_testing_caller(handlers: Handlers) -> Caller:
    """Call the sync servicer through grpc_testing (no network)."""
    server = grpc_testing.server_from_dictionary(
        {SERVICE: RulesServicer(handlers)}, grpc_testing.strict_real_time()
    )

    def call(method: str, request: Message) -> Outcome:
        rpc = server.invoke_unary_unary(SERVICE.methods_by_name[method], (), request, None)
        response, trailing, code, details = rpc.termination()
        if code is grpc.StatusCode.OK:
            # The servicer answers with the encoded response, as grpc sends it.
            reply = METHODS[method][1].FromString(response)
            return Outcome(code, reply)
        return Outcome(code, None, details, infos_in(trailing))

    return call


def channel_caller(channel: grpc.Channel) -> Caller:
    """Call a real server over a channel."""
    stub = rules_pb2_grpc.RulesServiceStub(channel)  # type: ignore[no-untyped-call]

    def call(method: str, request: Message) -> Outcome:
        try:
            response = getattr(stub, method)(request, timeout=10)
        except grpc.RpcError as error:
            trailing = error.trailing_metadata()
            return Outcome(error.code(), None, error.details() or "", infos_in(trailing))
        return Outcome(grpc.StatusCode.OK, response)

    return call


@dataclass
class InProcess:
    """A real server running in this process, with its own metrics registry and log buffer."""

    port: int
    registry: CollectorRegistry
    tally: Tally
    log: io.StringIO
    stop: Callable[[float], None]
    channel: grpc.Channel = field(init=False)

    def __post_init__(self) -> None:
        self.channel = grpc.insecure_channel(f"127.0.0.1:{self.port}")

    def log_lines(self) -> list[dict[str, Any]]:
        """Every JSON log line written so far."""
        return [json.loads(line) for line in self.log.getvalue().splitlines() if line]

    def close(self, grace: float = 0.0) -> None:
        """Close the channel and stop the server."""
        self.channel.close()
        self.stop(grace)


def _observer(tally: Tally, log: io.StringIO) -> CallObserver:
    return CallObserver(tally, make_logger("debug", "json", log))


def start_sync(config: Config, handlers: Handlers | None = None) -> InProcess:
    """Start a thread-pool server on 127.0.0.1 and a free port."""
    registry, log = CollectorRegistry(), io.StringIO()
    tally = Tally(Metrics.create(registry))
    server: SyncServer = build_sync(_replace_host(config), _observer(tally, log), 0, handlers)
    server.start()
    return InProcess(server.port, registry, tally, log, server.stop)


def start_async(config: Config, handlers: Handlers | None = None) -> InProcess:
    """Start an asyncio server on 127.0.0.1 and a free port, in its own event-loop thread."""
    registry, log = CollectorRegistry(), io.StringIO()
    tally = Tally(Metrics.create(registry))
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()

    async def build() -> AsyncServer:
        server = await build_async(_replace_host(config), _observer(tally, log), 0, handlers)
        await server.start()
        return server

    server = asyncio.run_coroutine_threadsafe(build(), loop).result(10)

    def stop(grace: float) -> None:
        asyncio.run_coroutine_threadsafe(server.stop(grace), loop).result(10 + grace)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)

    return InProcess(server.port, registry, tally, log, stop)


def _replace_host(config: Config) -> Config:
    from dataclasses import replace

    return replace(config, host="127.0.0.1")


def free_port() -> int:
    """Return a TCP port that was free a moment ago on 127.0.0.1."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# ---- states of given shapes, found by playing deterministic matches with the engine ----


def first_choice(state: State) -> Action:
    """A deterministic legal action: the first card, with its first plan if it has any."""
    assert state.to_move is not None
    move = engine.legal_moves(state)[0]
    return Action(state.to_move, move.card, plan_id=1 if move.plans else None, trail=move.trails)


def states_of(seed: bytes) -> Iterator[tuple[State, Action | None]]:
    """Yield every state of a match played with first_choice, with the action taken from it."""
    state, _ = engine.new_match(seed)
    while state.status is Status.IN_PROGRESS:
        action = first_choice(state)
        yield state, action
        state, _ = engine.apply(state, action)
    yield state, None


def find_state(predicate: Callable[[State], bool]) -> State:
    """Return the first state (over a fixed series of seeds) satisfying `predicate`."""
    for n in range(200):
        for state, _ in states_of(f"find-{n}".encode()):
            if predicate(state):
                return state
    raise AssertionError("no state found")


def has_multi_plan_card(state: State) -> bool:
    """Whether the seat to move holds a card with two plans or more."""
    return any(len(m.plans) >= 2 for m in engine.legal_moves(state))


def has_capturing_card(state: State) -> bool:
    """Whether the seat to move holds a card that captures."""
    return any(m.plans for m in engine.legal_moves(state))


def proto(state: State) -> pb.State:
    """The message of an engine state."""
    return convert.state_to_proto(state)


def finished_match(seed: bytes) -> tuple[State, list[Action]]:
    """Play a whole match with first_choice; return its final state and its actions."""
    actions: list[Action] = []
    final: State | None = None
    for state, action in states_of(seed):
        final = state
        if action is not None:
            actions.append(action)
    assert final is not None
    return final, actions


def action_proto(action: Action) -> pb.Action:
    """The message of an engine action (plan id or trail, as first_choice makes them)."""
    message = pb.Action(seat=action.seat, card=engine.code(action.card))
    if action.plan_id is not None:
        message.plan_id = action.plan_id
    elif action.trail:
        message.trail = True
    return message


# ---- the server as its own process ----


def command() -> list[str]:
    """The console command `basra-rules` of this environment."""
    script = Path(sys.executable).parent / "basra-rules"
    return [str(script)] if script.exists() else [sys.executable, "-m", "service.cli"]


@dataclass
class ServerProcess:
    """`basra-rules serve` running as a child process; its log lines are collected."""

    process: subprocess.Popen[str]
    lines: queue.Queue[dict[str, Any]]
    seen: list[dict[str, Any]] = field(default_factory=list)
    port: int = 0
    metrics_port: int | None = None

    def wait_for(self, event: str, timeout: float = 30.0, **match: Any) -> dict[str, Any]:
        """Wait for a log line with this event (and matching fields); return it."""
        deadline = time.monotonic() + timeout
        for line in self.seen:
            if line.get("event") == event and all(line.get(k) == v for k, v in match.items()):
                return line
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"no {event!r} log line within {timeout} s: {self.seen[-5:]}")
            try:
                line = self.lines.get(timeout=remaining)
            except queue.Empty:
                continue
            self.seen.append(line)
            if line.get("event") == event and all(line.get(k) == v for k, v in match.items()):
                return line

    def drain(self) -> list[dict[str, Any]]:
        """Every log line so far."""
        while True:
            try:
                self.seen.append(self.lines.get_nowait())
            except queue.Empty:
                return self.seen

    def terminate(self, timeout: float = 30.0) -> int:
        """Send SIGTERM and wait for the exit code."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout)

    def kill(self) -> None:
        """Stop at once (cleanup after a failed test)."""
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)


def start_process(*flags: str, env: dict[str, str] | None = None) -> ServerProcess:
    """Start `basra-rules serve` on 127.0.0.1 with the given flags; wait until it serves."""
    process = subprocess.Popen(
        [*command(), "serve", "--host", "127.0.0.1", "--log-format", "json", *flags],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, **(env or {})},
        cwd=REPO,
    )
    lines: queue.Queue[dict[str, Any]] = queue.Queue()

    def read() -> None:
        assert process.stdout is not None
        for text in process.stdout:
            try:
                lines.put(json.loads(text))
            except json.JSONDecodeError:
                lines.put({"event": "<not json>", "text": text.rstrip()})

    threading.Thread(target=read, daemon=True).start()
    server = ServerProcess(process, lines)
    try:
        serving = server.wait_for("serving")
    except AssertionError:
        server.kill()
        raise
    server.port = serving["port"]
    server.metrics_port = serving["metrics_port"]
    return server
