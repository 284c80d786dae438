"""The batch probe's load client: grpc.aio in a process of its own, driven by JSON lines.

benchmarks.batch_probe starts it once and sends it one JSON command a line on stdin; it answers
each with one JSON line on stdout. `connect` opens channels to a probe server, each its own
connection, and keeps as many per worker as asked (the kernel's SO_REUSEPORT hash decides which
worker a connection reaches; the Who method says which it did). `run` sends one load, closed
(a fixed number of calls or streams in flight) or paced (items scheduled at a rate, latency
counted from each item's scheduled time so that a late send counts against the server), and
reads the server processes' CPU seconds from /proc at both ends of it. `spread` sends batches
and streams to several servers behind one channel with client-side round_robin and reports how
many items each server handled.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import grpc

from benchmarks import batch_probe_wire as wire
from benchmarks.servers import cpu_seconds

TIMEOUT_SECONDS = 30.0
MAX_PACED_CALLS = 512  # a paced run's bound on calls in flight (beyond it, sends wait)
PACE_TICK_SECONDS = 0.0005


# grpc's type stubs know little of grpc.aio: its channels and calls are typed Any here.
EOF: Any = getattr(grpc.aio, "EOF")  # noqa: B009


def _channel(target: str, options: Sequence[tuple[str, Any]] = ()) -> Any:
    # A local subchannel pool: each channel its own connection, not one shared by all.
    return grpc.aio.insecure_channel(
        target, options=[("grpc.use_local_subchannel_pool", 1), *options]
    )


@dataclass
class Target:
    """The channels kept to one probe server, spread evenly over its workers."""

    channels: list[Any] = field(default_factory=list)
    workers: list[str] = field(default_factory=list)


async def connect(address: str, workers: int, per_worker: int) -> Target:
    """Open connections until each of `workers` workers has `per_worker` of them."""
    kept: dict[str, list[Any]] = {}
    for _ in range(64 * workers * per_worker):
        channel = _channel(address)
        pid = (await channel.unary_unary(wire.WHO)(b"", timeout=TIMEOUT_SECONDS)).decode()
        if len(kept.setdefault(pid, [])) < per_worker:
            kept[pid].append(channel)
        else:
            await channel.close()
        if len(kept) == workers and all(len(c) == per_worker for c in kept.values()):
            break
    target = Target()
    # Interleaved, so that tasks taken in turn alternate workers.
    for round_ in zip(*kept.values(), strict=False):
        target.channels.extend(round_)
    target.workers = list(kept)
    return target


def _percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q / 100 * len(ordered)))]


class Load:
    """One measured load against one target."""

    def __init__(self, target: Target, requests: list[bytes], command: dict[str, Any]) -> None:
        self.target = target
        self.variant: str = command["variant"]
        self.n: int = command.get("n", 1)
        self.inflight: int = command["inflight"]
        self.items: int = command["items"]
        self.rate: float = command.get("rate", 0.0)
        self.requests = requests
        self.latencies: list[float] = []
        self.refused = 0
        self.errors = 0
        self.done = 0
        if self.variant == "batch":
            count = len(requests)
            self.bodies = [
                wire.Items(
                    items=[requests[(i + j) % count] for j in range(self.n)]
                ).SerializeToString()
                for i in range(count)
            ]
        else:
            self.bodies = requests

    def _unary(self, index: int) -> Any:
        channel = self.target.channels[index % len(self.target.channels)]
        path = {"noop": wire.NOOP, "apply": wire.APPLY, "batch": wire.BATCH}[self.variant]
        return channel.unary_unary(path)

    async def _call(self, index: int, started: float) -> None:
        body = self.bodies[index % len(self.bodies)]
        try:
            reply = await self._unary(index)(body, timeout=TIMEOUT_SECONDS)
        except grpc.aio.AioRpcError:
            self.errors += self.n
            return
        elapsed = time.perf_counter() - started
        if self.variant == "batch" and index % 64 == 0:
            # A sample of the answers is read: every item answered, refusals counted.
            results = wire.Results.FromString(reply).results
            if len(results) != self.n:
                self.errors += self.n
            self.refused += sum(1 for r in results if r.status)
        self.latencies.extend([elapsed] * self.n)
        self.done += self.n

    async def closed_unary(self) -> None:
        calls = -(-self.items // self.n)
        counter = iter(range(calls))

        async def worker() -> None:
            for index in counter:
                await self._call(index, time.perf_counter())

        await asyncio.gather(*(worker() for _ in range(self.inflight)))

    async def paced_unary(self) -> None:
        calls = -(-self.items // self.n)
        interval = self.n / self.rate
        bound = asyncio.Semaphore(MAX_PACED_CALLS)
        tasks = []
        begin = time.perf_counter()

        async def one(index: int, scheduled: float) -> None:
            async with bound:
                await self._call(index, scheduled)

        for index in range(calls):
            scheduled = begin + index * interval
            delay = scheduled - time.perf_counter()
            if delay > PACE_TICK_SECONDS:
                await asyncio.sleep(delay)
            tasks.append(asyncio.create_task(one(index, scheduled)))
        await asyncio.gather(*tasks)

    async def streams(self) -> None:
        """`inflight` streams, each with at most `n` items in flight (its depth)."""
        depth = self.n
        count = self.inflight
        queues: list[asyncio.Queue[tuple[int, float] | None]] = [
            asyncio.Queue() for _ in range(count)
        ]
        sent_at: dict[int, float] = {}

        async def stream(number: int) -> None:
            channel = self.target.channels[number % len(self.target.channels)]
            call = channel.stream_stream(wire.STREAM)(timeout=TIMEOUT_SECONDS * 10)
            room = asyncio.Semaphore(depth)
            queue = queues[number]

            async def writer() -> None:
                while (entry := await queue.get()) is not None:
                    await room.acquire()
                    ident, scheduled = entry
                    sent_at[ident] = scheduled or time.perf_counter()
                    body = self.requests[ident % len(self.requests)]
                    await call.write(wire.StreamItem(id=ident, item=body).SerializeToString())
                await call.done_writing()

            async def reader() -> None:
                while (reply := await call.read()) is not EOF:
                    result = wire.StreamResult.FromString(reply)
                    self.latencies.append(time.perf_counter() - sent_at.pop(result.id))
                    self.refused += bool(result.status)
                    self.done += 1
                    room.release()

            await asyncio.gather(writer(), reader())

        running = [asyncio.create_task(stream(number)) for number in range(count)]
        begin = time.perf_counter()
        interval = 1 / self.rate if self.rate else 0.0
        for ident in range(self.items):
            scheduled = 0.0
            if interval:
                scheduled = begin + ident * interval
                delay = scheduled - time.perf_counter()
                if delay > PACE_TICK_SECONDS:
                    await asyncio.sleep(delay)
            queues[ident % count].put_nowait((ident, scheduled))
            if not interval and ident % 256 == 0:
                await asyncio.sleep(0)  # closed: let the writers drain the queues as they go
        for queue in queues:
            queue.put_nowait(None)
        try:
            await asyncio.gather(*running)
        except grpc.aio.AioRpcError:
            self.errors += self.items - self.done

    async def run(self, pids: Sequence[int]) -> dict[str, Any]:
        """Send the load; return its figures."""
        before = cpu_seconds(pids)
        started = time.perf_counter()
        if self.variant == "stream":
            await self.streams()
        elif self.rate:
            await self.paced_unary()
        else:
            await self.closed_unary()
        wall = time.perf_counter() - started
        used = cpu_seconds(pids) - before
        return {
            "items": self.done,
            "wall_seconds": wall,
            "server_cpu_seconds": used,
            "errors": self.errors,
            "refused_items_sampled": self.refused,
            "p50_ms": _percentile(self.latencies, 50) * 1e3,
            "p99_ms": _percentile(self.latencies, 99) * 1e3,
        }


async def spread(addresses: list[str], requests: list[bytes], command: dict[str, Any]) -> Any:
    """Items each server handled: `calls` batches of `n` over round_robin, then long streams."""
    target = "ipv4:" + ",".join(addresses)
    config = json.dumps({"loadBalancingConfig": [{"round_robin": {}}]})
    channel = _channel(target, [("grpc.service_config", config)])

    async def counts() -> list[int]:
        found = []
        for address in addresses:
            probe = _channel(address)
            found.append(int(await probe.unary_unary(wire.COUNT)(b"", timeout=TIMEOUT_SECONDS)))
            await probe.close()
        return found

    await channel.channel_ready()
    n = command["n"]
    body = wire.Items(items=[requests[j % len(requests)] for j in range(n)]).SerializeToString()
    start = await counts()
    batch_call = channel.unary_unary(wire.BATCH)
    for _ in range(command["calls"]):
        await batch_call(body, timeout=TIMEOUT_SECONDS)
    after_batches = await counts()
    found: dict[str, Any] = {"batches": [a - b for a, b in zip(after_batches, start, strict=True)]}
    for streams in command["streams"]:
        before = await counts()
        calls = [channel.stream_stream(wire.STREAM)() for _ in range(streams)]
        per_stream = command["calls"] * n // streams
        for ident in range(per_stream):
            for call in calls:
                await call.write(wire.StreamItem(id=ident, item=requests[0]).SerializeToString())
                await call.read()
        for call in calls:
            await call.done_writing()
            await call.read()
        after = await counts()
        found[f"{streams} streams"] = [a - b for a, b in zip(after, before, strict=True)]
    await channel.close()
    return found


async def serve_commands() -> None:
    """Answer the JSON commands of stdin, one a line, until it closes."""
    from basra.v1 import rules_pb2 as pb

    from benchmarks import ghz_data

    requests = [r.SerializeToString() for r in ghz_data.read("apply.json", pb.ApplyRequest)]
    targets: dict[str, Target] = {}
    loop = asyncio.get_running_loop()
    while line := await loop.run_in_executor(None, sys.stdin.readline):
        command = json.loads(line)
        op = command["op"]
        if op == "connect":
            target = await connect(command["address"], command["workers"], command["per_worker"])
            targets[command["name"]] = target
            answer: Any = {"workers": target.workers}
        elif op == "run":
            load = Load(targets[command["name"]], requests, command)
            answer = await load.run(command["pids"])
        elif op == "spread":
            answer = await spread(command["addresses"], requests, command)
        else:
            answer = {"error": f"unknown op {op}"}
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    asyncio.run(serve_commands())
