"""The health port: probes answered by the supervisor, which does no work, so they never wait.

Why the supervisor answers them, what its statuses follow and what the port serves (Check
only, always in plaintext): docs/service.md, "Operations", the health port.
"""

from __future__ import annotations

from concurrent import futures
from typing import Any

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from service.health_status import HEALTH_NAMES, HealthStatuses

# A Check is answered in microseconds; two threads let a second probe in while one answers.
HEALTH_THREADS = 2
# A health request holds a service name: far below a kilobyte.
MAX_HEALTH_MESSAGE_BYTES = 4096
_SERVING = health_pb2.HealthCheckResponse.SERVING
_NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING


class _ChecksOnly(HealthStatuses):
    """The health service without Watch: probes only Check, and clients that watch
    (client-side health checking) ask the gRPC port. The statuses end in the SIGTERM handler,
    in the main thread, which must never wait for grpc as an update sent to a watcher would."""

    def Watch(self, request: Any, context: Any, send_response_callback: Any = None) -> None:  # noqa: N802
        """Refused: UNIMPLEMENTED."""
        context.abort(grpc.StatusCode.UNIMPLEMENTED, "Watch is served on the gRPC port only")


class ProbePort:
    """The supervisor's health server and the statuses it answers with."""

    def __init__(self, host: str, port: int) -> None:
        """Listen on `host`:`port` in plaintext, NOT_SERVING for every name; refuse clearly
        (OSError) when the port cannot be had."""
        self.servicer = _ChecksOnly()
        for name in HEALTH_NAMES:
            self.servicer.set(name, _NOT_SERVING)
        pool = futures.ThreadPoolExecutor(HEALTH_THREADS, thread_name_prefix="health")
        options = [
            # One listener: a port someone else serves must fail here, not be shared.
            ("grpc.so_reuseport", 0),
            ("grpc.max_receive_message_length", MAX_HEALTH_MESSAGE_BYTES),
        ]
        self.server = grpc.server(pool, options=options)
        health_pb2_grpc.add_HealthServicer_to_server(self.servicer, self.server)
        address = f"{host}:{port}"
        try:
            bound = int(self.server.add_insecure_port(address))
        except RuntimeError as error:
            raise OSError(f"cannot listen on {address}: {error}") from None
        if bound == 0:
            raise OSError(f"cannot listen on {address}")
        self.port = bound
        self.server.start()

    def serving(self, serving: bool) -> None:
        """Say SERVING (the workers serve) or NOT_SERVING (none is alive) for every name;
        nothing changes once the drain began."""
        for name in HEALTH_NAMES:
            self.servicer.set(name, _SERVING if serving else _NOT_SERVING)

    def draining(self) -> None:
        """NOT_SERVING for every name, for good (SIGTERM came)."""
        self.servicer.enter_graceful_shutdown()

    def stop(self) -> None:
        """Stop answering: the workers are gone."""
        self.server.stop(0).wait()
