"""Issue 43's engine choice by measurement: Apply over gRPC, the gateway and Connect, one run.

Three ways to answer the same realistic Apply requests (the ghz data, deploy/ghz/data/
apply.json), measured round after round in turn under the same closed-loop load:

- grpc: the service's own server (benchmarks.bench_server, one worker) called over gRPC;
- gateway: the same server behind grpc-gateway (`basra-gateway`, testkit.http_gateway),
  called with HTTP/1.1 and the requests as proto3 JSON; the CPU counted is the server's AND
  the gateway's (each process's CPU-time clock);
- connect: the Connect protocol served from a Python worker, a prototype that lives only
  here: connectrpc's WSGI application, generated at run time by protoc-gen-connectrpc (its
  google.protobuf flavour, into a scratch directory) and served by gunicorn (one gthread
  worker, 8 threads, as the gRPC worker's 8), calling the same Handlers. It has none of the
  service's interceptors, metrics or logs: its CPU is a floor of what Connect would cost.

Beside them, in this process, the unavoidable part of any engine that runs in the Python
worker: json_format's Parse of the request and MessageToJson of the answer (connectrpc's own
JSON codec), against protobuf's binary FromString and SerializeToString.

    .venv/bin/python -m benchmarks.http_engines                 # 3 rounds
    .venv/bin/python -m benchmarks.http_engines --rounds 5 --scale 0.5
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.util
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyqwest
from basra.v1 import rules_pb2 as pb
from google.protobuf import json_format

from benchmarks.measure import finish, header, machine, now
from benchmarks.servers import (
    ROOT,
    Server,
    apply_requests,
    bench_server,
    cpu_seconds,
    descendants,
    measure,
)
from testkit import ghz_data
from testkit.ports import reserved_port

APPLY_ROUTE = "/basra.v1.RulesService/Apply"
CONNECT_CODE_ENV = "BASRA_CONNECT_CODE"
CONNECT_THREADS = 8
CONNECT_APP = "benchmarks.http_engines:connect_app()"  # gunicorn's factory call
STARTUP_SECONDS = 60.0
CALL_SECONDS = 10.0


@dataclass(frozen=True)
class Run:
    """One measured load of one engine."""

    calls: int
    failed: int
    cpu_seconds: float
    """Every serving process's: the Python server's, and the gateway's where there is one."""
    python_seconds: float
    """The Python server's processes' alone (GIL-bound workers: the scarce CPU)."""
    p50_ms: float
    p99_ms: float

    def row(self) -> dict[str, float]:
        """CPU µs per call (all, the Python server's), p50 and p99 in ms."""
        return {
            "cpu_us": self.cpu_seconds / self.calls * 1e6,
            "python_us": self.python_seconds / self.calls * 1e6,
            "p50_ms": self.p50_ms,
            "p99_ms": self.p99_ms,
        }


def rank_ms(latencies_ns: Sequence[int], pct: float) -> float:
    """The nearest-rank percentile of latencies, in ms (0 when none)."""
    if not latencies_ns:
        return 0.0
    ordered = sorted(latencies_ns)
    return ordered[min(len(ordered), max(1, math.ceil(len(ordered) * pct / 100))) - 1] / 1e6


def json_bodies(requests: Sequence[pb.ApplyRequest]) -> list[bytes]:
    """The requests in the proto3 JSON mapping, compact, as an HTTP caller sends them."""
    return [
        json.dumps(json_format.MessageToDict(r), separators=(",", ":")).encode() for r in requests
    ]


async def _http_load(
    url: str, bodies: Sequence[bytes], headers: dict[str, str], calls: int, concurrency: int
) -> tuple[list[int], int]:
    """Send `calls` POSTs from `concurrency` loops (keep-alive connections), the bodies in
    turn; return the latencies of the 200s (ns) and how many calls failed."""
    transport = pyqwest.HTTPTransport(
        enable_otel=False,
        enable_gzip=False,
        enable_brotli=False,
        enable_zstd=False,
        pool_max_idle_per_host=concurrency,
        timeout=CALL_SECONDS,
    )
    client = pyqwest.Client(transport)
    latencies: list[int] = []
    failed = 0
    turn = iter(range(calls))

    async def loop() -> None:
        nonlocal failed
        for i in turn:
            started = time.perf_counter_ns()
            try:
                answer = await client.post(url, headers, bodies[i % len(bodies)])
            except Exception:
                failed += 1
                continue
            if answer.status == 200 and answer.content:
                latencies.append(time.perf_counter_ns() - started)
            else:
                failed += 1

    async with transport:
        await asyncio.gather(*(loop() for _ in range(concurrency)))
    return latencies, failed


def http_measure(
    url: str,
    python: Sequence[int],
    others: Sequence[int],
    bodies: Sequence[bytes],
    headers: dict[str, str],
    *,
    calls: int,
    concurrency: int,
) -> Run:
    """One HTTP load; the CPU of the Python server's processes and of the `others` counted."""
    before = cpu_seconds(python), cpu_seconds(others)
    latencies, failed = asyncio.run(_http_load(url, bodies, headers, calls, concurrency))
    used = cpu_seconds(python) - before[0]
    total = used + cpu_seconds(others) - before[1]
    return Run(calls, failed, total, used, rank_ms(latencies, 50), rank_ms(latencies, 99))


def grpc_measure(server: Server, requests: Sequence[bytes], *, calls: int, concurrency: int) -> Run:
    """One gRPC load (clients.load, as benchmarks.rpc_cpu) of Apply."""
    got = measure(server, "Apply", requests, calls=calls, concurrency=concurrency,
                  connections=concurrency // 2 or 1)  # fmt: skip
    used = got.server_cpu_seconds
    return Run(got.calls, got.errors, used, used, got.p50_ms, got.p99_ms)


# --- The Connect prototype (never shipped: it lives in the benchmark) ---------------------


def generate_connect(out: Path) -> Path:
    """Generate rules_connect.py (google.protobuf flavour, sync) from proto/ into `out`."""
    from grpc_tools import protoc

    include = Path(protoc.__file__).resolve().parent / "_proto"
    plugin = Path(sys.executable).parent / "protoc-gen-connectrpc"
    code = protoc.main([
        "grpc_tools.protoc",
        f"-I{ROOT / 'proto'}",
        f"-I{include}",
        f"--plugin=protoc-gen-connectrpc={plugin}",
        f"--connectrpc_out=protobuf=google,io=sync:{out}",
        "basra/v1/rules.proto",
    ])  # fmt: skip
    if code != 0:
        raise RuntimeError(f"protoc-gen-connectrpc failed ({code})")
    return out / "basra" / "v1" / "rules_connect.py"


def _load_connect(path: Path) -> Any:
    """Import the generated module as basra.v1.rules_connect (its `.rules_pb2` imports are
    relative: they find gen/'s basra.v1, which it was generated beside)."""
    spec = importlib.util.spec_from_file_location("basra.v1.rules_connect", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def connect_app() -> Any:
    """gunicorn's application factory: the generated WSGI app over the service's Handlers."""
    from service import plan_table
    from service.handlers import Handlers
    from service.outcomes import Facts

    generated = _load_connect(Path(os.environ[CONNECT_CODE_ENV]))
    plan_table.install()  # as service.workers does before serving
    handlers = Handlers()

    class Rules(generated.RulesServiceSync):  # type: ignore[misc,name-defined]
        """Apply over the service's handler (the others answer UNIMPLEMENTED, the generated
        default): its encoded answer parsed into the message connectrpc encodes, the price
        of the handlers answering bytes."""

        def apply(self, request: pb.ApplyRequest, ctx: object, /) -> pb.ApplyResponse:
            return pb.ApplyResponse.FromString(handlers.apply(request, Facts()))

    return generated.RulesServiceWSGIApplication(Rules())


@contextlib.contextmanager
def connect_server(body: bytes) -> Iterator[tuple[str, tuple[int, ...]]]:
    """Run the Connect prototype under gunicorn; yield its base URL and every pid."""
    with tempfile.TemporaryDirectory(prefix="basra-connect-") as scratch:
        code = generate_connect(Path(scratch))
        with reserved_port() as port:
            command = [sys.executable, "-m", "gunicorn", "--worker-class", "gthread"]
            command += ["--workers", "1", "--threads", str(CONNECT_THREADS)]
            command += ["--bind", f"127.0.0.1:{port}", "--log-level", "warning"]
            command += [
                "--keep-alive",
                "60",
                "--no-control-socket",
                "benchmarks.http_engines:connect_app()",
            ]
            env = {**os.environ, CONNECT_CODE_ENV: str(code)}
            process = subprocess.Popen(command, cwd=ROOT, env=env)
        url = f"http://127.0.0.1:{port}"
        try:
            _wait_ready(url + APPLY_ROUTE, body, process)
            yield url, (process.pid, *descendants(process.pid))
        finally:
            process.terminate()
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _wait_ready(url: str, body: bytes, process: subprocess.Popen[bytes]) -> None:
    """Poll until the server answers one Apply with 200 (fail if it exits or never does)."""
    client = pyqwest.SyncClient(pyqwest.SyncHTTPTransport(enable_otel=False, timeout=5.0))
    deadline = time.monotonic() + STARTUP_SECONDS
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the Connect server exited ({process.returncode})")
        with contextlib.suppress(Exception):
            if client.post(url, {"Content-Type": "application/json"}, body).status == 200:
                return
        time.sleep(0.2)
    raise RuntimeError("the Connect server did not answer in time")


# --- The codec floor, in this process -----------------------------------------------------


def codec_us(requests: Sequence[pb.ApplyRequest], passes: int) -> dict[str, float]:
    """CPU µs per Apply of each codec: JSON (json_format, as connectrpc's google codec) and
    binary, request decoded and answer encoded."""
    from service.handlers import Handlers
    from service.outcomes import Facts

    handlers = Handlers()
    answers = [pb.ApplyResponse.FromString(handlers.apply(r, Facts())) for r in requests]
    texts = [json_format.MessageToJson(r) for r in requests]
    binary = [r.SerializeToString() for r in requests]

    def json_pass() -> None:
        for text, answer in zip(texts, answers, strict=True):
            json_format.Parse(text, pb.ApplyRequest())
            json_format.MessageToJson(answer)

    def binary_pass() -> None:
        for data, answer in zip(binary, answers, strict=True):
            pb.ApplyRequest.FromString(data)
            answer.SerializeToString()

    out = {}
    for name, one_pass in (("json", json_pass), ("binary", binary_pass)):
        started = time.process_time()
        for _ in range(passes):
            one_pass()
        out[name] = (time.process_time() - started) / (passes * len(requests)) * 1e6
    return out


ENGINES = ("grpc", "gateway", "connect")


def main(argv: list[str] | None = None) -> int:
    """Measure and print the table (and optionally save the rounds as JSON)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--calls", type=int, default=3000, help="Apply calls per engine a round")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--json-out", type=Path)
    args = parser.parse_args(argv)
    # Imported here: gunicorn's worker imports this module for connect_app alone.
    from testkit.http_gateway import running

    requests = ghz_data.read("apply.json", pb.ApplyRequest)
    binary, reply_bytes = apply_requests()
    bodies = json_bodies(requests)
    started = now()
    rounds: list[dict[str, dict[str, float]]] = []
    gateway_headers = {"Content-Type": "application/json", "Grpc-Timeout": "10S"}
    connect_headers = {"Content-Type": "application/json", "Connect-Timeout-Ms": "10000"}
    with contextlib.ExitStack() as stack:
        server = stack.enter_context(bench_server(1, reply_bytes, "warning"))
        front = stack.enter_context(running(server.address))
        base, gateway_pid = front.url, front.process.pid
        connect_url, connect_pids = stack.enter_context(connect_server(bodies[0]))

        def one(engine: str, calls: int) -> Run:
            if engine == "grpc":
                return grpc_measure(server, binary, calls=calls, concurrency=args.concurrency)
            if engine == "gateway":
                return http_measure(base + APPLY_ROUTE, server.pids, [gateway_pid], bodies,
                                    gateway_headers,
                                    calls=calls, concurrency=args.concurrency)  # fmt: skip
            return http_measure(connect_url + APPLY_ROUTE, connect_pids, [], bodies,
                                connect_headers,
                                calls=calls, concurrency=args.concurrency)  # fmt: skip

        for engine in ENGINES:  # warm-up: imports, memos, connections
            one(engine, args.calls // 5)
        for _ in range(args.rounds):
            row = {}
            for engine in ENGINES:
                got = one(engine, args.calls)
                assert got.failed == 0, f"{engine}: {got.failed} calls failed"
                row[engine] = got.row()
            rounds.append(row)
    codecs = codec_us(requests, passes=max(1, args.calls // len(requests)))
    print(
        f"{header('http_engines', started, argv)}\n"
        f"machine: {json.dumps(machine())}\n"
        f"Apply, {len(requests)} ghz requests in turn, {args.calls} calls per engine a round, "
        f"{args.concurrency} in flight; medians of {args.rounds} rounds"
    )

    def median(engine: str, figure: str) -> float:
        return statistics.median(r[engine][figure] for r in rounds)

    def ratio(engine: str, figure: str, base: str) -> float:
        """The median of the rounds' quotients over gRPC's (each round under its own load)."""
        return statistics.median(r[engine][figure] / r["grpc"][base] for r in rounds)

    print(
        "| engine | CPU µs per call, every serving process | x gRPC "
        "| of it the Python server's | x gRPC | p50 ms | p99 ms | p99 x gRPC |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for engine in ENGINES:
        cpu, python = median(engine, "cpu_us"), median(engine, "python_us")
        p50, p99 = median(engine, "p50_ms"), median(engine, "p99_ms")
        print(
            f"| {engine} | {cpu:.0f} | {ratio(engine, 'cpu_us', 'cpu_us'):.2f} | {python:.0f} "
            f"| {ratio(engine, 'python_us', 'cpu_us'):.2f} | {p50:.2f} | {p99:.2f} "
            f"| {ratio(engine, 'p99_ms', 'p99_ms'):.2f} |"
        )
    print("(x gRPC: the median of the rounds' quotients; the other figures: medians of rounds)")
    print(
        f"codec CPU µs per Apply in one process (request decoded + answer encoded): "
        f"json_format {codecs['json']:.0f}, binary {codecs['binary']:.1f}"
    )
    finish(args.json_out, started, argv, {"rounds": rounds, "codec_us": codecs})
    return 0


if __name__ == "__main__":
    sys.exit(main())
