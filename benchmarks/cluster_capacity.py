"""Capacity on the cluster: a gateway's matches through the Service, at human pace.

A gateway holds many concurrent matches and sends each match's move as its player makes it,
one every 2-3 s a match (uniformly drawn; a seat moves every 4-6 s). This simulation is that
gateway: it starts its own test cluster (testkit/cluster.py) with the project's image,
installs the chart with ONE pod (autoscaling off, replicaCount 1), and calls the pod through
the Service's ClusterIP with the published service config (deploy/grpc-service-config.json:
round_robin, the retry policy and its throttle). Each match starts with NewMatch and plays
legal moves drawn from the last answer's `legal_moves` with `expected_seq`; a match that ends
is replaced by a new one.

Two ways to send the moves:
- unary: each move is its own Apply call when it is due;
- batch: a gateway loop ticks every `--tick` seconds and sends the moves due since the last
  tick as BatchApply calls of at most 64 items (the server's --max-batch-items); the latency
  counted is the BatchApply call's (a move also waits up to one tick for its batch).

The number of matches ramps up in steps; each step warms for one move interval, then
measures for `--seconds`: every call's latency (send to answer, the client's view), its code,
and the pod's CPU (the pod cgroup's cpuacct on its node). A step holds when the calls' p99 is
<= 20 ms and none failed. The figure: the most matches a step held, per CPU of the pod's limit
and per CPU-second the pod used.

The machine has 2 cores: the pod is limited to 1 CPU (one worker), and this generator, one
Python process, takes most of the other (its own CPU is printed per step), so the pod is not
starved by its load. Run it alone (`flock /tmp/basra-bench.lock`): other work on the machine
takes CPU from both.

    flock /tmp/basra-bench.lock .venv/bin/python -m benchmarks.cluster_capacity \
        --json-out /tmp/cluster-capacity.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import resource
import statistics
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import grpc
from basra.v1 import rules_pb2 as pb
from basra.v1 import rules_pb2_grpc as pb_grpc
from grpc import aio

from testkit import cluster as kube
from testkit import images
from testkit.chart_on_cluster import Release, install
from testkit.deployment import REPO

SERVICE_CONFIG = REPO / "deploy" / "grpc-service-config.json"
P99_TARGET_MS = 20.0
MAX_BATCH = 64
DEADLINE_SECONDS = 2.0


@dataclass
class Match:
    """One match the gateway holds: its last state and legal moves."""

    state: pb.State
    moves: pb.LegalMoves
    rng: random.Random
    due: float = 0.0

    def action(self) -> pb.ApplyRequest:
        """The next move, drawn from the legal moves, as an Apply request."""
        move = self.rng.choice(list(self.moves.moves))
        seat = self.moves.seat
        if move.plans and (not move.trails or self.rng.random() < 0.7):
            plan = self.rng.choice(list(move.plans))
            action = pb.Action(seat=seat, card=move.card, plan_id=plan.id)
        else:
            action = pb.Action(seat=seat, card=move.card, trail=True)
        return pb.ApplyRequest(state=self.state, action=action, expected_seq=self.state.seq)


@dataclass
class Tally:
    """What one step saw."""

    latencies: list[float] = field(default_factory=list)
    new_match_latencies: list[float] = field(default_factory=list)
    items: int = 0
    errors: dict[str, int] = field(default_factory=dict)

    def error(self, code: str) -> None:
        self.errors[code] = self.errors.get(code, 0) + 1


@dataclass
class Step:
    """One step's figures."""

    mode: str
    matches: int
    seconds: float
    calls: int
    items: int
    moves_per_second: float
    p50_ms: float
    p99_ms: float
    max_ms: float
    new_match_p99_ms: float
    errors: dict[str, int]
    pod_cpu: float
    """The pod's CPU-seconds per second over the step."""
    throttled: float
    """Share of the pod's CFS periods in which its CPU limit throttled it."""
    generator_cpu: float
    held: bool


def _quantile(values: Sequence[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


class Gateway:
    """The matches, the channel, and the loops that send their moves."""

    def __init__(self, target: str, mode: str, interval: tuple[float, float], tick: float):
        config = json.dumps(json.loads(SERVICE_CONFIG.read_text()))
        self.channel = aio.insecure_channel(target, options=[("grpc.service_config", config)])
        self.stub = pb_grpc.RulesServiceStub(self.channel)  # type: ignore[no-untyped-call]
        self.mode = mode
        self.interval = interval
        self.tick = tick
        self.matches: list[Match] = []
        self.tally = Tally()
        self.rng = random.Random(7)
        self.tasks: list[asyncio.Task[None]] = []
        self.running = True
        self.due: list[Match] = []

    async def new_match(self, now: float) -> Match:
        started = time.perf_counter()
        answer = await self.stub.NewMatch(pb.NewMatchRequest(), timeout=DEADLINE_SECONDS)
        self.tally.new_match_latencies.append(time.perf_counter() - started)
        match = Match(answer.state, answer.legal_moves, random.Random(self.rng.random()))
        match.due = now + self.rng.uniform(*self.interval)
        return match

    async def grow(self, count: int) -> None:
        """Add matches up to `count`, their first moves spread over one interval."""
        loop = asyncio.get_running_loop()
        while len(self.matches) < count:
            batch = min(16, count - len(self.matches))
            try:
                made = await asyncio.gather(*(self.new_match(loop.time()) for _ in range(batch)))
            except grpc.RpcError:
                await asyncio.sleep(0.2)  # the pod is busy: start them a moment later
                continue
            for match in made:
                self.matches.append(match)
                if self.mode == "unary":
                    self.tasks.append(asyncio.create_task(self.play(match)))

    async def _replace(self, match: Match) -> None:
        fresh = await self.new_match(asyncio.get_running_loop().time())
        match.state, match.moves, match.due = fresh.state, fresh.moves, fresh.due

    def _took(self, match: Match, answer: pb.ApplyResponse, now: float) -> bool:
        """Take an answer; whether the match goes on."""
        match.state, match.moves = answer.state, answer.legal_moves
        match.due = now + match.rng.uniform(*self.interval)
        return answer.state.status != pb.STATUS_OVER

    async def play(self, match: Match) -> None:
        """Unary: one Apply per move, when it is due."""
        loop = asyncio.get_running_loop()
        while self.running:
            await asyncio.sleep(max(0.0, match.due - loop.time()))
            if not self.running:
                return
            request = match.action()
            started = time.perf_counter()
            try:
                answer = await self.stub.Apply(request, timeout=DEADLINE_SECONDS)
            except grpc.RpcError as error:
                self.tally.error(str(error.code().name))
                match.due = loop.time() + match.rng.uniform(*self.interval)
                continue
            self.tally.latencies.append(time.perf_counter() - started)
            self.tally.items += 1
            if not self._took(match, answer, loop.time()):
                await self._replace(match)

    async def batches(self) -> None:
        """Batch: every tick, the moves due as BatchApply calls of at most 64 items."""
        loop = asyncio.get_running_loop()
        while self.running:
            await asyncio.sleep(self.tick)
            now = loop.time()
            due = [m for m in self.matches if m.due <= now]
            for m in due:
                m.due = float("inf")  # in flight
            for start in range(0, len(due), MAX_BATCH):
                chunk = due[start : start + MAX_BATCH]
                self.tasks.append(asyncio.create_task(self.batch(chunk)))
            self.tasks = [t for t in self.tasks if not t.done()]

    async def batch(self, chunk: list[Match]) -> None:
        loop = asyncio.get_running_loop()
        request = pb.BatchApplyRequest(requests=[m.action() for m in chunk])
        started = time.perf_counter()
        try:
            answer = await self.stub.BatchApply(request, timeout=DEADLINE_SECONDS)
        except grpc.RpcError as error:
            self.tally.error(str(error.code().name))
            for m in chunk:
                m.due = loop.time() + m.rng.uniform(*self.interval)
            return
        self.tally.latencies.append(time.perf_counter() - started)
        now = loop.time()
        for match, result in zip(chunk, answer.results, strict=True):
            if result.HasField("status"):
                self.tally.error(f"item:{result.status.code}")
                match.due = now + match.rng.uniform(*self.interval)
                continue
            self.tally.items += 1
            if not self._took(match, result.response, now):
                await self._replace(match)

    async def close(self) -> None:
        self.running = False
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        await self.channel.close(None)


def _pod_cgroup(release: Release) -> tuple[Path, Path]:
    """The release's one pod's cgroups (v1), below its node's kubelet's cgroup root: its
    cpuacct and its cpu group."""
    (pod,) = release.pods()
    uid = pod["metadata"]["uid"]
    node = release.cluster.node(pod["spec"]["nodeName"])
    found = []
    for name in ("cpuacct.usage", "cpu.stat"):
        # the v1 hierarchies (the unified one's cpu.stat has no CFS periods)
        for root in (r for r in Path("/sys/fs/cgroup").iterdir() if r.name != "unified"):
            below = root / node.cgroup_root.lstrip("/")
            groups = [g for g in below.glob(f"**/pod{uid}") if (g / name).exists()]
            if groups:
                found.append(groups[0])
                break
        else:
            raise FileNotFoundError(f"no cgroup of pod {uid} with {name}")
    return found[0], found[1]


def _pod_cpu(groups: tuple[Path, Path]) -> tuple[float, int, int]:
    """The pod's CPU-seconds so far, its CFS periods and the periods it was throttled in."""
    accounting, cpu = groups
    stat = dict(line.split() for line in (cpu / "cpu.stat").read_text().splitlines())
    used = int((accounting / "cpuacct.usage").read_text()) / 1e9
    return used, int(stat["nr_periods"]), int(stat["nr_throttled"])


def _own_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def _run_mode(
    release: Release, mode: str, steps: Sequence[int], args: argparse.Namespace
) -> list[Step]:
    interval = (args.interval_low, args.interval_high)
    gateway = Gateway(release.target(), mode, interval, args.tick)
    if mode == "batch":
        gateway.tasks.append(asyncio.create_task(gateway.batches()))
    results: list[Step] = []
    misses = 0
    try:
        for count in steps:
            await gateway.grow(count)
            await asyncio.sleep(args.interval_high)  # warm: every match has moved once
            gateway.tally = Tally()
            group = _pod_cgroup(release)
            (cpu_before, periods_before, throttled_before), own_before = _pod_cpu(group), _own_cpu()
            began = time.perf_counter()
            await asyncio.sleep(args.seconds)
            elapsed = time.perf_counter() - began
            tally = gateway.tally
            cpu_after, periods_after, throttled_after = _pod_cpu(group)
            pod_cpu = (cpu_after - cpu_before) / elapsed
            periods = max(1, periods_after - periods_before)
            throttled = (throttled_after - throttled_before) / periods
            own = (_own_cpu() - own_before) / elapsed
            ms = [x * 1000 for x in tally.latencies]
            p99 = _quantile(ms, 0.99)
            held = bool(ms) and p99 <= P99_TARGET_MS and not tally.errors
            step = Step(
                mode,
                count,
                round(elapsed, 1),
                len(ms),
                tally.items,
                round(tally.items / elapsed, 1),
                round(statistics.median(ms), 2) if ms else 0.0,
                round(p99, 2),
                round(max(ms, default=0.0), 2),
                round(_quantile([x * 1000 for x in tally.new_match_latencies], 0.99), 2),
                dict(tally.errors),
                round(pod_cpu, 3),
                round(throttled, 3),
                round(own, 3),
                held,
            )
            results.append(step)
            print(json.dumps(asdict(step)), flush=True)
            misses = 0 if held else misses + 1
            if misses >= args.stop_after_misses:
                break
    finally:
        await gateway.close()
    return results


def _summary(steps: Sequence[Step], cpu_limit: float) -> dict[str, Any]:
    held = [s for s in steps if s.held]
    if not held:
        return {"held": 0}
    best = max(held, key=lambda s: s.matches)
    return {
        "matches_held": best.matches,
        "per_limit_cpu": round(best.matches / cpu_limit),
        "per_used_cpu_second": round(best.matches / best.pod_cpu) if best.pod_cpu else None,
        "p99_ms": best.p99_ms,
        "moves_per_second": best.moves_per_second,
        "pod_cpu": best.pod_cpu,
    }


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--modes", default="unary,batch")
    parser.add_argument("--unary-steps", default="250,500,750,1000,1250,1500,2000,2500")
    parser.add_argument("--batch-steps", default="250,500,1000,1500,2000,3000,4000,6000")
    parser.add_argument("--seconds", type=float, default=20.0, help="measured per step")
    parser.add_argument("--interval-low", type=float, default=2.0)
    parser.add_argument("--interval-high", type=float, default=3.0)
    parser.add_argument("--tick", type=float, default=0.1, help="the batching gateway's tick")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--cpu", default="1", help="the pod's CPU request and limit")
    parser.add_argument("--stop-after-misses", type=int, default=2)
    parser.add_argument(
        "--nodes", type=int, default=kube.NODES, help="the cluster's nodes (the pod is on one)"
    )
    parser.add_argument("--json-out", type=Path)
    args = parser.parse_args(argv)
    values = [
        "--set",
        "autoscaling.enabled=false",
        "--set",
        "replicaCount=1",
        "--set",
        f"server.workers={args.workers}",
        "--set",
        f"resources.requests.cpu={args.cpu}",
        "--set",
        f"resources.limits.cpu={args.cpu}",
    ]
    report: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "settings": {k: str(v) for k, v in vars(args).items()},
        "steps": [],
        "summary": {},
    }
    with kube.started(images.archives(images.TAGS), nodes=args.nodes) as cluster:
        release = install(cluster, "basra-rules", namespace="capacity", values=values)
        release.wait_ready(1)
        for mode in args.modes.split(","):
            steps = [int(n) for n in getattr(args, f"{mode}_steps").split(",")]
            done = asyncio.run(_run_mode(release, mode, steps, args))
            report["steps"] += [asdict(s) for s in done]
            report["summary"][mode] = _summary(done, float(args.cpu))
            print(mode, json.dumps(report["summary"][mode]), flush=True)
    load = Path("/proc/loadavg").read_text().split()[:3]
    report["load_average_after"] = load
    print(json.dumps(report["summary"], indent=1))
    if args.json_out:
        args.json_out.write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
