"""The rules server as `basra-rules serve` builds it, plus a no-op RPC for the load benchmark.

benchmarks.load_bench needs, in one server configuration, both the real RulesService and a
call that does nothing but carry a payload of the same size, to tell gRPC's own cost from the
service's. This runner builds every worker's server with the service's own builder
(service.server.build_server: same interceptors, metrics, health, reflection and options) and
adds one benchmark-only method, /basra.bench.Noop/Echo, that takes the raw request
bytes and answers a fixed reply of a given size. It never ships: it lives under benchmarks/.

    .venv/bin/python -m benchmarks.bench_server --port 50061 --workers 2 --reply-bytes 1500

Worker processes share the port through SO_REUSEPORT as in service.workers; the parent prints
one line "READY <port> <pid> <pid>..." once every worker serves, and stops them on SIGTERM.

With --bare it runs instead the limit of this stack, in this one process: a plain grpcio
server (a thread pool of 8, the standard health servicer saying SERVING, nothing else),
against which the benchmark compares the service answering its own calls:

    .venv/bin/python -m benchmarks.bench_server --bare --port 50062
"""

from __future__ import annotations

import argparse
import atexit
import functools
import gc
import multiprocessing
import os
import shutil
import signal
import sys
import tempfile
import threading
from multiprocessing.connection import Connection
from typing import Any

from service import config as service_config
from service import metrics, plan_table
from service.config import Config
from service.logs import make_logger

NOOP_SERVICE = "basra.bench.Noop"
NOOP_METHOD = "Echo"
NOOP_PATH = f"/{NOOP_SERVICE}/{NOOP_METHOD}"
STARTUP_SECONDS = 60.0


def noop_handler(reply: bytes) -> Any:
    """Return the generic handler of the no-op method: raw bytes in, a fixed reply out."""
    import grpc

    def echo(request: bytes, context: Any) -> bytes:
        return reply

    method = grpc.unary_unary_rpc_method_handler(echo)
    return grpc.method_handlers_generic_handler(NOOP_SERVICE, {NOOP_METHOD: method})


def worker_main(
    config: Config,
    port: int,
    reply_bytes: int,
    sync_threads: int,
    ready: Connection,
    *,
    switch_interval: float = 0.0,
    pending_calls: int = 0,
    grpc_limit: int = 0,
) -> None:
    """Run one worker: the service's server plus the no-op method, until SIGTERM."""
    from service import server
    from service.interceptors import CallObserver

    if sync_threads:
        # A benchmark-only knob: the service's builder reads this module constant when called.
        server.SYNC_THREADS = sync_threads
    if switch_interval:  # a benchmark-only knob: the workers' GIL switch interval
        sys.setswitchinterval(switch_interval)
    if pending_calls:  # a benchmark-only knob: the calls gRPC core holds before the intake
        server.PENDING_CALLS = pending_calls
    if grpc_limit:  # a benchmark-only knob: grpcio's own refusal past this many calls
        import grpc

        build = grpc.server  # what service.server calls as it builds its server
        grpc.server = functools.partial(build, maximum_concurrent_rpcs=grpc_limit)

    logger = make_logger(config.log_level, config.log_format).bind(worker=os.getpid())
    tally = metrics.Tally(metrics.Metrics.create(None))
    tally.flush_every(metrics.FLUSH_SECONDS)
    observer = CallObserver(tally, logger)
    # As service.workers does: the plan table installed before serving, then start-up objects
    # out of the cyclic collector's sight.
    plan_table.install()
    gc.collect()
    gc.freeze()
    reply = b"\x01" * reply_bytes
    _serve(config, observer, port, reply, ready)


def _serve(config: Config, observer: Any, port: int, reply: bytes, ready: Connection) -> None:
    from service.server import build_server

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    server = build_server(config, observer, port)
    server.server.add_generic_rpc_handlers((noop_handler(reply),))
    server.start()
    ready.send(server.port)
    ready.close()
    stop.wait()
    server.stop(1.0)


BARE_THREADS = 8


def serve_bare(host: str, port: int) -> int:
    """Serve the bare grpcio server until SIGTERM; print READY once it serves."""
    from concurrent import futures

    import grpc
    from grpc_health.v1 import health, health_pb2, health_pb2_grpc

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=BARE_THREADS))
    servicer = health.HealthServicer()
    # Both names the chart's probes ask (liveness "", readiness the service's), as the service.
    for name in ("", "basra.v1.RulesService"):
        servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
    health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
    bound = server.add_insecure_port(f"{host}:{port}")
    server.start()
    print(f"READY {bound} {os.getpid()}", flush=True)
    stop.wait()
    server.stop(1.0).wait()
    return 0


def main(argv: list[str] | None = None) -> int:
    """Start the workers, print READY with the pids, stop them all on SIGTERM."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    service_config.add_arguments(parser)
    parser.add_argument("--reply-bytes", type=int, default=1024, help="no-op reply size")
    parser.add_argument(
        "--sync-threads", type=int, default=0, help="sync server threads (0: the service's)"
    )
    parser.add_argument(
        "--switch-interval",
        type=float,
        default=0.0,
        help="sys.setswitchinterval of the workers (0: Python's default, as the service)",
    )
    parser.add_argument(
        "--pending-calls",
        type=int,
        default=0,
        help="calls gRPC core holds before the server takes them in (0: the service's)",
    )
    parser.add_argument(
        "--grpc-limit",
        type=int,
        default=0,
        help="grpcio's maximum_concurrent_rpcs (0: none, as the service)",
    )
    parser.add_argument("--bare", action="store_true", help="the bare grpcio server instead")
    args = vars(parser.parse_args(argv))
    if args.pop("bare"):
        config = service_config.resolve(args, {})
        return serve_bare(config.host, config.port)
    reply_bytes = int(args.pop("reply_bytes"))
    sync_threads = int(args.pop("sync_threads"))
    switch_interval = float(args.pop("switch_interval"))
    pending_calls = int(args.pop("pending_calls"))
    grpc_limit = int(args.pop("grpc_limit"))
    config = service_config.resolve(args, os.environ)
    if config.metrics_dir:
        directory = metrics.prepare_directory(config.metrics_dir)
    else:  # a directory of its own, removed at exit (the supervisor stays free of grpc)
        directory = metrics.prepare_directory(tempfile.mkdtemp(prefix="basra-bench-metrics-"))
        atexit.register(shutil.rmtree, directory, ignore_errors=True)
    metrics.enable_multiprocess(directory)
    if config.metrics_port:  # /metrics as `basra-rules serve` serves it (benchmarks.overload)
        metrics.serve(config.host, config.metrics_port, metrics.multiprocess_registry(directory))
    context = multiprocessing.get_context("spawn")
    stopping = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopping.set())
    signal.signal(signal.SIGINT, lambda *_: stopping.set())
    processes = []
    for slot in range(config.workers):
        reader, writer = context.Pipe(duplex=False)
        process = context.Process(
            target=worker_main,
            args=(config, config.port, reply_bytes, sync_threads, writer),
            kwargs={
                "switch_interval": switch_interval,
                "pending_calls": pending_calls,
                "grpc_limit": grpc_limit,
            },
            name=f"w{slot}",
        )
        process.start()
        writer.close()
        if not reader.poll(STARTUP_SECONDS):
            print(f"worker {slot} did not start", file=sys.stderr)
            process.kill()
            stopping.set()
            break
        reader.recv()
        processes.append(process)
    else:
        pids = " ".join(str(p.pid) for p in processes)
        print(f"READY {config.port} {os.getpid()} {pids}", flush=True)
    while not stopping.wait(0.25):
        if any(p.exitcode is not None for p in processes):
            print("a worker died", file=sys.stderr)
            break
    for process in processes:
        if process.pid is not None and process.exitcode is None:
            os.kill(process.pid, signal.SIGTERM)
    for process in processes:
        process.join(10.0)
        if process.exitcode is None:
            process.kill()
    return 0


if __name__ == "__main__":
    sys.exit(main())
