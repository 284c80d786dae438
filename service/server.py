"""Building the gRPC server (grpc's thread-pool server): RulesService, health, reflection, options.

A server starts NOT_SERVING, turns SERVING once started, and on shutdown stops accepting calls
(a GOAWAY on every connection), then turns NOT_SERVING for every service and lets in-flight
calls finish within the grace.
"""

from __future__ import annotations

import threading
from concurrent import futures
from dataclasses import dataclass, replace
from typing import Any

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from service import batch, grpc_surface, reflection
from service.admission import Admission, AdmissionInterceptor
from service.config import Config
from service.deadlines import SearchClock
from service.errors import LOAD_REASONS
from service.grace import Grace
from service.handlers import Handlers, Limits
from service.health_status import HEALTH_NAMES, HealthStatuses
from service.interceptors import TRANSPORTS, CallObserver, ObservingInterceptor
from service.metrics import Tally
from service.servicer import RulesServicer, add_to_server
from service.tls import server_credentials, tls_files
from wire.contract import METHODS, SERVICE_NAME
from wire.signing import load_keys

HEALTH_SERVICE_NAME = "grpc.health.v1.Health"
# Calls are short and CPU-bound, so a few threads keep the GIL busy without thrashing; fewer
# threads would refuse more calls in Python, which costs an overloaded worker its goodput
# (docs/capacity.md, "The admission bound").
SYNC_THREADS = 8
# Keepalive: ping idle clients every minute to find dead peers; let clients ping every 5 s, half
# the published clients' 10 s (docs/integration.md, "Client settings").
KEEPALIVE_MS = 60_000
KEEPALIVE_TIMEOUT_MS = 20_000
MIN_CLIENT_PING_MS = 5_000
# gRPC itself refuses messages past its own limits with a bare RESOURCE_EXHAUSTED, before any
# handler (counted REQUEST_TOO_LARGE all the same: admission.ended_before_start); they are set
# at four times the configured maximum so that requests (and responses) up to that reach the
# service's own checks, which refuse them with an ErrorInfo, reason REQUEST_TOO_LARGE
# (RESPONSE_TOO_LARGE). Four times bounds what a worker buffers: its held calls times this.
RECEIVE_FACTOR = 4
RECEIVE_HEADROOM_BYTES = 64 * 1024


def grpc_options(config: Config) -> list[tuple[str, int]]:
    """Return the channel arguments of a server: sizes, port sharing, keepalive, connection age."""
    options = [
        ("grpc.max_send_message_length", receive_limit(config)),
        ("grpc.max_receive_message_length", receive_limit(config)),
        ("grpc.so_reuseport", 1),
        ("grpc.keepalive_time_ms", KEEPALIVE_MS),
        ("grpc.keepalive_timeout_ms", KEEPALIVE_TIMEOUT_MS),
        ("grpc.keepalive_permit_without_calls", 1),
        ("grpc.http2.min_ping_interval_without_data_ms", MIN_CLIENT_PING_MS),
        ("grpc.http2.max_ping_strikes", 2),
    ]
    if config.admission_limit:
        options += _intake_limits()
    if config.max_connection_age_seconds > 0:
        options.append(
            ("grpc.max_connection_age_ms", int(config.max_connection_age_seconds * 1000))
        )
        options.append(
            (
                "grpc.max_connection_age_grace_ms",
                int(config.max_connection_age_grace_seconds * 1000),
            )
        )
    return options


# gRPC core's limits on the calls a worker has not taken in yet (docs/service.md, "Overload"):
# the longest such a call waits (whole seconds), and how many are held whatever the bound.
MAX_UNTAKEN_SECONDS = 1
PENDING_CALLS = 64


def _intake_limits() -> list[tuple[str, int]]:
    """gRPC core's own limits on the calls waiting for the server to take them in (refused
    CANCELLED past them: docs/service.md, "Overload")."""
    return [
        ("grpc.server.max_pending_requests", PENDING_CALLS),
        ("grpc.server.max_pending_requests_hard_limit", 2 * PENDING_CALLS),
        ("grpc.server_max_unrequested_time_in_server", MAX_UNTAKEN_SECONDS),
    ]


def receive_limit(config: Config) -> int:
    """gRPC's own message limit: four times the configured maximum plus headroom."""
    return RECEIVE_FACTOR * config.max_message_bytes + RECEIVE_HEADROOM_BYTES


def make_handlers(config: Config, metrics: Tally | None) -> Handlers:
    """Return the RPC handlers with the configured limits and keys, timing plans into `metrics`."""
    handlers = Handlers(
        Limits.of(config),
        keyring=load_keys(config.signing_keys, config.signing_keys_file),
        accept_unsigned=config.signing_accept_unsigned,
        search_clock=SearchClock(),
    )
    if metrics is None:
        return handlers
    return replace(
        handlers,
        observe_plan_seconds=metrics.observe_plan,
        observe_suggestion=metrics.observe_suggestion,
        observe_seal=metrics.observe_seal,
    )


def _no_wait_observation(seconds: float) -> None:
    """Without metrics: record no wait."""


def admission_of(config: Config, metrics: Tally | None) -> Admission:
    """The worker's admission bound, its calls held sampled into `metrics`."""
    admission = Admission(config.admission_limit)
    if metrics is not None:
        metrics.watch_held(lambda: admission.held, config.admission_limit)
    return admission


def _address(config: Config, port: int) -> str:
    return f"{config.host}:{port}"


def _bind(server: Any, address: str, config: Config) -> int:
    """Listen on `address` (with TLS when configured); refuse clearly when it cannot be had."""
    files = tls_files(config.tls_cert, config.tls_key, config.tls_client_ca)
    try:
        if files is None:
            port = int(server.add_insecure_port(address))
        else:
            port = int(server.add_secure_port(address, server_credentials(files)))
    except RuntimeError as error:
        raise OSError(f"cannot listen on {address}: {error}") from None
    if port == 0:
        raise OSError(f"cannot listen on {address}")
    return port


# After grpc's stop returns, how long the handlers of calls cut at the end of the grace may
# still take to finish, so that their log lines and counts come before a worker's last flush:
# most of the margin a supervisor gives a worker past the grace (workers.EXIT_MARGIN_SECONDS);
# a traced worker keeps 3 s of it to send its last spans (tracing.FLUSH_SECONDS).
HANDLERS_SECONDS = 4.0
HANDLERS_SECONDS_TRACED = 1.0


@dataclass(frozen=True, slots=True)
class RulesServer:
    """A built thread-pool server, its health servicer, its bound port, its handlers' threads,
    its grace and its admission."""

    server: grpc.Server
    health: HealthStatuses
    port: int
    executor: futures.ThreadPoolExecutor
    grace: Grace
    admission: AdmissionInterceptor

    def start(self) -> None:
        """Start serving and report SERVING."""
        self.server.start()
        for name in HEALTH_NAMES:
            self.health.set(name, health_pb2.HealthCheckResponse.SERVING)

    def stop(self, grace: float, handlers_seconds: float = HANDLERS_SECONDS) -> None:
        """Stop (a GOAWAY on every connection, no new call), then report NOT_SERVING for every
        service to the Watches still open, letting calls finish within grace; then give the
        handlers of calls cut at its end up to `handlers_seconds` to finish."""
        self.grace.begin(grace)
        # The GOAWAY first: a client with health checking that read NOT_SERVING before it
        # would fail its calls at once (its one connection's only backend unhealthy, as for a
        # ClusterIP's callers) until it reconnects; after a GOAWAY it waits for the new one.
        stopped = self.server.stop(grace)
        self.health.enter_graceful_shutdown()
        stopped.wait()
        waiting = threading.Thread(target=self.executor.shutdown, name="rpc-wait", daemon=True)
        waiting.start()
        waiting.join(handlers_seconds)
        self.admission.stop()


def build_server(
    config: Config,
    observer: CallObserver,
    port: int | None = None,
    handlers: Handlers | None = None,
) -> RulesServer:
    """Build (not start) a thread-pool server on the configured host and port (or `port`)."""
    interceptors: list[Any] = [ObservingInterceptor(observer)]
    if observer.tracing is not None:
        # Outside it: the service's interceptor runs inside the span (see service/tracing.py).
        interceptors.insert(0, observer.tracing.interceptor())
    # Outermost: a call refused past the bound meets no other interceptor (service/admission.py).
    admission = admission_of(config, observer.metrics)
    observe_wait = observer.metrics.observe_wait if observer.metrics else _no_wait_observation
    admitting = AdmissionInterceptor(admission, observer, SYNC_THREADS, observe_wait)
    interceptors.insert(0, admitting)
    if observer.metrics is not None:
        observer.metrics.watch_intake(grpc_surface.calls_started, lambda: admitting.taken_in)
        observer.metrics.declare(SERVICE_NAME, METHODS, LOAD_REASONS, TRANSPORTS)
    executor = admitting.pool
    server = grpc.server(executor, interceptors=interceptors, options=grpc_options(config))
    handlers = handlers or make_handlers(config, observer.metrics)
    batched = batch.served(
        config,
        handlers,
        admission,
        observer,
        RECEIVE_FACTOR * config.max_message_bytes,
        shed=admitting.shed,
    )
    add_to_server(RulesServicer(handlers, observer), server, config.max_message_bytes, batched)
    health_servicer = HealthStatuses()
    for name in HEALTH_NAMES:
        health_servicer.set(name, health_pb2.HealthCheckResponse.NOT_SERVING)
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    if config.reflection:
        reflection.add_to_server(server, (SERVICE_NAME, HEALTH_SERVICE_NAME))
    bound = _bind(server, _address(config, config.port if port is None else port), config)
    return RulesServer(server, health_servicer, bound, executor, observer.grace, admitting)
