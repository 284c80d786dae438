"""Helpers of the service tests: ways to call the service, states of given shapes."""

from __future__ import annotations

import io
import json
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import grpc
import grpc_testing
from basra.v1 import rules_pb2 as pb
from basra.v1 import rules_pb2_grpc
from google.protobuf.message import Message
from google.rpc import error_details_pb2  # type: ignore[import-untyped]
from prometheus_client import CollectorRegistry

import engine
from clients import channels
from clients.refusals import error_infos
from engine import Action, State, Status
from service.config import Config
from service.handlers import Handlers
from service.interceptors import CallObserver
from service.logs import make_logger
from service.metrics import FLUSH_SECONDS, Metrics, Tally
from service.server import HANDLERS_SECONDS, HEALTH_SERVICE_NAME, RulesServer, build_server
from service.servicer import METHODS, RulesServicer
from testkit import messages
from testkit.harness import ServedProcess

if TYPE_CHECKING:
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from service.tracing import Tracing

REPO = Path(__file__).resolve().parents[1]
# How long a stop may take past its grace and its handlers' seconds before a test fails.
STOP_MARGIN_SECONDS = 10.0
SERVICE = pb.DESCRIPTOR.services_by_name["RulesService"]


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


Caller = Callable[[str, Message], Outcome]
# A caller for a given configuration (the `call_with` fixture of tests/service/conftest.py).
MakeCaller = Callable[[Config], Caller]


def grpc_testing_caller(handlers: Handlers) -> Caller:
    """Call the sync servicer through grpc_testing (no network)."""
    server = grpc_testing.server_from_dictionary(
        {SERVICE: RulesServicer(handlers)}, grpc_testing.strict_real_time()
    )

    def call(method: str, request: Message) -> Outcome:
        rpc = server.invoke_unary_unary(SERVICE.methods_by_name[method], (), request, None)
        response, trailing, code, details = rpc.termination()
        if code is grpc.StatusCode.OK:
            # The servicer answers with the encoded response, which grpc sends as it is.
            reply = METHODS[method][1].FromString(response)
            return Outcome(code, reply)
        return Outcome(code, None, details, error_infos(trailing))

    return call


def channel_caller(channel: grpc.Channel) -> Caller:
    """Call a real server over a channel."""
    stub = rules_pb2_grpc.RulesServiceStub(channel)  # type: ignore[no-untyped-call]

    def call(method: str, request: Message) -> Outcome:
        try:
            response = getattr(stub, method)(request, timeout=10)
        except grpc.RpcError as error:
            trailing = error.trailing_metadata()
            return Outcome(error.code(), None, error.details() or "", error_infos(trailing))
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
    built: RulesServer
    """The built server (its health servicer, its admission)."""
    channel: grpc.Channel = field(init=False)

    def __post_init__(self) -> None:
        self.channel = channels.channel(f"127.0.0.1:{self.port}")

    def log_lines(self) -> list[dict[str, Any]]:
        """Every JSON log line written so far."""
        return [json.loads(line) for line in self.log.getvalue().splitlines() if line]

    def open_watches(self) -> float:
        """Health Watch streams the server has started and not yet seen end."""
        self.tally.flush()
        labels = {"grpc_service": HEALTH_SERVICE_NAME, "grpc_method": "Watch"}
        started = self.registry.get_sample_value(
            "grpc_server_started_total",
            {"grpc_type": "SERVER_STREAM", "transport": "grpc", **labels},
        )
        handled = sum(
            sample.value
            for family in self.registry.collect()
            for sample in family.samples
            if sample.name == "grpc_server_handled_total"
            and {k: sample.labels.get(k) for k in labels} == labels
        )
        return (started or 0.0) - handled

    def close(self, grace: float = 0.0) -> None:
        """Close the channel and stop the server, failing (never hanging) if the stop takes
        longer than its grace, its handlers' seconds and a margin."""
        self.channel.close()
        bound = grace + HANDLERS_SECONDS + STOP_MARGIN_SECONDS
        stopping = threading.Thread(target=self.stop, args=(grace,), name="stop", daemon=True)
        stopping.start()
        stopping.join(bound)
        assert not stopping.is_alive(), f"the server's stop (grace {grace} s) took over {bound} s"


def _observer(tally: Tally, log: io.StringIO, tracing: Tracing | None) -> CallObserver:
    return CallObserver(tally, make_logger("debug", "json", log), tracing)


def start_server(
    config: Config, handlers: Handlers | None = None, tracing: Tracing | None = None
) -> InProcess:
    """Start a thread-pool server on 127.0.0.1 and a free port (traced when given `tracing`)."""
    registry, log = CollectorRegistry(), io.StringIO()
    tally = Tally(Metrics.create(registry))
    observer = _observer(tally, log, tracing)
    server: RulesServer = build_server(_replace_host(config), observer, 0, handlers)
    server.start()
    return InProcess(server.port, registry, tally, log, server.stop, server)


@contextmanager
def traced_server(
    config: Config, handlers: Handlers | None = None
) -> Iterator[tuple[InProcess, InMemorySpanExporter]]:
    """An in-process server tracing into memory (OpenTelemetry imported only when called)."""
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from service.tracing import Tracing

    exporter = InMemorySpanExporter()
    tracing = Tracing.start(make_logger("warning"), SimpleSpanProcessor(exporter))
    server = start_server(config, handlers, tracing)
    try:
        yield server, exporter
    finally:
        server.close()
        tracing.stop()


def _replace_host(config: Config) -> Config:
    from dataclasses import replace

    return replace(config, host="127.0.0.1")


# ---- states of given shapes, found by playing deterministic matches with the engine ----


def first_choice(state: State) -> Action:
    """A deterministic legal action: the first card, with its first plan if it has any."""
    return next(engine.legal_actions(state))


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
    return messages.state_to_proto(state)


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


def scrape(server: ServedProcess) -> dict[str, float]:
    """The samples a served process's /metrics shows, by name and labels."""
    url = f"http://127.0.0.1:{server.metrics_port}/metrics"
    with urllib.request.urlopen(url, timeout=5) as response:
        text = response.read().decode()
    samples: dict[str, float] = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            samples[name] = float(value)
    return samples


def scrape_until(
    server: ServedProcess, done: Callable[[dict[str, float]], bool]
) -> dict[str, float]:
    """Scrape /metrics until `done` holds (workers write their counts every FLUSH_SECONDS)."""
    deadline = time.monotonic() + 10 * FLUSH_SECONDS + 5
    samples = scrape(server)
    while not done(samples) and time.monotonic() < deadline:
        time.sleep(FLUSH_SECONDS / 10)
        samples = scrape(server)
    return samples
