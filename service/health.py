"""The health port: a small gRPC server of each worker's own that answers probes and nothing else.

On the main port a probe arrives behind the work: when calls come faster than a worker takes
them in, gRPC core queues the probe with them, and it is answered only once the one polling
thread of that server gets to it (BENCHMARKS.md, "Probes"). This server has its own completion
queue, polling thread and handler threads, so a probe waits for nothing but the GIL.

It serves grpc.health.v1 only (no reflection, no RulesService), always in plaintext: the
kubelet's gRPC probe cannot speak TLS, and the port tells nothing but the two statuses. Its
statuses are the main server's own: the same HealthServicer is registered on both servers, so
that both say SERVING once the worker serves and NOT_SERVING from the moment its drain begins.
Every worker binds the port with SO_REUSEPORT, as it binds the main port, and the supervisor
holds it (workers.reserve_port) so that a port in use stops the start.
"""

from __future__ import annotations

from concurrent import futures
from dataclasses import dataclass

import grpc
from grpc_health.v1 import health, health_pb2_grpc

# A Check is answered in microseconds; two threads let a second probe in while one answers.
HEALTH_THREADS = 2
# A health request holds a service name: far below a kilobyte.
MAX_HEALTH_MESSAGE_BYTES = 4096


@dataclass(frozen=True, slots=True)
class HealthPort:
    """A built health server and the port it has bound."""

    server: grpc.Server
    port: int

    def start(self) -> None:
        """Start answering probes (with whatever the shared servicer says: NOT_SERVING first)."""
        self.server.start()

    def stop(self) -> None:
        """Stop at once: called once the main server has drained."""
        self.server.stop(0).wait()


def build(host: str, port: int, servicer: health.HealthServicer) -> HealthPort:
    """Build (not start) a plaintext health server on `host`:`port` that answers from
    `servicer`; refuse clearly when the port cannot be had."""
    pool = futures.ThreadPoolExecutor(HEALTH_THREADS, thread_name_prefix="health")
    options = [
        ("grpc.so_reuseport", 1),
        ("grpc.max_receive_message_length", MAX_HEALTH_MESSAGE_BYTES),
    ]
    server = grpc.server(pool, options=options)
    health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
    address = f"{host}:{port}"
    try:
        bound = int(server.add_insecure_port(address))
    except RuntimeError as error:
        raise OSError(f"cannot listen on {address}: {error}") from None
    if bound == 0:
        raise OSError(f"cannot listen on {address}")
    return HealthPort(server, bound)
