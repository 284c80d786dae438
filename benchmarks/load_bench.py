"""Load benchmark of the gRPC service: Apply against a same-size no-op, per server CPU-second.

In one run and against one server configuration (benchmarks.bench_server: the service's own
server builder plus a benchmark-only no-op method), this sends unary Apply calls on realistic
mid-game states (deploy/ghz/data/apply.json) and no-op calls carrying the very same request
bytes and a reply of the mean Apply reply size. The load generator (clients.load, in this
process) shares the machine with the server, so besides wall time it counts the server's CPU
seconds from /proc/<pid>/stat (supervisor and workers) and reports calls per server CPU-second.

For each worker count (1, 2) it reports:
- Apply and no-op calls per server CPU-second, and their ratio (medians over rounds that
  alternate the two RPCs, so drift hits both alike);
- the saturation rate (Apply calls per wall second at full concurrency) and the p50/p99
  latency of Apply paced at half that rate;
and across them: 2 workers against 1 in calls per server CPU-second.

    .venv/bin/python -m benchmarks.load_bench                   # full run, a few minutes
    .venv/bin/python -m benchmarks.load_bench --rounds 1 --calls 500 --workers 1

With --defaults it measures instead the service as a user runs it against the limit of this
stack: `basra-rules serve` started as the README's quick start does (one worker, info logs,
metrics on; testkit's launcher) and a bare grpcio server (bench_server --bare: a thread
pool of 8 and the standard health servicer, nothing else) answering health Checks, both on
this machine in the same run, 16 calls in flight. Each run starts both servers afresh and, in
each of its rounds, measures Apply, LegalMoves, PlayerView and the service's own health Check,
each between two runs of the bare server's Check; a figure is the call's rate per server
CPU-second over the mean rate of the bare Checks around it. A second bare server's Check is
measured the same way in the same rotation ("Control"): on an idle machine it would be 1,
and how far it is not shows what the method itself does on this one. It prints each run's
medians and the median over the runs; --profile also records the worker under Apply load
with py-spy.

    .venv/bin/python -m benchmarks.load_bench --defaults --runs 3

With --grpc-go, --defaults also measures a grpc-go server answering the same health Check with
the same bytes (benchmarks/go_noop, built into .cache/ by `go build`, and checked to answer
the bare server's bytes before each run), in the same rotation: what the Python stack costs
against a Go one. With --generator ghz, ghz (.ci/tools/go/bin) sends every load instead of
clients.load in this process, with the same requests, calls, concurrency and connections;
each figure also gives the generator's own CPU per call. A --defaults run in which any call
fails exits 1: its figures would not hold.

    .venv/bin/python -m benchmarks.load_bench --defaults --grpc-go --generator ghz --runs 3

With --defaults --tracing it measures, the same way, what tracing costs Apply at the defaults:
in each run four servers, all one worker, info logs, metrics on: tracing off (the default), a
second such server (the control: how far two identical servers measure apart here), tracing
on with every call sampled (OTEL_EXPORTER_OTLP_ENDPOINT pointing at testkit.otlp's receiver in
this process, which counts the spans), and tracing on with OTEL_TRACES_SAMPLER=always_off.
Besides the ratios to the bare Check it prints each variant over tracing off, median over the
rounds of a run, then over the runs.

    .venv/bin/python -m benchmarks.load_bench --defaults --tracing --runs 3
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import grpc
from basra.v1 import rules_pb2 as pb

from benchmarks.measure import finish, header, machine, now, scratch
from benchmarks.servers import (
    APPLY_PATH,
    HEALTH_PATH,
    Measure,
    Server,
    apply_requests,
    bare_server,
    bench_server,
    go_server,
    measure,
    served,
)
from testkit import ghz_data, otlp


@dataclass(frozen=True)
class VariantResult:
    """Medians over the rounds of one worker count."""

    workers: int
    apply_per_cpu_second: float
    noop_per_cpu_second: float
    apply_to_noop: float
    apply_per_wall_second: float
    noop_per_wall_second: float
    half_saturation_rps: float
    half_saturation_p50_ms: float
    half_saturation_p99_ms: float
    serve_apply_per_cpu_second: float
    errors: int
    rounds: list[dict[str, Any]]


def run_variant(
    workers: int, requests: Sequence[bytes], reply_bytes: int, args: argparse.Namespace
) -> VariantResult:
    """Measure one worker count."""
    connections = max(args.connections, workers)
    rounds: list[dict[str, Any]] = []
    with bench_server(
        workers, reply_bytes, args.log_level, sync_threads=args.sync_threads
    ) as server:
        for rpc in ("Apply", "Noop"):  # warm-up: imports, caches, connection setup
            measure(
                server,
                rpc,
                requests,
                calls=args.calls // 4,
                concurrency=args.concurrency,
                connections=connections,
            )
        apply_runs: list[Measure] = []
        noop_runs: list[Measure] = []
        for number in range(args.rounds):
            order = ("Apply", "Noop") if number % 2 == 0 else ("Noop", "Apply")
            for rpc in order:
                run = measure(
                    server,
                    rpc,
                    requests,
                    calls=args.calls,
                    concurrency=args.concurrency,
                    connections=connections,
                )
                (apply_runs if rpc == "Apply" else noop_runs).append(run)
                rounds.append({**asdict(run), "per_cpu_second": run.per_cpu_second})
        saturation = statistics.median(r.per_wall_second for r in apply_runs)
        half = saturation / 2
        paced = [
            measure(
                server,
                "Apply",
                requests,
                calls=max(200, int(half * args.paced_seconds)),
                concurrency=args.concurrency,
                connections=connections,
                rps=half,
            )
            for _ in range(args.rounds)
        ]
        for run in paced:
            rounds.append({**asdict(run), "per_cpu_second": run.per_cpu_second, "paced": half})
    # The same Apply load against `basra-rules serve` itself: the benchmark's runner must cost
    # what the shipped server costs, or its figures would not describe the product.
    with served(workers, args.log_level) as real:
        options = {"concurrency": args.concurrency, "connections": connections}
        measure(real, "Apply", requests, calls=args.calls // 4, **options)
        serve_runs = [
            measure(real, "Apply", requests, calls=args.calls, **options)
            for _ in range(args.rounds)
        ]
    for run in serve_runs:
        rounds.append({**asdict(run), "per_cpu_second": run.per_cpu_second, "server": "serve"})
    ratios = [
        a.per_cpu_second / n.per_cpu_second
        for a, n in zip(apply_runs, noop_runs, strict=True)
        if n.per_cpu_second
    ]
    return VariantResult(
        workers=workers,
        apply_per_cpu_second=statistics.median(r.per_cpu_second for r in apply_runs),
        noop_per_cpu_second=statistics.median(r.per_cpu_second for r in noop_runs),
        apply_to_noop=statistics.median(ratios),
        apply_per_wall_second=saturation,
        noop_per_wall_second=statistics.median(r.per_wall_second for r in noop_runs),
        half_saturation_rps=half,
        half_saturation_p50_ms=statistics.median(r.p50_ms for r in paced),
        half_saturation_p99_ms=statistics.median(r.p99_ms for r in paced),
        serve_apply_per_cpu_second=statistics.median(r.per_cpu_second for r in serve_runs),
        errors=sum(r.errors for r in (*apply_runs, *noop_runs, *paced, *serve_runs)),
        rounds=rounds,
    )


def requests_at_defaults() -> dict[str, tuple[str, list[bytes]]]:
    """Per measured call of the service: its path and its encoded requests."""
    applies = ghz_data.read("apply.json", pb.ApplyRequest)
    listing = [
        r.SerializeToString() for r in ghz_data.read("legal_moves.json", pb.LegalMovesRequest)
    ]
    views = [
        pb.PlayerViewRequest(state=a.state, seat=a.state.to_move).SerializeToString()
        for a in applies
    ]
    return {
        "Apply": (APPLY_PATH, [a.SerializeToString() for a in applies]),
        "LegalMoves": ("/basra.v1.RulesService/LegalMoves", listing),
        "PlayerView": ("/basra.v1.RulesService/PlayerView", views),
        "Check": (HEALTH_PATH, [b""]),  # an empty HealthCheckRequest: the whole server
    }


# A second bare server measured exactly like the service: how far from 1 the method itself is.
CONTROL = "Control"
# The grpc-go server's Check (--grpc-go): the same no-op in a Go stack.
GO_CHECK = "grpc-go Check"


def measurer(args: argparse.Namespace) -> Any:
    """`measure`, or with --generator ghz the same load sent by ghz."""
    if args.generator == "ghz":
        return functools.partial(measure, ghz_scratch=Path(scratch("load-bench-ghz-")))
    return measure


def rotate(
    number: int,
    args: argparse.Namespace,
    bare: Server,
    calls: dict[str, tuple[Server, str, list[bytes]]],
) -> dict[str, Any]:
    """`args.rounds` rounds measuring each call (its server, path and requests) between two
    runs of the bare server's Check; per call, the medians over the rounds."""
    options = {"concurrency": args.concurrency, "connections": args.connections}
    send = measurer(args)
    ratios: dict[str, list[float]] = {name: [] for name in calls}
    rates: dict[str, list[float]] = {name: [] for name in calls}
    generator: dict[str, list[float]] = {name: [] for name in calls}
    bare_rates: list[float] = []
    errors = 0

    def bare_check() -> float:
        run = send(bare, "Check", [b""], calls=args.calls, path=HEALTH_PATH, **options)
        bare_rates.append(run.per_cpu_second)
        return float(run.per_cpu_second)

    for name, (server, path, requests) in calls.items():  # warm-up: caches, connections
        send(server, name, requests, calls=args.calls // 4, path=path, **options)
    send(bare, "Check", [b""], calls=args.calls // 4, path=HEALTH_PATH, **options)
    names = list(calls)
    for round_number in range(args.rounds):
        shift = (round_number + number) % len(names)
        before = bare_check()
        for name in names[shift:] + names[:shift]:
            server, path, requests = calls[name]
            run: Measure = send(server, name, requests, calls=args.calls, path=path, **options)
            errors += run.errors
            after = bare_check()
            rates[name].append(run.per_cpu_second)
            ratios[name].append(run.per_cpu_second / ((before + after) / 2))
            generator[name].append(run.generator_cpu_seconds / max(1, run.calls) * 1e6)
            before = after
    return {
        "ratios": {name: statistics.median(values) for name, values in ratios.items()},
        "per_cpu_second": {name: statistics.median(values) for name, values in rates.items()},
        "generator_cpu_us": {name: statistics.median(v) for name, v in generator.items()},
        "bare_check_per_cpu_second": statistics.median(bare_rates),
        "errors": errors,
        "rounds": {"ratios": ratios, "rates": rates, "bare": bare_rates, "generator": generator},
    }


def run_defaults(number: int, args: argparse.Namespace) -> dict[str, Any]:
    """One run at the defaults: fresh servers, `args.rounds` rounds; per call, the medians."""
    with contextlib.ExitStack() as running:
        bare = running.enter_context(bare_server())
        control = running.enter_context(bare_server())
        ours = running.enter_context(served(1, "info", metrics=True))
        calls = {
            name: (ours, path, requests)
            for name, (path, requests) in requests_at_defaults().items()
        }
        calls[CONTROL] = (control, HEALTH_PATH, [b""])
        if args.grpc_go:
            go = running.enter_context(go_server())
            check_alike(bare, go)
            calls[GO_CHECK] = (go, HEALTH_PATH, [b""])
        result = rotate(number, args, bare, calls)
        if args.profile:
            _profile(ours, calls["Apply"][1:], args, args.concurrency, args.connections)
    return result


def _raw_check(address: str, service: bytes) -> bytes:
    with grpc.insecure_channel(address) as channel:
        call = channel.unary_unary(HEALTH_PATH, None, None)
        # A HealthCheckRequest with this service name, encoded by hand: field 1, bytes.
        request = b"\x0a" + bytes([len(service)]) + service if service else b""
        reply = call(request, timeout=10)
        assert isinstance(reply, bytes)
        return reply


def check_alike(bare: Server, go: Server) -> None:
    """Refuse to compare the two no-ops unless both answer the same request bytes with the same
    reply bytes (SERVING), for the whole server and for the rules service."""
    for service in (b"", b"basra.v1.RulesService"):
        replies = {_raw_check(server.address, service) for server in (bare, go)}
        if replies != {b"\x08\x01"}:
            raise SystemExit(f"the no-ops answer {service!r} differently: {sorted(replies)}")


# --defaults --tracing: the service at its defaults with tracing off and on.
OFF = "off"
TRACING_VARIANTS = (OFF, "off, second server (control)", "on", "on, unsampled")


def run_tracing(number: int, args: argparse.Namespace) -> dict[str, Any]:
    """One run of --defaults --tracing: fresh servers at the defaults (one worker, info logs,
    metrics on), Apply on each: tracing off (twice), on with every call sampled and exported
    to a receiver in this process, and on with none sampled."""
    path, requests = requests_at_defaults()["Apply"]
    keep = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    with otlp.receiving(keep=False) as receiver:
        exporting = {**keep, "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint}
        unsampled = {**exporting, "OTEL_TRACES_SAMPLER": "always_off"}
        with (
            bare_server() as bare,
            served(1, "info", True, env=keep) as off,
            served(1, "info", True, env=keep) as control,
            served(1, "info", True, flags=["--tracing"], env=exporting) as on,
            served(1, "info", True, flags=["--tracing"], env=unsampled) as on_unsampled,
        ):
            started = (off, control, on, on_unsampled)
            servers = dict(zip(TRACING_VARIANTS, started, strict=True))
            calls = {f"Apply {name}": (server, path, requests) for name, server in servers.items()}
            result = rotate(number, args, bare, calls)
        result["spans_received"] = receiver.count
    base = result["rounds"]["ratios"][f"Apply {OFF}"]
    result["to_off"] = {
        name: statistics.median(
            r / b for r, b in zip(result["rounds"]["ratios"][name], base, strict=True)
        )
        for name in calls
    }
    return result


def _profile(
    server: Server,
    call: tuple[str, list[bytes]],
    args: argparse.Namespace,
    concurrency: int,
    connections: int,
) -> None:
    """Record the worker with py-spy (GIL holders only) while it answers Apply calls."""
    worker = server.pids[-1]
    spy = str(Path(sys.executable).with_name("py-spy"))
    recorder = subprocess.Popen(
        [
            spy,
            "record",
            "--gil",
            "--pid",
            str(worker),
            "--rate",
            "500",
            "--format",
            "raw",
            "--output",
            str(args.profile),
            "--nonblocking",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    time.sleep(1.0)  # let py-spy attach
    path, requests = call
    measure(
        server,
        "Apply",
        requests,
        calls=args.calls * 2,
        path=path,
        concurrency=concurrency,
        connections=connections,
    )
    recorder.send_signal(signal.SIGINT)  # py-spy writes its output when interrupted
    recorder.wait(60)


def main_defaults(args: argparse.Namespace, argv: Sequence[str] | None) -> int:
    """Run --defaults: `args.runs` runs; print each run's medians and the medians of runs."""
    started = now()
    servers = "basra-rules serve at its defaults (1 worker, info logs, metrics on)"
    if args.grpc_go:
        servers += "; grpc-go: benchmarks/go_noop (the standard health server)"
    if args.tracing:
        servers += (
            ": tracing off (twice), tracing on (every call sampled, OTLP to a receiver in this "
            "process), tracing on with OTEL_TRACES_SAMPLER=always_off"
        )
    print(
        f"{header('load_bench', started, argv)}\n"
        f"machine: {json.dumps(machine())}\n"
        f"server: {servers}; "
        f"bare: grpcio, 8 threads, the standard health servicer; {args.rounds} rounds of "
        f"{args.calls} calls per run, concurrency {args.concurrency}, "
        f"connections {args.connections}; load generator: "
        + ("ghz" if args.generator == "ghz" else "clients.load in this process")
    )
    if args.tracing:
        names = [f"Apply {variant}" for variant in TRACING_VARIANTS]
    else:
        names = [*requests_at_defaults(), CONTROL, *([GO_CHECK] if args.grpc_go else [])]
    print(f"{'run':>4} " + " ".join(f"{n + ' / bare':>26}" for n in names) + "  bare Check/cpu-s")
    runs = []
    for number in range(args.runs):
        result = run_tracing(number, args) if args.tracing else run_defaults(number, args)
        runs.append(result)
        print(
            f"{number + 1:>4} "
            + " ".join(f"{result['ratios'][n]:>26.3f}" for n in names)
            + f"  {result['bare_check_per_cpu_second']:>16.0f}"
            + (f"  errors {result['errors']}" if result["errors"] else "")
        )
    if any(r["errors"] for r in runs):
        print("calls failed: the figures above do not hold", file=sys.stderr)
        return 1
    medians = {n: statistics.median(r["ratios"][n] for r in runs) for n in names}
    print(" med " + " ".join(f"{medians[n]:>26.3f}" for n in names))
    for name in names:
        rate = statistics.median(r["per_cpu_second"][name] for r in runs)
        spent = statistics.median(r["generator_cpu_us"][name] for r in runs)
        print(
            f"{name}: {rate:.0f} calls per server CPU-second (median of run medians); "
            f"the generator's own CPU {spent:.0f} µs a call"
        )
    if args.grpc_go:
        # Both are over the same bare Checks, so their quotient is that of the two rates.
        go = medians[GO_CHECK]
        apply_to_go = f"{medians['Apply'] / go:.3f}" if go else "not measured (no CPU seen)"
        print(
            f"per server CPU-second: grpc-go Check / bare grpcio Check {go:.2f}; "
            f"Apply / grpc-go Check {apply_to_go}; "
            f"Apply / bare grpcio Check {medians['Apply']:.3f}"
        )
    to_off: dict[str, float] = {}
    if args.tracing:
        for name in names:
            per_run = [r["to_off"][name] for r in runs]
            to_off[name] = statistics.median(per_run)
            shown = ", ".join(f"{v:.3f}" for v in per_run)
            print(f"{name} / Apply {OFF}: {to_off[name]:.3f} (runs: {shown})")
        print(f"spans received: {', '.join(str(r['spans_received']) for r in runs)}")
    finish(
        args.json_out,
        started,
        argv,
        {"medians": medians, "to_off": to_off, "runs": runs},
    )
    return 0


def report(results: Sequence[VariantResult], reply_bytes: int, request_bytes: int) -> str:
    """Format the results as a readable table with the cross-variant comparisons."""
    lines = [
        f"payload: request {request_bytes} B (mean), reply {reply_bytes} B (mean; no-op alike)",
        "",
        f"{'workers':>7} {'Apply/cpu-s':>12} {'noop/cpu-s':>11} {'ratio':>6} "
        f"{'Apply/s':>8} {'noop/s':>8} {'half-sat rps':>12} {'p50 ms':>7} {'p99 ms':>7} "
        f"{'serve Apply/cpu-s':>17} {'errors':>6}",
    ]
    for r in results:
        lines.append(
            f"{r.workers:>7} {r.apply_per_cpu_second:>12.0f} "
            f"{r.noop_per_cpu_second:>11.0f} {r.apply_to_noop:>6.2f} "
            f"{r.apply_per_wall_second:>8.0f} {r.noop_per_wall_second:>8.0f} "
            f"{r.half_saturation_rps:>12.0f} {r.half_saturation_p50_ms:>7.2f} "
            f"{r.half_saturation_p99_ms:>7.2f} {r.serve_apply_per_cpu_second:>17.0f} "
            f"{r.errors:>6}"
        )
    by_workers = {r.workers: r for r in results}
    one, two = by_workers.get(1), by_workers.get(2)
    if one and two:
        change = two.apply_per_cpu_second / one.apply_per_cpu_second - 1
        lines += ["", f"2 workers vs 1, Apply calls per server CPU-second {change:+.1%}"]
    return "\n".join(lines)


def merge(paths: Sequence[Path]) -> tuple[list[VariantResult], int, int]:
    """Combine saved runs (--json-out files): the median of each figure across the runs."""
    runs = [json.loads(path.read_text()) for path in paths]
    # Runs saved before the asyncio server was removed hold its rows too ("io": "asyncio").
    results = [r for run in runs for r in run["results"] if r.get("io", "sync") == "sync"]
    merged = []
    for workers in sorted({r["workers"] for r in results}):
        found = [r for r in results if r["workers"] == workers]
        figures = {
            name: statistics.median(r[name] for r in found)
            for name in VariantResult.__dataclass_fields__
            if name not in ("workers", "errors", "rounds")
        }
        merged.append(
            VariantResult(
                workers=workers,
                errors=sum(r["errors"] for r in found),
                rounds=[],
                **figures,
            )
        )
    return merged, runs[0]["reply_bytes"], runs[0]["request_bytes"]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark and print (and optionally save) its figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", nargs="+", type=int, default=[1, 2], help="worker counts")
    parser.add_argument("--rounds", type=int, default=5, help="rounds per measurement")
    parser.add_argument("--calls", type=int, default=4000, help="calls per saturated run")
    parser.add_argument("--concurrency", type=int, default=16, help="calls in flight")
    parser.add_argument("--connections", type=int, default=8, help="client connections")
    parser.add_argument("--paced-seconds", type=float, default=3.0, help="length of paced runs")
    parser.add_argument(
        "--log-level",
        default="warning",
        help="server log level; at info Apply calls are logged and no-op calls are not",
    )
    parser.add_argument("--json-out", type=Path, help="also write the results as JSON")
    parser.add_argument(
        "--sync-threads",
        type=int,
        default=0,
        help="threads of the server in the no-op comparison (0: the service's own)",
    )
    parser.add_argument(
        "--merge", nargs="+", type=Path, help="print the medians of saved runs instead of running"
    )
    parser.add_argument(
        "--defaults",
        action="store_true",
        help="the service at its defaults against a bare grpcio server (see above)",
    )
    parser.add_argument("--runs", type=int, default=3, help="--defaults: runs (fresh servers)")
    parser.add_argument(
        "--tracing",
        action="store_true",
        help="--defaults: Apply with tracing off, on and on unsampled (see above)",
    )
    parser.add_argument(
        "--profile", type=Path, help="--defaults: write a py-spy profile of Apply load here"
    )
    parser.add_argument(
        "--grpc-go",
        action="store_true",
        help="--defaults: also the grpc-go server's Check (benchmarks/go_noop, see above)",
    )
    parser.add_argument(
        "--generator",
        choices=("load", "ghz"),
        default="load",
        help="--defaults: who sends the load: clients.load in this process, or ghz",
    )
    args = parser.parse_args(argv)
    if args.defaults:
        return main_defaults(args, argv)
    if args.merge:
        merged, reply, request = merge(args.merge)
        print(f"medians of {len(args.merge)} runs: {' '.join(str(p) for p in args.merge)}")
        print(report(merged, reply, request))
        return 0

    requests, reply_bytes = apply_requests()
    request_bytes = round(statistics.mean(len(r) for r in requests))
    started = now()
    results = [run_variant(workers, requests, reply_bytes, args) for workers in args.workers]
    print(
        f"{header('load_bench', started, argv)}\n"
        f"machine: {json.dumps(machine())}\n"
        f"rounds {args.rounds}, {args.calls} calls per saturated run, concurrency "
        f"{args.concurrency}, connections max({args.connections}, workers)"
    )
    print(report(results, reply_bytes, request_bytes))
    finish(
        args.json_out,
        started,
        argv,
        {
            "request_bytes": request_bytes,
            "reply_bytes": reply_bytes,
            "results": [asdict(r) for r in results],
        },
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
