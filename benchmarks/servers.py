"""The servers the load benchmarks measure, and one measured load run against a server.

Four kinds of server, each a context manager that yields its address and every process that
serves: benchmarks.bench_server (the service's own server builders plus a benchmark-only no-op
method), its --bare mode (a plain grpcio server answering health Checks: the limit of this
stack), the grpc-go server of benchmarks/go_noop answering the same Checks (the limit of a
Go stack, built here into .cache/), and `basra-rules serve` itself (testkit's launcher).
`measure` sends one load (clients.load, in this process; `measure_ghz`: ghz, a child) and
counts the wall time and the server's CPU seconds (each process's CPU-time clock), since the
load generator shares the machine with the server.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import io
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

from basra.v1 import rules_pb2 as pb
from google.protobuf import descriptor_pb2, empty_pb2, proto
from google.protobuf.descriptor import FileDescriptor
from grpc_health.v1 import health_pb2

from benchmarks.bench_server import NOOP_PATH
from clients import load
from service.handlers import Handlers
from service.outcomes import Facts
from testkit import ghz_data, ghz_tool, harness
from testkit.ports import reserved_port

ROOT = Path(__file__).resolve().parent.parent
APPLY_PATH = "/basra.v1.RulesService/Apply"
HEALTH_PATH = "/grpc.health.v1.Health/Check"
STARTUP_SECONDS = 60.0
GO_NOOP_SOURCE = ROOT / "benchmarks" / "go_noop"
GO_NOOP_BINARY = ROOT / ".cache" / "go_noop" / "go_noop"
GO_BUILD_SECONDS = 600.0
_LIBC = ctypes.CDLL(None, use_errno=True)


def proc_cpu_seconds(pid: int) -> float:
    """Return the CPU seconds a process has used so far (all its threads, ended ones too)."""
    # The process's CPU-time clock counts in nanoseconds; /proc's utime and stime count in
    # 10 ms clock ticks, which read 0 for a short run against the grpc-go server.
    clock = ctypes.c_int()
    failed = _LIBC.clock_getcpuclockid(pid, ctypes.byref(clock))
    if failed:
        raise ProcessLookupError(failed, os.strerror(failed), pid)
    return time.clock_gettime(clock.value)


def cpu_seconds(pids: Sequence[int]) -> float:
    """Return the CPU seconds used so far by several processes together."""
    return sum(proc_cpu_seconds(pid) for pid in pids)


def descendants(pid: int) -> tuple[int, ...]:
    """Return the pids of every process below `pid` (children, their children, ...)."""
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        for child in (task / "children").read_text().split():
            found += [int(child), *descendants(int(child))]
    return tuple(found)


@dataclass(frozen=True)
class Server:
    """A running benchmark server: its address and every process that serves."""

    address: str
    pids: tuple[int, ...]
    metrics_port: int | None = None
    """The /metrics port of `basra-rules serve` (None: off, or a bench server)."""
    health_port: int | None = None
    """The health port of `basra-rules serve` (None: off, or a bench server)."""


@contextmanager
def bench_server(
    workers: int,
    reply_bytes: int,
    log_level: str,
    *,
    sync_threads: int = 0,
    metrics: bool = False,
    flags: Sequence[str] = (),
) -> Iterator[Server]:
    """Run benchmarks.bench_server until the block ends (with `metrics`, /metrics on a port
    held free until it binds it)."""
    options = ["--reply-bytes", str(reply_bytes), "--sync-threads", str(sync_threads)]
    options += ["--workers", str(workers), "--log-level", log_level, *flags]
    with contextlib.ExitStack() as holding:
        port = holding.enter_context(reserved_port()) if metrics else 0
        with _bench_server([*options, "--metrics-port", str(port)]) as server:
            yield replace(server, metrics_port=port or None)


@contextmanager
def bare_server() -> Iterator[Server]:
    """Run the bare grpcio server (benchmarks.bench_server --bare) until the block ends."""
    with _bench_server(["--bare"]) as server:
        yield server


def build_go_noop() -> Path:
    """Build benchmarks/go_noop (its pinned grpc-go from the Go module proxy) into .cache/;
    Go's build cache makes a second build take a second or so."""
    GO_NOOP_BINARY.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        ["go", "build", "-o", str(GO_NOOP_BINARY), "."],
        cwd=GO_NOOP_SOURCE,
        env={**os.environ, "GOFLAGS": "-buildvcs=false"},
        check=True,
        timeout=GO_BUILD_SECONDS,
    )
    return GO_NOOP_BINARY


@contextmanager
def go_server() -> Iterator[Server]:
    """Build and run the grpc-go health server (benchmarks/go_noop) until the block ends."""
    process = subprocess.Popen(
        [str(build_go_noop()), "--host", "127.0.0.1", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    with _running(process) as line:
        yield Server(f"127.0.0.1:{line[1]}", tuple(int(p) for p in line[2:]))


@contextmanager
def _running(process: subprocess.Popen[str]) -> Iterator[list[str]]:
    """Wait for a server's READY line (port, pids) and yield it; SIGTERM it at the end."""
    try:
        assert process.stdout is not None
        line = process.stdout.readline().split()
        if not line or line[0] != "READY":
            raise RuntimeError(f"server did not start: {line}")
        yield line
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@contextmanager
def _bench_server(flags: Sequence[str]) -> Iterator[Server]:
    with contextlib.ExitStack() as running:
        with reserved_port() as port:  # held until READY: the server has bound it by then
            command = [sys.executable, "-m", "benchmarks.bench_server", "--host", "127.0.0.1"]
            command += ["--port", str(port), *flags]
            process = subprocess.Popen(
                command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd=ROOT
            )
            line = running.enter_context(_running(process))
        yield Server(f"127.0.0.1:{port}", tuple(int(p) for p in line[2:]))


@contextmanager
def worktree(rev: str) -> Iterator[Path]:
    """A temporary detached git worktree of `rev` with its gRPC code generated; removed after
    (so that a run measures a commit, not the uncommitted work in a shared checkout)."""
    with tempfile.TemporaryDirectory(prefix="basra-tree-") as parent:
        tree = Path(parent) / "tree"
        subprocess.run(
            ["git", "worktree", "add", "--detach", str(tree), rev],
            cwd=ROOT,
            check=True,
            capture_output=True,
        )
        try:
            subprocess.run(
                [sys.executable, "proto/generate.py"], cwd=tree, check=True, capture_output=True
            )
            yield tree
        finally:
            subprocess.run(
                ["git", "worktree", "remove", "--force", str(tree)], cwd=ROOT, check=False
            )


@contextmanager
def served(
    workers: int,
    log_level: str,
    metrics: bool = False,
    *,
    flags: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    tree: Path | None = None,
    health: bool = False,
) -> Iterator[Server]:
    """Run `basra-rules serve` itself (testkit's launcher) until the block ends; with `tree`,
    the server of that checkout (`python -m clients.cli` from it, its gen/ first on the path);
    with `health`, its health port on."""
    flags = ["--workers", str(workers), *flags]
    program = None
    if tree is not None:
        program = [sys.executable, "-m", "clients.cli"]
        path = os.pathsep.join((str(tree), str(tree / "gen")))
        env = {**(env or {}), "PYTHONPATH": path}
    running = harness.start(
        flags,
        log_level=log_level,
        cwd=tree or ROOT,
        keep_calls=False,
        metrics=metrics,
        health=health,
        env=env,
        program=program,
    )
    try:
        # At a quiet log level the launcher knows that one worker serves; count the others in.
        deadline = time.monotonic() + STARTUP_SECONDS
        while len(running.workers()) < workers and time.monotonic() < deadline:
            time.sleep(0.05)
        pids = (running.pid, *descendants(running.pid))
        yield Server(running.target, pids, running.metrics_port, running.health_port)
    finally:
        running.stop()


@dataclass(frozen=True)
class Measure:
    """One measured load run."""

    rpc: str
    calls: int
    wall_seconds: float
    server_cpu_seconds: float
    errors: int
    p50_ms: float
    p99_ms: float
    generator_cpu_seconds: float = 0.0
    """The load generator's own CPU seconds (it shares the machine with the server)."""

    @property
    def per_cpu_second(self) -> float:
        """Calls per server CPU-second."""
        return self.calls / self.server_cpu_seconds if self.server_cpu_seconds else 0.0

    @property
    def per_wall_second(self) -> float:
        """Calls per wall-clock second."""
        return self.calls / self.wall_seconds if self.wall_seconds else 0.0


def measure(
    server: Server,
    rpc: str,
    requests: Sequence[bytes],
    *,
    calls: int,
    concurrency: int,
    connections: int,
    rps: float = 0.0,
    path: str = "",
    ghz_scratch: Path | None = None,
) -> Measure:
    """Send `calls` calls of one RPC (Apply, the no-op, or `path`); count wall time and the
    server's CPU seconds. With `ghz_scratch` (a directory for its protoset and request
    files), ghz sends the same load instead of clients.load in this process."""
    path = path or (APPLY_PATH if rpc == "Apply" else NOOP_PATH)
    if ghz_scratch is not None:
        load_of = (calls, concurrency, connections, rps)
        return _measure_ghz(server, rpc, path, requests, load_of=load_of, scratch=ghz_scratch)
    service, _, method = path.lstrip("/").partition("/")
    config = load.LoadConfig(
        service=service,
        method=method,
        host=server.address,
        total=calls,
        concurrency=concurrency,
        connections=connections,
        rps=rps,
        timeout=10.0,
    )
    before = cpu_seconds(server.pids)
    started = time.perf_counter()
    generator = time.process_time()  # this process's threads: the generator and nothing else
    report = asyncio.run(load.run_load(config, requests))
    generator = time.process_time() - generator
    wall = time.perf_counter() - started
    used = cpu_seconds(server.pids) - before
    return Measure(
        rpc=rpc,
        calls=report.count,
        wall_seconds=wall,
        server_cpu_seconds=used,
        errors=report.count - report.statuses.get("OK", 0),
        p50_ms=report.percentile_ns(50) / 1e6,
        p99_ms=report.percentile_ns(99) / 1e6,
        generator_cpu_seconds=generator,
    )


def apply_requests() -> tuple[list[bytes], int]:
    """Return the encoded Apply requests of the ghz data and the mean size of their replies."""
    requests = ghz_data.read("apply.json", pb.ApplyRequest)
    handlers = Handlers()
    sizes = [len(handlers.apply(request, Facts())) for request in requests]
    return [r.SerializeToString() for r in requests], round(statistics.mean(sizes))


def protoset(directory: Path) -> Path:
    """Write the descriptors of basra.v1 and grpc.health.v1 (and their imports) as one
    protoset, so that ghz can call servers without reflection (the bare ones); return it."""
    files = descriptor_pb2.FileDescriptorSet()
    seen: set[str] = set()

    def add(file: FileDescriptor) -> None:
        if file.name in seen:
            return
        seen.add(file.name)
        for dependency in file.dependencies:
            add(dependency)
        file.CopyToProto(files.file.add())

    add(pb.DESCRIPTOR)
    add(health_pb2.DESCRIPTOR)
    path = directory / "bench.protoset"
    path.write_bytes(files.SerializeToString())
    return path


def _delimited(requests: Sequence[bytes]) -> bytes:
    """The requests as ghz's --binary-file reads several: each after its length, as protobuf
    writes a length-prefixed message (each request read as an Empty whose unknown fields are
    all of it, which protobuf writes back as they came)."""
    out = io.BytesIO()
    for request in requests:
        message = empty_pb2.Empty.FromString(request)
        assert message.SerializeToString() == request, "a request protobuf would not write back"
        proto.serialize_length_prefixed(message, out)
    return out.getvalue()


def _measure_ghz(
    server: Server,
    rpc: str,
    path: str,
    requests: Sequence[bytes],
    *,
    load_of: tuple[int, int, int, float],
    scratch: Path,
) -> Measure:
    """`measure` with ghz sending the load: (calls, concurrency, connections, rps)."""
    calls, concurrency, connections, rps = load_of
    sources = scratch / "bench.protoset"
    if not sources.exists():
        protoset(scratch)
    data = scratch / f"{rpc}-{len(requests)}.bin".replace("/", "_").replace(" ", "_")
    if not data.exists():
        data.write_bytes(_delimited(requests))
    arguments = ["--insecure", "--protoset", str(sources), "--call", path.lstrip("/")]
    arguments += ["-B", str(data), "-n", str(calls), "-c", str(concurrency)]
    arguments += ["--connections", str(connections), "-t", "10s", "-O", "json"]
    if rps:
        arguments += ["--rps", str(round(rps))]
    before = cpu_seconds(server.pids)
    done = ghz_tool.ghz([*arguments, server.address])
    used = cpu_seconds(server.pids) - before
    report = done.report()
    percentiles = {e["percentage"]: e["latency"] for e in report["latencyDistribution"] or []}
    return Measure(
        rpc=rpc,
        calls=report["count"],
        wall_seconds=report["total"] / 1e9,
        server_cpu_seconds=used,
        errors=report["count"] - report["statusCodeDistribution"].get("OK", 0),
        p50_ms=percentiles.get(50, 0) / 1e6,
        p99_ms=percentiles.get(99, 0) / 1e6,
        generator_cpu_seconds=done.cpu_seconds,
    )
