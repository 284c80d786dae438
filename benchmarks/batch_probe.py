"""Probe of a batched Apply path: unary calls, unary batches and bidi streams, sync and aio.

Before the service grows a batched path, this measures on this machine what each shape costs
the server, with the service's real Apply work on the states of deploy/ghz/data/apply.json
(benchmarks.batch_probe_wire) served by bare grpcio servers of both I/O models, each with the
chart's two worker processes on one SO_REUSEPORT port (benchmarks.batch_probe_server). In rounds
that alternate the servers and rotate the variants, two load generators send, each in turn:
ghz (Go: the cheaper of the two on a shared machine; it times a stream as a whole, so its
streams have no depth bound but flow control's and no latency per item) and a grpc.aio client
in a process of its own (benchmarks.batch_probe_client: streams of a given depth, latency per
item, paced loads). The variants:

- noop: a unary call answering a fixed reply of Apply's mean reply size (the limit);
- apply: the service's unary Apply, one item a call;
- batch N: one unary call carrying N Apply items, answered in order (N = 1, 4, 16, 64);
- stream D: bidi streams, each message one item with an id, D items in flight a stream
  (ghz: "stream", and "stream noop" whose messages each get the no-op's reply).

Closed loads keep 16 items in flight (unary), max(4, 16 / N) batch calls, max(4, 16 / D)
streams, spread evenly over the workers. For each it reports items per server CPU-second (the
server processes' CPU-time clocks), its ratio to the no-op of the same round, items per wall
second and the latency per item; then paced loads at 1x and 2x the unary Apply's saturated
rate on the sync server ("capacity": what today's pod carries), latency per item counted from
each item's scheduled send. With --spread it also sends batches and streams to two servers
behind one round_robin channel and counts the items each handled.

    flock /tmp/basra-bench.lock .venv/bin/python -m benchmarks.batch_probe --rounds 3
    .venv/bin/python -m benchmarks.batch_probe --rounds 1 --items 600 --no-paced   # a smoke run
"""

from __future__ import annotations

import argparse
import base64
import json
import statistics
import subprocess
import sys
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks import batch_probe_wire as wire
from benchmarks.measure import header, now, scratch
from benchmarks.servers import ROOT, cpu_seconds

SIZES = (1, 4, 16, 64)
UNARY_INFLIGHT = 16
PACED_SECONDS = 3.0


@dataclass(frozen=True)
class Variant:
    """One shape of load: its kind, its batch size or stream depth, calls or streams in flight."""

    kind: str
    n: int = 1

    @property
    def name(self) -> str:
        """How tables name it."""
        unsized = self.kind in ("noop", "apply") or self.n == 0
        return self.kind if unsized else f"{self.kind} {self.n}"

    @property
    def inflight(self) -> int:
        """Calls (unary, batch) or streams kept in flight."""
        if self.n == 0:
            return GHZ_STREAMS
        return UNARY_INFLIGHT if self.n == 1 else max(4, UNARY_INFLIGHT // self.n)


def variants(sizes: tuple[int, ...]) -> list[Variant]:
    """Every variant of a round."""
    found = [Variant("noop"), Variant("apply")]
    found += [Variant("batch", n) for n in sizes]
    found += [Variant("stream", n) for n in sizes]
    return found


@contextmanager
def probe_server(io: str, workers: int, reply_bytes: int) -> Iterator[tuple[str, list[int]]]:
    """Run benchmarks.batch_probe_server; yield its address and worker pids."""
    command = [sys.executable, "-m", "benchmarks.batch_probe_server", "--io", io]
    command += ["--workers", str(workers), "--reply-bytes", str(reply_bytes)]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, cwd=ROOT)
    assert process.stdout is not None
    line = process.stdout.readline().split()
    try:
        if not line or line[0] != "READY":
            raise RuntimeError(f"probe server did not start: {line}")
        yield f"127.0.0.1:{line[1]}", [int(pid) for pid in line[2:]]
    finally:
        process.terminate()
        process.wait(30)


class Client:
    """The load client process (benchmarks.batch_probe_client), one JSON line each way."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.process = process

    def ask(self, **command: Any) -> Any:
        """Send one command; return its answer."""
        stdin = self.process.stdin
        stdout = self.process.stdout
        assert stdin is not None and stdout is not None
        stdin.write(json.dumps(command) + "\n")
        stdin.flush()
        return json.loads(stdout.readline())


@contextmanager
def client() -> Iterator[Client]:
    """Run the load client until the block ends."""
    command = [sys.executable, "-m", "benchmarks.batch_probe_client"]
    process = subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=ROOT
    )
    try:
        yield Client(process)
    finally:
        assert process.stdin is not None
        process.stdin.close()
        process.wait(30)


def run(
    load: Client, io: str, pids: list[int], variant: Variant, items: int, *, rate: float = 0.0
) -> dict[str, Any]:
    """One measured load; its figures with items per server CPU-second and per wall second."""
    answer: dict[str, Any] = load.ask(
        op="run",
        name=io,
        variant=variant.kind,
        n=variant.n,
        inflight=variant.inflight,
        items=items,
        rate=rate,
        pids=pids,
    )
    answer["per_cpu"] = answer["items"] / max(answer["server_cpu_seconds"], 1e-9)
    answer["per_wall"] = answer["items"] / answer["wall_seconds"]
    return answer


GHZ = ROOT / ".ci" / "tools" / "go" / "bin" / "ghz"
GHZ_CONNECTIONS = 4
GHZ_STREAMS = 4


def ghz_data(directory: Path, sizes: tuple[int, ...]) -> dict[str, Path]:
    """Write ghz's data files (protobuf JSON) for every variant; return them by variant name."""
    from basra.v1 import rules_pb2 as pb

    from benchmarks import ghz_data as data

    requests = data.read("apply.json", pb.ApplyRequest)
    encoded = [base64.b64encode(r.SerializeToString()).decode() for r in requests]
    count = len(encoded)
    bodies: dict[str, Any] = {
        "noop": [{"data": encoded[0]}],
        "apply": [data.as_json(r) for r in requests],
        "stream": [{"id": i, "item": e} for i, e in enumerate(encoded)],
    }
    for n in sizes:
        bodies[f"batch {n}"] = [
            {"items": [encoded[(i + j) % count] for j in range(n)]} for i in range(count)
        ]
    bodies["stream noop"] = bodies["stream"]
    found = {}
    for name, body in bodies.items():
        found[name] = directory / f"{name.replace(' ', '-')}.json"
        found[name].write_text(json.dumps(body))
    return found


def ghz_variants(sizes: tuple[int, ...]) -> list[Variant]:
    """The variants ghz sends: unary ones, and streams of unbounded depth (flow control's)."""
    found = [Variant("noop"), Variant("apply")]
    found += [Variant("batch", n) for n in sizes]
    return [*found, Variant("stream noop", 0), Variant("stream", 0)]


def ghz_run(
    address: str,
    pids: list[int],
    variant: Variant,
    items: int,
    *,
    protoset: Path,
    data: dict[str, Path],
) -> dict[str, Any]:
    """One closed load sent by ghz; its figures as `run` gives them (latency per call)."""
    method = {"noop": "Noop", "apply": "Apply", "batch": "BatchApply"}.get(variant.kind)
    command = [str(GHZ), "--insecure", "--protoset", str(protoset), "-O", "json"]
    command += ["-D", str(data[variant.name]), "--connections", str(GHZ_CONNECTIONS)]
    if method is None:
        method = "StreamNoop" if variant.kind == "stream noop" else "StreamApply"
        per_stream = items // GHZ_STREAMS
        command += ["--stream-call-count", str(per_stream), "-n", str(GHZ_STREAMS)]
        command += ["-c", str(GHZ_STREAMS)]
        items = per_stream * GHZ_STREAMS
    else:
        calls = -(-items // variant.n)
        items = calls * variant.n
        command += ["-n", str(calls), "-c", str(variant.inflight)]
    command += ["--call", f"{wire.SERVICE}.{method}", address]
    before = cpu_seconds(pids)
    output = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    used = cpu_seconds(pids) - before
    report = json.loads(output)
    wall = report["total"] / 1e9
    latency = {p["percentage"]: p["latency"] / 1e6 for p in report["latencyDistribution"]}
    ok = report["statusCodeDistribution"].get("OK", 0)
    unary = variant.kind in ("noop", "apply", "batch")
    return {
        "items": items,
        "wall_seconds": wall,
        "server_cpu_seconds": used,
        "errors": report["count"] - ok,
        "per_cpu": items / max(used, 1e-9),
        "per_wall": items / wall,
        # ghz times a whole stream, not its messages: no latency per item for streams.
        "p50_ms": latency.get(50, 0.0) if unary else float("nan"),
        "p99_ms": latency.get(99, 0.0) if unary else float("nan"),
    }


def items_for(variant: Variant, items: int) -> int:
    """Items of a closed run: twice as many for the batched variants (they go faster)."""
    return items if variant.n == 1 and variant.kind != "stream" else 2 * items


def median(values: list[float]) -> float:
    """The median, 0 for none."""
    return statistics.median(values) if values else 0.0


def main(argv: list[str] | None = None) -> int:
    """Run the probe and print its tables (and JSON with --json)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--items", type=int, default=3000, help="items of a unary closed run")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--io", default="sync,aio")
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)))
    parser.add_argument("--no-paced", action="store_true", help="closed loads only")
    parser.add_argument("--paced-rounds", type=int, default=2)
    parser.add_argument("--no-ghz", action="store_true", help="no closed loads sent by ghz")
    parser.add_argument("--spread", action="store_true", help="also the round_robin probe")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    started = now()
    print(header("batch_probe", started), flush=True)
    ios = args.io.split(",")
    every = variants(tuple(int(s) for s in args.sizes.split(",")))
    closed: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    ratios: dict[tuple[str, str, str], list[float]] = {}
    paced: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    spread: Any = None
    with ExitStack() as stack:
        servers = {io: stack.enter_context(probe_server(io, args.workers, 440)) for io in ios}
        load = stack.enter_context(client())
        for io, (address, _) in servers.items():
            load.ask(op="connect", name=io, address=address, workers=args.workers, per_worker=2)
        sizes = tuple(int(s) for s in args.sizes.split(","))
        by_ghz = [] if args.no_ghz else ghz_variants(sizes)
        directory = Path(scratch("batch-probe-"))
        protoset = wire.protoset(directory / "probe.protoset")
        data = ghz_data(directory, sizes)
        for io, (address, pids) in servers.items():  # warm-up: connections, memos, code paths
            for variant in every:
                run(load, io, pids, variant, max(200, args.items // 5))
            for variant in by_ghz:
                warm = max(200, args.items // 5)
                ghz_run(address, pids, variant, warm, protoset=protoset, data=data)
        for number in range(args.rounds):
            order = ios if number % 2 == 0 else ios[::-1]
            for io in order:
                address, pids = servers[io]
                phases = [("client", every)] + ([("ghz", by_ghz)] if by_ghz else [])
                for phase, shapes in phases:
                    shift = number % len(shapes)
                    figures = {}
                    for variant in shapes[shift:] + shapes[:shift]:
                        items = items_for(variant, args.items)
                        if phase == "ghz":
                            result = ghz_run(
                                address, pids, variant, items, protoset=protoset, data=data
                            )
                        else:
                            result = run(load, io, pids, variant, items)
                        figures[variant.name] = result
                        closed.setdefault((phase, io, variant.name), []).append(result)
                    for name, result in figures.items():
                        ratio = result["per_cpu"] / figures["noop"]["per_cpu"]
                        ratios.setdefault((phase, io, name), []).append(ratio)
                    print(
                        f"round {number + 1} {io} {phase}: "
                        + ", ".join(f"{k} {v['per_cpu']:.0f}" for k, v in figures.items()),
                        flush=True,
                    )
        base_io = "sync" if "sync" in ios else ios[0]
        capacity = median([r["per_wall"] for r in closed[("client", base_io, "apply")]])
        if not args.no_paced:
            for number in range(args.paced_rounds):
                order = ios if number % 2 == 0 else ios[::-1]
                for io in order:
                    pids = servers[io][1]
                    for level, factor in (("1x", 1.0), ("2x", 2.0)):
                        rate = capacity * factor
                        for variant in every:
                            if variant.kind == "noop":
                                continue
                            items = int(rate * PACED_SECONDS)
                            result = run(load, io, pids, variant, items, rate=rate)
                            result["offered"] = rate
                            paced.setdefault((io, variant.name, level), []).append(result)
                print(f"paced round {number + 1} done", flush=True)
        if args.spread:
            with ExitStack() as pair:
                two = [pair.enter_context(probe_server("aio", 1, 440)) for _ in range(2)]
                spread = load.ask(
                    op="spread",
                    addresses=[address for address, _ in two],
                    n=16,
                    calls=200,
                    streams=[1, 2, 4],
                )
    report(ios, every, by_ghz, closed, ratios, paced, capacity, spread)
    if args.json:
        out = {
            "started": started.isoformat(),
            "closed": {" ".join(k): v for k, v in closed.items()},
            "paced": {" ".join(k): v for k, v in paced.items()},
            "capacity": capacity,
            "spread": spread,
        }
        args.json.write_text(json.dumps(out, indent=1))
    return 0


def report(  # noqa: PLR0917 (one call, from main)
    ios: list[str],
    every: list[Variant],
    by_ghz: list[Variant],
    closed: dict[tuple[str, str, str], list[dict[str, Any]]],
    ratios: dict[tuple[str, str, str], list[float]],
    paced: dict[tuple[str, str, str], list[dict[str, Any]]],
    capacity: float,
    spread: Any,
) -> None:
    """Print the medians over the rounds as Markdown tables."""
    for phase, shapes in (("ghz", by_ghz), ("client", every)):
        if not shapes:
            continue
        print(f"\nClosed loads sent by {phase} (medians over rounds)\n")
        print(
            "| server | variant | in flight | items/CPU-s | / no-op | items/s | p50 ms | p99 ms |"
        )
        print("|---|---|---|---|---|---|---|---|")
        for io in ios:
            for v in shapes:
                runs = closed[(phase, io, v.name)]
                flight = str(v.inflight * max(v.n, 1)) if v.n else f"{v.inflight} streams"
                print(
                    f"| {io} | {v.name} | {flight} "
                    f"| {median([r['per_cpu'] for r in runs]):,.0f} "
                    f"| {median(ratios[(phase, io, v.name)]):.2f} "
                    f"| {median([r['per_wall'] for r in runs]):,.0f} "
                    f"| {median([r['p50_ms'] for r in runs]):.1f} "
                    f"| {median([r['p99_ms'] for r in runs]):.1f} |"
                )
    errors = sum(r["errors"] for runs in closed.values() for r in runs)
    print(f"\nerrors {errors}; capacity (sync unary Apply, items/s) {capacity:,.0f}")
    if paced:
        print("\nPaced loads: p50 / p99 ms per item (achieved share of the offered rate)\n")
        print("| server | variant | 1x | 2x |")
        print("|---|---|---|---|")
        for io in ios:
            for v in every:
                if v.kind == "noop":
                    continue
                cells = []
                for level in ("1x", "2x"):
                    runs = paced[(io, v.name, level)]
                    share = median([r["per_wall"] / r["offered"] for r in runs])
                    cells.append(
                        f"{median([r['p50_ms'] for r in runs]):.1f} / "
                        f"{median([r['p99_ms'] for r in runs]):.1f} ({share:.0%})"
                    )
                print(f"| {io} | {v.name} | {cells[0]} | {cells[1]} |")
    if spread is not None:
        print(f"\nround_robin over two servers, items each handled: {json.dumps(spread)}")


if __name__ == "__main__":
    sys.exit(main())
