"""Worker processes sharing one gRPC port (SO_REUSEPORT) under a supervising parent.

As in grpc's multiprocessing example, the parent reserves the port with a bound (not
listening) SO_REUSEPORT socket and starts the workers, which each run a whole gRPC server on
that port; the kernel spreads connections across them. Workers are spawned (fork and exec),
so no gRPC state ever crosses a fork. The parent serves no RulesService call: it serves
/metrics aggregated from every worker (prometheus-client multiprocess mode) and, with
--health-port, the probes (service/health.py: its one gRPC server, which nothing else waits
behind), replaces a worker that dies or hangs (service/worker_probes.py: each worker answers the
parent's health Checks through its own server, on a private unix socket), and on SIGTERM
forwards it to every worker and waits for them to drain.
"""

from __future__ import annotations

import contextlib
import gc
import multiprocessing
import os
import shutil
import signal
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess
from types import FrameType
from typing import TYPE_CHECKING, Any

from prometheus_client import multiprocess

from service import metrics, plan_table
from service.config import Config
from service.logs import Logger, make_logger
from service.worker_probes import (
    PoolWatch,
    ReplacedWorkers,
    WorkerProbes,
    close_listener,
    socket_directory,
)

if TYPE_CHECKING:
    from service.health import ProbePort

# How long a worker may take to import, build and start its server.
STARTUP_SECONDS = 60.0
# How often a waiting process looks at its flags (parent alive, stop asked).
POLL_SECONDS = 0.25
# Beyond the grace, how long the parent waits for a worker before killing it.
EXIT_MARGIN_SECONDS = 5.0


def reserve_port(host: str, port: int) -> socket.socket:
    """Bind (without listening) an SO_REUSEPORT socket, so the port is ours for the workers."""
    name = host.strip("[]") or None
    family, kind, proto, _, address = socket.getaddrinfo(
        name, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )[0]
    if port:
        # SO_REUSEPORT would let a second server silently share a port that is already served;
        # a plain bind first makes sure nobody listens there.
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind(address)
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    try:
        sock.bind(address)
    except OSError:
        sock.close()
        raise
    return sock


def _on_stop_signals(action: Callable[[], None]) -> None:
    """Run `action` on SIGTERM and SIGINT (both mean: stop gracefully)."""

    def handler(signum: int, frame: FrameType | None) -> None:
        action()

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)


def worker_main(
    config: Config, port: int, ready: Connection, probe_address: str | None = None
) -> None:
    """Run one worker: serve on the shared port (and on `probe_address`, the unix socket of
    the parent's probes) until SIGTERM or until the parent is gone."""
    logger = make_logger(config.log_level, config.log_format).bind(worker=os.getpid())
    from service.interceptors import CallObserver  # the server's parts: workers only

    plan_table.install()  # before serving: no reachable floor is searched in a call

    tracing = None
    if config.tracing:  # OpenTelemetry is imported by traced workers only
        from service.tracing import Tracing

        tracing = Tracing.start(logger)  # this process's own provider, after the spawn
    tally = metrics.Tally(metrics.Metrics.create(None))
    observer = CallObserver(tally, logger, tracing)
    stop_flushing = tally.flush_every(metrics.FLUSH_SECONDS)
    # Everything imported so far lives as long as the worker: move it out of the cyclic
    # collector's sight, so that full collections walk less.
    gc.collect()
    gc.freeze()
    try:
        _serve(config, observer, port, ready, logger, probe_address=probe_address)
    finally:
        stop_flushing()  # the calls counted since the last flush, SIGTERM's drain included
        if tracing is not None and not tracing.stop():  # the spans of the drained calls too
            logger.warning("tracing", message="spans still queued at exit were dropped")


def _serve(
    config: Config,
    observer: Any,
    port: int,
    ready: Connection,
    logger: Logger,
    *,
    probe_address: str | None,
) -> None:
    from grpc_health.v1.health_pb2 import HealthCheckResponse

    from service.health_status import HEALTH_NAMES
    from service.server import HANDLERS_SECONDS, HANDLERS_SECONDS_TRACED, build_server

    stop = threading.Event()
    _on_stop_signals(stop.set)
    server = build_server(config, observer, port)
    # The same server answers the parent's probes, so they take the path of every call.
    if probe_address is not None and not server.server.add_insecure_port(probe_address):
        raise OSError(f"cannot listen on {probe_address}")
    server.start()
    pool, admission = server.admission.pool, server.admission.admission

    def set_serving(serving: bool) -> None:
        for name in HEALTH_NAMES:
            server.health.set(
                name, HealthCheckResponse.SERVING if serving else HealthCheckResponse.NOT_SERVING
            )

    watch = PoolWatch(lambda: admission.held, lambda: pool.moved, set_serving, logger)
    watch.start()
    ready.send(server.port)
    ready.close()
    parent = os.getppid()
    while not stop.wait(POLL_SECONDS):
        if os.getppid() != parent:
            logger.warning("parent gone, stopping")
            break
    watch.stop()
    logger.info("worker stopping", grace_seconds=config.grace_seconds)
    server.stop(
        config.grace_seconds, HANDLERS_SECONDS_TRACED if config.tracing else HANDLERS_SECONDS
    )
    logger.info("worker stopped")


@dataclass(frozen=True, slots=True)
class Worker:
    """A started worker process and the slot it fills."""

    slot: int
    process: BaseProcess


class StartupError(RuntimeError):
    """A worker exited or stayed silent before it started serving."""


def _start_worker(
    config: Config, port: int, slot: int, checks: WorkerProbes | None = None
) -> Worker:
    """Spawn a worker and wait until it serves; refuse if it dies or stays silent. With
    `checks`, the worker also serves its probes' socket, and is probed from now on."""
    context = multiprocessing.get_context("spawn")
    reader, writer = context.Pipe(duplex=False)
    address = None if checks is None else checks.address(slot)
    process = context.Process(
        target=worker_main,
        args=(config, port, writer, address),
        name=f"basra-worker-{slot}",
        daemon=False,
    )
    process.start()
    writer.close()
    try:
        if not wait([reader, process.sentinel], STARTUP_SECONDS) or not reader.poll():
            raise StartupError(f"worker {slot} did not start (exit code {process.exitcode})")
        try:
            reader.recv()
        except EOFError:
            raise StartupError(f"worker {slot} exited while starting") from None
    except StartupError:
        if process.is_alive():
            process.kill()
        process.join()
        raise
    finally:
        reader.close()
    if checks is not None and process.pid is not None:
        checks.watch(slot, process.pid)
    return Worker(slot, process)


def _signal_all(workers: dict[int, Worker], signum: int) -> None:
    for worker in workers.values():
        pid = worker.process.pid
        if pid is not None and worker.process.exitcode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signum)


def supervise(config: Config, logger: Logger) -> int:
    """Run the workers until SIGTERM/SIGINT; return the process exit code."""
    workers: dict[int, Worker] = {}
    stopping = threading.Event()
    probes: ProbePort | None = None

    def stop() -> None:
        # Forward at once, so every worker reports NOT_SERVING as early as possible.
        stopping.set()
        if probes is not None:
            probes.draining()
        _signal_all(workers, signal.SIGTERM)

    _on_stop_signals(stop)
    try:
        reservation = reserve_port(config.host, config.port)
    except OSError as error:
        logger.error("cannot reserve the gRPC port", port=config.port, error=str(error))
        return 1
    if config.health_port:
        from service.health import ProbePort  # gRPC in the parent only for the probes

        try:
            probes = ProbePort(config.host, config.health_port)
        except OSError as error:
            reservation.close()
            logger.error(
                "cannot serve the health port", health_port=config.health_port, error=str(error)
            )
            return 1
        if stopping.is_set():  # SIGTERM came while the port was being set up
            probes.draining()
    # Made once the port is ours, and removed by the `finally` below on every way out, so that
    # no failed start leaves a directory behind.
    own_dir = config.metrics_dir is None
    try:
        directory = metrics.prepare_directory(config.metrics_dir)
    except OSError as error:
        reservation.close()
        if probes is not None:
            probes.stop()
        logger.error(
            "cannot use the metrics directory",
            metrics_dir=config.metrics_dir or "(a new temporary directory)",
            error=metrics.describe_os_error(error),
        )
        return 1
    metrics.enable_multiprocess(directory)
    replaced = ReplacedWorkers()
    checks: WorkerProbes | None = None
    try:
        if config.worker_probe_seconds > 0:
            try:
                sockets = socket_directory()
            except OSError as error:
                logger.error(
                    "cannot make the directory of the worker probes' sockets",
                    error=metrics.describe_os_error(error),
                )
                return 1
            checks = WorkerProbes(
                sockets, config.worker_probe_seconds, config.worker_probe_timeout_seconds
            )
        metrics_port = None
        if config.metrics_port:
            registry = metrics.multiprocess_registry(directory)
            registry.register(replaced)
            try:
                metrics_port = metrics.serve(config.host, config.metrics_port, registry)
            except OSError as error:
                logger.error(
                    "cannot serve metrics", metrics_port=config.metrics_port, error=str(error)
                )
                return 1
        port = int(reservation.getsockname()[1])
        try:
            for slot in range(config.workers):
                if stopping.is_set():
                    break
                workers[slot] = _start_worker(config, port, slot, checks)
                if stopping.is_set():  # the signal came while this worker was starting
                    _signal_all(workers, signal.SIGTERM)
        except StartupError as error:
            logger.error("worker failed to start", error=str(error))
            if checks is not None:
                checks.close()
            stop()
            _drain(workers, config, logger)
            return 1
        if probes is not None:
            probes.serving(True)
        logger.info(
            "serving",
            port=port,
            health_port=config.health_port or None,
            metrics_port=metrics_port,
            workers=len(workers),
            pids=[w.process.pid for w in workers.values()],
            worker_probe_seconds=config.worker_probe_seconds or None,
            worker_probe_timeout_seconds=config.worker_probe_timeout_seconds if checks else None,
        )
        _watch(
            workers,
            config,
            port=port,
            directory=directory,
            stopping=stopping,
            logger=logger,
            probes=probes,
            checks=checks,
            replaced=replaced,
        )
        if checks is not None:
            checks.close()  # a draining worker stops answering: no probe judges it now
        _drain(workers, config, logger)
        return 0
    finally:
        reservation.close()
        if probes is not None:
            probes.stop()
        if checks is not None:
            checks.close()
            shutil.rmtree(checks.directory, ignore_errors=True)
        if own_dir:
            shutil.rmtree(directory, ignore_errors=True)


def _watch(
    workers: dict[int, Worker],
    config: Config,
    *,
    port: int,
    directory: str,
    stopping: threading.Event,
    logger: Logger,
    probes: ProbePort | None = None,
    checks: WorkerProbes | None = None,
    replaced: ReplacedWorkers | None = None,
) -> None:
    """Replace workers that die or hang until asked to stop; while none is alive, the probes
    say NOT_SERVING."""
    vacant: dict[int, str] = {}  # slot -> why its worker is gone, until a new one serves
    while not stopping.is_set():
        by_sentinel = {w.process.sentinel: w for w in workers.values() if w.slot not in vacant}
        ended = wait(list(by_sentinel), 0.0 if vacant else POLL_SECONDS)
        if stopping.is_set():
            return
        for sentinel in ended:
            dead = by_sentinel[sentinel]  # type: ignore[index]
            dead.process.join()
            logger.warning(
                "worker died, replacing it", pid=dead.process.pid, exit_code=dead.process.exitcode
            )
            vacant[dead.slot] = "died"
        if checks is not None:
            now = time.monotonic()
            for hung in checks.hung(now):
                worker = workers[hung.slot]
                if hung.slot in vacant or worker.process.pid != hung.pid:
                    continue
                # Its listener out of the port first, then SIGKILL, not SIGTERM: a stopped or
                # wedged worker drains nothing. The kernel resets its connections, and their
                # callers reconnect to the live workers.
                unclosed = close_listener(hung.pid, port)
                logger.warning(
                    "worker hung, killing and replacing it",
                    pid=hung.pid,
                    probe=hung.failure,
                    unanswered_seconds=hung.silent_seconds,
                    timeout_seconds=checks.timeout,
                    listener_closed=unclosed is None,
                    **({} if unclosed is None else {"listener_open": unclosed}),
                )
                worker.process.kill()
                worker.process.join(EXIT_MARGIN_SECONDS)
                vacant[hung.slot] = "hung"
            checks.send_due(now)
        if vacant:
            _replace(
                workers,
                vacant,
                config=config,
                port=port,
                directory=directory,
                logger=logger,
                probes=probes,
                checks=checks,
                replaced=replaced,
            )
            if stopping.is_set():
                _signal_all(workers, signal.SIGTERM)


def _replace(
    workers: dict[int, Worker],
    vacant: dict[int, str],
    *,
    config: Config,
    port: int,
    directory: str,
    logger: Logger,
    probes: ProbePort | None,
    checks: WorkerProbes | None,
    replaced: ReplacedWorkers | None,
) -> None:
    """Start a worker in each vacant slot (a slot whose start fails stays vacant, and is tried
    again a second later); NOT_SERVING while no worker is alive."""
    for slot in vacant:
        gone = workers[slot]
        if checks is not None:
            checks.forget(slot)
        if gone.process.pid is not None:
            multiprocess.mark_process_dead(gone.process.pid, directory)  # type: ignore[no-untyped-call]
    alive = any(w.process.is_alive() for w in workers.values() if w.slot not in vacant)
    if probes is not None and not alive:
        probes.serving(False)
    for slot, reason in list(vacant.items()):
        gone = workers[slot]
        try:
            workers[slot] = _start_worker(config, port, slot, checks)
        except StartupError as error:
            logger.error("replacement worker failed to start", error=str(error))
            time.sleep(1.0)
            continue
        del vacant[slot]
        if replaced is not None:
            replaced.count(reason)
        if probes is not None:
            probes.serving(True)
        logger.info(
            "worker replaced",
            pid=workers[slot].process.pid,
            replaced=gone.process.pid,
            reason=reason,
        )


def _drain(workers: dict[int, Worker], config: Config, logger: Logger) -> None:
    """Wait for every worker to finish its graceful stop; kill those past the deadline."""
    deadline = time.monotonic() + config.grace_seconds + EXIT_MARGIN_SECONDS
    for worker in workers.values():
        worker.process.join(max(0.0, deadline - time.monotonic()))
        if worker.process.exitcode is None:
            logger.error("worker did not stop in time, killing it", pid=worker.process.pid)
            worker.process.kill()
            worker.process.join()
    logger.info("stopped", workers=len(workers))
