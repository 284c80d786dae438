"""Overload benchmark: what `basra-rules serve` answers in time when callers send too much.

For each server variant and for Apply and SuggestMove, on a fresh `basra-rules serve` with the
chart's settings (`--workers 2 --log-level warning`, metrics on), it measures in one run:

- capacity: 16 calls in flight, each sent as soon as the previous one ends (OK calls/s);
- 2x and 4x: calls offered at 2 and 4 times that capacity per second, each with a 1 s
  deadline, at most 2 (4) x capacity x 1 s of them in flight (a server that answers nothing
  holds exactly that many: the issue's "2x capacity in flight with 1 s deadlines").

Every phase counts, on the caller's side, the calls by status code, the goodput (calls answered
OK, so within their deadline, per second) as a fraction of the capacity measured in the same
run, and the p50/p99 latency of the OK calls; on the server's side (its /metrics, before and
after the phase) the refusals by reason and the searches and plans it ran; and, from a separate
process, a gRPC health Check every 0.5 s on a new connection each time, as the kubelet probes
(2 s timeout, alternately the liveness name "" and the readiness name basra.v1.RulesService):
p99 and max latency, and failures.

Variants: `bare` is the limit of this stack, a plain grpcio server answering a no-op (health
Check) on the same machine (benchmarks.bench_server --bare), capacity only and once per run;
`sync` is this tree's server (grpc's thread pool).
A variant may add settings of `basra-rules serve` after slashes (`sync/admission-limit=32`);
`/threads=N` (the sync server's threads) and `/switch=S` (the workers' GIL switch interval,
seconds) run benchmarks.bench_server instead: the service's own server builder with that
one constant changed.

Callers (--callers): `once` (the default) makes one attempt per offered call; `retry` loads
deploy/grpc-service-config.json into every channel (`grpc.service_config`,
`grpc.enable_retries`), so refused calls are retried by grpc within their deadline as the
published policy says; `closed` keeps the in-flight count full, sending the next call the
moment one ends, however it ended (a client that retries in a loop and ignores RetryInfo).

    .venv/bin/python -m benchmarks.overload                          # 1 run: bare, sync
    nice -n 10 .venv/bin/python -m benchmarks.overload --runs 3 --json overload.json
    .venv/bin/python -m benchmarks.overload --variants sync --rpcs Apply --seconds 5

The load generator and the prober share the machine with the server; the load average at the
start and the end of every phase is printed beside its figures.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import multiprocessing
import random
import statistics
import sys
import time
import urllib.request
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import grpc
from basra.v1 import rules_pb2 as pb
from prometheus_client.parser import text_string_to_metric_families

from benchmarks.measure import finish, header, load_average, now, percentile
from benchmarks.servers import (
    HEALTH_PATH,
    ROOT,
    Server,
    bare_server,
    bench_server,
    cpu_seconds,
    served,
)
from testkit import ghz_data
from testkit.actions import action_to_proto, play_match

VARIANT_NAMES = ("bare", "sync")
BARE = "bare"
SERVICE_CONFIG = ROOT / "deploy" / "grpc-service-config.json"
RPCS = ("NewMatch", "Apply", "LegalMoves", "PlayerView", "Replay", "SuggestMove")
PATHS = {rpc: f"/basra.v1.RulesService/{rpc}" for rpc in RPCS}
DATA: dict[str, tuple[str, type[Any]]] = {
    "NewMatch": ("new_match.json", pb.NewMatchRequest),
    "Apply": ("apply.json", pb.ApplyRequest),
    "LegalMoves": ("legal_moves.json", pb.LegalMovesRequest),
    "SuggestMove": ("suggest_move.json", pb.SuggestMoveRequest),
}
CAPACITY_IN_FLIGHT = 16
DEADLINE_SECONDS = 1.0
PROBE_PERIOD = 0.5
PROBE_TIMEOUT = 2.0
PROBE_NAMES = ("", "basra.v1.RulesService")
# How long the server gets between phases to finish what it still holds (1 s deadlines).
SETTLE_SECONDS = 3.0
# prometheus-client's multiprocess values reach /metrics within a second (FLUSH_SECONDS).
SCRAPE_DELAY = 1.5
# Time for the load processes to start and connect before they send, all at once.
PROCESS_START_SECONDS = 3.0


REPLAY_MATCHES = 8


def requests_of(rpc: str) -> list[bytes]:
    """Realistic requests of an RPC: the ghz data (deploy/ghz/data); PlayerView asks for the
    seat to move of the Apply states; Replay replays whole matches of random legal play."""
    if rpc == "Replay":
        played = [
            play_match(f"overload-{n}".encode(), random.Random(n)) for n in range(REPLAY_MATCHES)
        ]
        return [
            pb.ReplayRequest(
                seed=f"overload-{n}".encode(),
                actions=[action_to_proto(a) for a in match.actions],
            ).SerializeToString()
            for n, match in enumerate(played)
        ]
    if rpc == "PlayerView":
        states = [r.state for r in ghz_data.read("apply.json", pb.ApplyRequest)]
        return [pb.PlayerViewRequest(state=s, seat=s.to_move).SerializeToString() for s in states]
    name, kind = DATA[rpc]
    return [r.SerializeToString() for r in ghz_data.read(name, kind)]


@dataclass
class Drive:
    """What the callers saw in one phase."""

    seconds: float
    codes: Counter[str] = field(default_factory=Counter)
    ok_ns: list[int] = field(default_factory=list)
    sent: int = 0
    details: dict[str, str] = field(default_factory=dict)
    """The details of the first call to end with each status code but OK."""

    @property
    def ok_per_second(self) -> float:
        """Calls answered OK (within their deadline) per second of the phase."""
        return self.codes["OK"] / self.seconds


async def drive(
    target: str,
    path: str,
    requests: Sequence[bytes],
    *,
    seconds: float,
    in_flight: int,
    rate: float,
    deadline: float,
    connections: int,
    callers: str,
    start_at: float = 0.0,
) -> Drive:
    """Send one RPC for `seconds` (from the wall-clock time `start_at`, if later than ready):
    at `rate` calls/s with at most `in_flight` outstanding (rate 0: `in_flight` callers that
    each send the next call when the last one ends)."""
    options: list[tuple[str, Any]] = [("grpc.use_local_subchannel_pool", 1)]
    if callers == "retry":
        options += [
            ("grpc.enable_retries", 1),
            ("grpc.service_config", SERVICE_CONFIG.read_text()),
        ]
    else:
        options.append(("grpc.enable_retries", 0))
    channels = [grpc.aio.insecure_channel(target, options=options) for _ in range(connections)]
    result = Drive(seconds)
    try:
        await asyncio.gather(*(channel.channel_ready() for channel in channels))
        if start_at > time.time():
            await asyncio.sleep(start_at - time.time())
        stubs = [channel.unary_unary(path, None, None) for channel in channels]
        clock = time.perf_counter_ns
        start = clock()
        end = start + int(seconds * 1e9)

        async def one(number: int) -> None:
            began = clock()
            try:
                await stubs[number % len(stubs)](requests[number % len(requests)], timeout=deadline)
                code = "OK"
            except grpc.aio.AioRpcError as error:
                code = error.code().name
                result.details.setdefault(code, error.details() or "")
            if code == "OK":
                result.ok_ns.append(clock() - began)
            result.codes[code] += 1

        if not rate or callers == "closed":

            async def caller(index: int) -> None:
                number = index
                while clock() < end:
                    result.sent += 1
                    await one(number)
                    number += in_flight

            await asyncio.gather(*(caller(i) for i in range(in_flight)))
            return result
        slots = asyncio.Semaphore(in_flight)
        tasks: set[asyncio.Task[None]] = set()

        async def paced(number: int) -> None:
            try:
                await one(number)
            finally:
                slots.release()

        interval = 1e9 / rate
        number = 0
        while True:
            due = start + int(number * interval)
            wait = due - clock()
            if wait > 0:
                await asyncio.sleep(wait / 1e9)
            await slots.acquire()
            # A caller that falls behind its schedule (its own CPU is short) sends what is due
            # by now, never past the end: the phase lasts its length, and offers what it can.
            if clock() >= end:
                slots.release()
                break
            task = asyncio.create_task(paced(number))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
            number += 1
        result.sent = number
        if tasks:
            await asyncio.wait(tasks)
        return result
    finally:
        for channel in channels:
            await channel.close(None)


def _drive_process(
    out: Connection, target: str, path: str, requests: Sequence[bytes], options: dict[str, Any]
) -> None:
    """One load process: drive, then send back what it saw and the CPU it used."""
    started = time.process_time()
    seen = asyncio.run(drive(target, path, requests, **options))
    out.send((seen, time.process_time() - started))
    out.close()


def drive_from(
    processes: int,
    target: str,
    path: str,
    requests: Sequence[bytes],
    *,
    seconds: float,
    in_flight: int,
    rate: float,
    connections: int,
    callers: str,
) -> tuple[Drive, float]:
    """Drive from `processes` processes, each a share of the rate, calls in flight and
    connections (one Python process cannot send thousands of calls a second and read their
    answers too); return what they saw together and the CPU seconds they used."""
    context = multiprocessing.get_context("spawn")
    running = []
    start_at = time.time() + PROCESS_START_SECONDS  # every process starts sending together
    for index in range(processes):
        share = {
            "start_at": start_at,
            "seconds": seconds,
            "in_flight": max(1, in_flight // processes + (index < in_flight % processes)),
            "rate": rate / processes,
            "deadline": DEADLINE_SECONDS,
            "connections": max(1, connections // processes),
            "callers": callers,
        }
        reader, writer = context.Pipe(duplex=False)
        process = context.Process(
            target=_drive_process, args=(writer, target, path, requests, share), daemon=True
        )
        process.start()
        writer.close()
        running.append((process, reader))
    together = Drive(seconds)
    cpu = 0.0
    for process, reader in running:
        seen, used = reader.recv()
        process.join(10)
        together.codes.update(seen.codes)
        together.ok_ns.extend(seen.ok_ns)
        together.sent += seen.sent
        together.details = {**seen.details, **together.details}
        cpu += used
    return together, cpu


def _probe(target: str, stop: Any, out: Connection, period: float = PROBE_PERIOD) -> None:
    """Check health every `period` on a new connection each time, as the kubelet does;
    send back (seconds, ok) per probe when `stop` is set."""
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    samples: list[tuple[float, bool]] = []
    due = time.monotonic()
    number = 0
    while not stop.is_set():
        began = time.perf_counter()
        try:
            with grpc.insecure_channel(target) as channel:
                request = health_pb2.HealthCheckRequest(service=PROBE_NAMES[number % 2])
                reply = health_pb2_grpc.HealthStub(channel).Check(request, timeout=PROBE_TIMEOUT)
            ok = reply.status == health_pb2.HealthCheckResponse.SERVING
        except grpc.RpcError:
            ok = False
        samples.append((time.perf_counter() - began, ok))
        number += 1
        due += period
        time.sleep(max(0.0, due - time.monotonic()))
    out.send(samples)
    out.close()


@contextlib.contextmanager
def probing(target: str, period: float = PROBE_PERIOD) -> Iterator[list[tuple[float, bool]]]:
    """Probe `target` every `period` from another process for the block; the list fills when
    it ends."""
    context = multiprocessing.get_context("spawn")
    stop = context.Event()
    reader, writer = context.Pipe(duplex=False)
    process = context.Process(target=_probe, args=(target, stop, writer, period), daemon=True)
    process.start()
    writer.close()
    samples: list[tuple[float, bool]] = []
    try:
        yield samples
    finally:
        stop.set()
        if reader.poll(PROBE_TIMEOUT + PROBE_PERIOD + 10):
            samples.extend(reader.recv())
        process.join(10)
        if process.is_alive():
            process.kill()


def scrape(server: Server) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """The server's counters and histogram counts now, by name and labels."""
    if server.metrics_port is None:
        return {}
    url = f"http://127.0.0.1:{server.metrics_port}/metrics"
    with urllib.request.urlopen(url, timeout=10) as response:
        text = response.read().decode()
    values: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name.endswith(("_total", "_count")):
                labels = tuple(sorted((k, v) for k, v in sample.labels.items() if k != "pid"))
                key = (sample.name, labels)
                values[key] = values.get(key, 0.0) + sample.value
    return values


def server_counts(
    before: Mapping[tuple[str, tuple[tuple[str, str], ...]], float],
    after: Mapping[tuple[str, tuple[tuple[str, str], ...]], float],
    rpc: str,
) -> dict[str, float]:
    """What the server counted in a phase: refusals by reason, codes, searches, plans."""
    counts: dict[str, float] = {}
    for key, value in after.items():
        delta = value - before.get(key, 0.0)
        if not delta:
            continue
        name, labels = key
        tags = dict(labels)
        if name == "basra_refusals_total" and tags.get("grpc_method") == rpc:
            counts[f"refused {tags['reason']}"] = delta
        elif name == "grpc_server_handled_total" and tags.get("grpc_method") == rpc:
            # Summed over the transport label (grpc, http).
            handled = f"handled {tags['grpc_code']}"
            counts[handled] = counts.get(handled, 0.0) + delta
        elif name in ("basra_calls_arrived_total", "basra_calls_taken_in_total"):
            counts[name.removeprefix("basra_calls_").removesuffix("_total")] = delta
        elif name == "basra_suggest_seconds_count":
            counts["searches"] = counts.get("searches", 0.0) + delta
        elif name == "basra_plan_generation_seconds_count":
            counts["plan generations"] = delta
    return counts


@dataclass(frozen=True)
class Phase:
    """One phase's figures."""

    variant: str
    rpc: str
    phase: str
    offered_per_second: float
    sent_per_second: float
    in_flight: int
    ok_per_second: float
    goodput: float
    ok_per_server_cpu_second: float
    goodput_per_cpu: float
    ok_p50_ms: float
    ok_p99_ms: float
    codes: dict[str, int]
    details: dict[str, str]
    server: dict[str, float]
    server_cpu_seconds: float
    client_cpu_seconds: float
    probe_p99_ms: float
    probe_max_ms: float
    probe_failures: int
    probes: int
    load_before: str
    load_after: str


def run_phase(
    server: Server,
    variant: str,
    rpc: str,
    phase: str,
    requests: Sequence[bytes],
    *,
    path: str,
    rate: float,
    in_flight: int,
    capacity: Phase | None,
    args: argparse.Namespace,
) -> Phase:
    """Drive one phase with probes alongside; count what both sides saw."""
    load_before = " ".join(load_average())
    scraped = scrape(server)
    used = cpu_seconds(server.pids)
    with probing(server.address) as probes:
        seen, client = drive_from(
            args.clients,
            server.address,
            path,
            requests,
            seconds=args.seconds,
            in_flight=in_flight,
            rate=rate,
            connections=args.connections,
            callers=args.callers,
        )
    used = cpu_seconds(server.pids) - used
    time.sleep(SCRAPE_DELAY)
    counted = server_counts(scraped, scrape(server), rpc)
    ok = sorted(seen.ok_ns)
    waits = sorted(seconds for seconds, _ in probes)
    per_cpu = seen.codes["OK"] / used if used else 0.0
    return Phase(
        variant=variant,
        rpc=rpc,
        phase=phase,
        offered_per_second=rate,
        sent_per_second=seen.sent / seen.seconds,
        in_flight=in_flight,
        ok_per_second=seen.ok_per_second,
        goodput=seen.ok_per_second / capacity.ok_per_second if capacity else 1.0,
        ok_per_server_cpu_second=per_cpu,
        goodput_per_cpu=per_cpu / capacity.ok_per_server_cpu_second if capacity else 1.0,
        ok_p50_ms=percentile(ok, 0.5) / 1e6 if ok else 0.0,
        ok_p99_ms=percentile(ok, 0.99) / 1e6 if ok else 0.0,
        codes=dict(seen.codes),
        details=seen.details,
        server=counted,
        server_cpu_seconds=used,
        client_cpu_seconds=client,
        probe_p99_ms=percentile(waits, 0.99) * 1000 if waits else 0.0,
        probe_max_ms=waits[-1] * 1000 if waits else 0.0,
        probe_failures=sum(1 for _, ok in probes if not ok),
        probes=len(probes),
        load_before=load_before,
        load_after=" ".join(load_average()),
    )


@contextlib.contextmanager
def server_of(
    variant: str, tree: Path | None, workers: int, health: bool = False
) -> Iterator[Server]:
    """The server a variant names: `sync`, then `/flag=value` settings of
    `basra-rules serve` (`sync/admission-limit=32`); with `/threads=N` (work threads),
    `/switch=S` (GIL switch interval), `/pending=N` (calls core holds before the intake) or
    `/grpc-limit=N` (grpcio's `maximum_concurrent_rpcs`),
    through benchmarks.bench_server (the service's own builder); `bare`, the plain grpcio
    server. With `tree`, the `basra-rules serve` of that checkout (benchmarks.overload_ghz
    --tree); with `health`, its health port on."""
    if variant == BARE:
        with bare_server() as bare:
            yield bare
        return
    _, *settings = variant.split("/")
    flags: list[str] = []
    knobs: list[str] = []
    threads = 0
    for setting in settings:
        key, _, value = setting.partition("=")
        if key == "threads":
            threads = int(value)
        elif key == "switch":
            knobs += ["--switch-interval", value]
        elif key == "pending":
            knobs += ["--pending-calls", value]
        elif key == "grpc-limit":
            knobs += ["--grpc-limit", value]
        else:
            flags += [f"--{key}", value]
    if health and (threads or knobs or tree is not None):
        raise ValueError(f"{variant}: the health port is probed on this tree's serve only")
    if threads or knobs:
        running = bench_server(
            workers,
            0,
            "warning",
            sync_threads=threads,
            metrics=True,
            flags=[*flags, *knobs],
        )
    else:
        running = served(workers, "warning", metrics=True, flags=flags, tree=tree, health=health)
    with running as server:
        yield server


def run_rpc(variant: str, rpc: str, args: argparse.Namespace) -> list[Phase]:
    """Capacity, then each overload factor, on a fresh server of `variant` (`bare`: its no-op,
    capacity only)."""
    bare = variant == BARE
    requests = [b""] if bare else requests_of(rpc)  # an empty HealthCheckRequest
    path = HEALTH_PATH if bare else PATHS[rpc]
    factors = [] if bare else args.factors
    phases: list[Phase] = []
    with server_of(variant, None, args.workers) as server:
        asyncio.run(  # warm-up: imports, caches, connections
            drive(
                server.address,
                path,
                requests,
                seconds=2.0,
                in_flight=CAPACITY_IN_FLIGHT,
                rate=0.0,
                deadline=DEADLINE_SECONDS,
                connections=args.connections,
                callers="once",
            )
        )
        base = run_phase(
            server,
            variant,
            rpc,
            "capacity",
            requests,
            path=path,
            rate=0.0,
            in_flight=CAPACITY_IN_FLIGHT,
            capacity=None,
            args=args,
        )
        phases.append(base)
        for factor in factors:
            time.sleep(SETTLE_SECONDS)
            rate = factor * base.ok_per_second
            phases.append(
                run_phase(
                    server,
                    variant,
                    rpc,
                    f"{factor:g}x",
                    requests,
                    path=path,
                    rate=rate,
                    in_flight=max(1, round(rate * DEADLINE_SECONDS)),
                    capacity=base,
                    args=args,
                )
            )
    return phases


def one_run(number: int, args: argparse.Namespace) -> list[Phase]:
    """Every variant and RPC once; the variants' order turns from run to run."""
    variants = list(args.variants)
    shift = number % len(variants)
    phases: list[Phase] = []
    for variant in variants[shift:] + variants[:shift]:
        for rpc in ["no-op"] if variant == BARE else args.rpcs:
            ran = run_rpc(variant, rpc, args)
            phases += ran
            for phase in ran:
                print(line(phase), flush=True)
    return phases


def line(phase: Phase) -> str:
    """One phase as a line of text."""
    refusals = ", ".join(
        f"{name.removeprefix('refused ')} {value:.0f}"
        for name, value in sorted(phase.server.items())
        if name.startswith("refused ")
    )
    codes = ", ".join(f"{code} {n}" for code, n in sorted(phase.codes.items()) if code != "OK")
    return (
        f"  {phase.variant:8} {phase.rpc:11} {phase.phase:8} sent/s {phase.sent_per_second:7.1f} "
        f"ok/s {phase.ok_per_second:7.1f} goodput {phase.goodput:5.2f} per cpu "
        f"{phase.goodput_per_cpu:5.2f} p50 {phase.ok_p50_ms:6.1f} p99 {phase.ok_p99_ms:6.1f} ms "
        f"| probe p99 {phase.probe_p99_ms:6.1f} max {phase.probe_max_ms:6.1f} ms "
        f"fail {phase.probe_failures}/{phase.probes} | searches "
        f"{phase.server.get('searches', 0):.0f} | cpu server {phase.server_cpu_seconds:.1f} "
        f"client {phase.client_cpu_seconds:.1f} s | codes [{codes}] | refused [{refusals}] "
        f"| load {phase.load_before} -> {phase.load_after}"
    )


MEDIAN_FIELDS = (
    "sent_per_second",
    "ok_per_second",
    "goodput",
    "goodput_per_cpu",
    "server_cpu_seconds",
    "client_cpu_seconds",
    "ok_p50_ms",
    "ok_p99_ms",
    "probe_p99_ms",
    "probe_max_ms",
)


def medians(phases: Sequence[Phase]) -> list[dict[str, Any]]:
    """Per variant, RPC and phase: the median of each figure over the runs."""
    groups: dict[tuple[str, str, str], list[Phase]] = {}
    for phase in phases:
        groups.setdefault((phase.variant, phase.rpc, phase.phase), []).append(phase)
    rows = []
    for (variant, rpc, name), runs in groups.items():
        row: dict[str, Any] = {"variant": variant, "rpc": rpc, "phase": name, "runs": len(runs)}
        for key in MEDIAN_FIELDS:
            row[key] = statistics.median(getattr(run, key) for run in runs)
        codes: Counter[str] = Counter()
        refusals: Counter[str] = Counter()
        for run in runs:
            codes.update(run.codes)
            refusals.update(
                {k.removeprefix("refused "): v for k, v in run.server.items() if "refused" in k}
            )
        row["codes_per_run"] = {k: round(v / len(runs)) for k, v in sorted(codes.items())}
        row["refusals_per_run"] = {k: round(v / len(runs)) for k, v in sorted(refusals.items())}
        row["probe_failures"] = sum(run.probe_failures for run in runs)
        rows.append(row)
    return rows


def table(rows: Sequence[dict[str, Any]]) -> str:
    """The medians as a Markdown table."""
    out = [
        "| variant | RPC | load | sent/s | OK/s | goodput | goodput per server CPU | OK p50 "
        "| OK p99 | probe p99 | probe max | caller codes (per run) | server refusals (per run) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        codes = ", ".join(f"{k} {v}" for k, v in row["codes_per_run"].items() if k != "OK")
        refused = ", ".join(f"{k} {v}" for k, v in row["refusals_per_run"].items())
        out.append(
            f"| {row['variant']} | {row['rpc']} | {row['phase']} | {row['sent_per_second']:.0f} "
            f"| {row['ok_per_second']:.0f} | {row['goodput']:.2f} | {row['goodput_per_cpu']:.2f} "
            f"| {row['ok_p50_ms']:.1f} ms | {row['ok_p99_ms']:.1f} ms "
            f"| {row['probe_p99_ms']:.1f} ms | {row['probe_max_ms']:.1f} ms "
            f"| {codes or '-'} | {refused or '-'} |"
        )
    return "\n".join(out)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark; print each phase, then the medians over the runs."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.overload", description=__doc__)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--variants", type=lambda s: s.split(","), default=[BARE, "sync"])
    parser.add_argument("--rpcs", type=lambda s: s.split(","), default=["SuggestMove", "Apply"])
    parser.add_argument(
        "--factors",
        type=lambda s: [float(x) for x in s.split(",") if x],
        help="overloads, as multiples of the capacity (default 2,4; '' for capacity only)",
    )
    parser.add_argument("--seconds", type=float, default=10.0, help="length of each phase")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--connections", type=int, default=8)
    parser.add_argument("--clients", type=int, default=2, help="load generator processes")
    parser.add_argument("--callers", choices=("once", "retry", "closed"), default="once")
    parser.add_argument("--json", type=Path, help="write every phase and the medians here")
    args = parser.parse_args(argv)
    unknown = sorted({v.split("/")[0] for v in args.variants} - set(VARIANT_NAMES))
    if unknown:
        parser.error(f"unknown variants {', '.join(unknown)}: each is one of {VARIANT_NAMES}")
    args.factors = [2.0, 4.0] if args.factors is None else args.factors
    started = now()
    print(header("overload", started, argv), flush=True)
    phases: list[Phase] = []
    for number in range(args.runs):
        print(f"run {number + 1} of {args.runs}", flush=True)
        phases += one_run(number, args)
    rows = medians(phases)
    print(f"\nmedians of {args.runs} run(s):\n{table(rows)}")
    finish(args.json, started, argv, {"phases": [asdict(p) for p in phases], "medians": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
