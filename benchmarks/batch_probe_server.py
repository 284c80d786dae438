"""The batch probe's servers: bare grpcio (sync thread pool or grpc.aio), worker processes.

Each worker runs one bare server (no interceptors, no health, no reflection) on a port shared
through SO_REUSEPORT, as service.workers does, with the service's own plan table installed
and its start-up objects frozen. Methods (benchmarks.batch_probe_wire): Noop answers a fixed
reply; Apply is the service's own unary Apply (service.servicer's reader and servicer, or on
grpc.aio the same handler call, under the probe's name); BatchApply runs each item in order
and answers one result each; StreamApply answers each message of a bidi stream with its id;
StreamNoop answers each with the no-op's reply (a stream's own limit); Who names the worker's
pid (the client spreads its connections over the workers with it); Count says how many
items the worker has handled (the load-balancing probe).

    .venv/bin/python -m benchmarks.batch_probe_server --io aio --workers 2 --port 50070

It prints "READY <port> <pid>..." once every worker serves and stops them on SIGTERM.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import multiprocessing
import os
import signal
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from concurrent import futures
from multiprocessing.connection import Connection
from typing import Any

from benchmarks import batch_probe_wire as wire
from service.workers import reserve_port

SYNC_THREADS = 8  # as service.server


def _handlers(reply: bytes, asynchronous: bool) -> Any:
    """The generic handler of the probe's methods, for a sync or an asyncio server."""
    import grpc

    from service import plan_table
    from service.handlers import Handlers
    from service.outcomes import Facts
    from service.servicer import RulesServicer, respond
    from service.servicer import reader as _reader

    plan_table.install()
    handlers = Handlers()
    work = wire.ItemWork(handlers)
    pid = str(os.getpid()).encode()
    counted = [0]

    def batch(request: Any) -> Any:
        outcomes = [work.run(item) for item in request.items]
        counted[0] += len(outcomes)
        return wire.Results(results=[wire.Result(response=r, status=s) for r, s in outcomes])

    def item(message: Any) -> Any:
        counted[0] += 1
        response, status = work.run(message.item)
        return wire.StreamResult(id=message.id, response=response, status=status)

    from basra.v1 import rules_pb2 as pb

    read_apply = _reader(pb.ApplyRequest)
    if asynchronous:
        # The service's servicer as its asyncio twin was, before that server was removed: the
        # same handler call, a refusal ended by the asyncio context's abort.

        async def noop_a(request: bytes, context: Any) -> bytes:
            return reply

        async def apply_a(request: Any, context: Any) -> Any:
            counted[0] += 1
            outcome = respond(handlers.apply, request, Facts(), context.time_remaining())
            if isinstance(outcome, bytes):
                return outcome
            status = outcome.status()
            await context.abort(status.code, status.details, status.trailing_metadata)
            raise AssertionError("abort raises")

        async def batch_a(request: Any, context: Any) -> Any:
            return batch(request)

        async def stream_a(requests: AsyncIterator[Any], context: Any) -> AsyncIterator[Any]:
            async for message in requests:
                yield item(message)

        async def stream_noop_a(requests: AsyncIterator[Any], context: Any) -> AsyncIterator[Any]:
            async for message in requests:
                yield wire.StreamResult(id=message.id, response=reply)

        async def who_a(request: bytes, context: Any) -> bytes:
            return pid

        async def count_a(request: bytes, context: Any) -> bytes:
            return str(counted[0]).encode()

        noop: Any = noop_a
        apply: Any = apply_a
        batched: Any = batch_a
        streamed: Any = stream_a
        stream_noop: Any = stream_noop_a
        who: Any = who_a
        count: Any = count_a
    else:
        servicer = RulesServicer(handlers)

        def noop_s(request: bytes, context: Any) -> bytes:
            return reply

        def apply_s(request: Any, context: Any) -> Any:
            counted[0] += 1
            return servicer.Apply(request, context)

        def stream_s(requests: Iterator[Any], context: Any) -> Iterator[Any]:
            for message in requests:
                yield item(message)

        def stream_noop_s(requests: Iterator[Any], context: Any) -> Iterator[Any]:
            for message in requests:
                yield wire.StreamResult(id=message.id, response=reply)

        def who_s(request: bytes, context: Any) -> bytes:
            return pid

        def count_s(request: bytes, context: Any) -> bytes:
            return str(counted[0]).encode()

        noop, apply, streamed, who, count = noop_s, apply_s, stream_s, who_s, count_s
        stream_noop = stream_noop_s
        batched = lambda request, context: batch(request)  # noqa: E731
    methods = {
        "Noop": grpc.unary_unary_rpc_method_handler(noop),
        "Apply": grpc.unary_unary_rpc_method_handler(apply, request_deserializer=read_apply),
        "BatchApply": grpc.unary_unary_rpc_method_handler(
            batched,
            request_deserializer=wire.Items.FromString,
            response_serializer=wire.Results.SerializeToString,
        ),
        "StreamApply": grpc.stream_stream_rpc_method_handler(
            streamed,
            request_deserializer=wire.StreamItem.FromString,
            response_serializer=wire.StreamResult.SerializeToString,
        ),
        "StreamNoop": grpc.stream_stream_rpc_method_handler(
            stream_noop,
            request_deserializer=wire.StreamItem.FromString,
            response_serializer=wire.StreamResult.SerializeToString,
        ),
        "Who": grpc.unary_unary_rpc_method_handler(who),
        "Count": grpc.unary_unary_rpc_method_handler(count),
    }
    return grpc.method_handlers_generic_handler(wire.SERVICE, methods)


OPTIONS = [("grpc.so_reuseport", 1)]


def worker_main(io: str, port: int, reply_bytes: int, ready: Connection) -> None:
    """Serve the probe on the shared port until SIGTERM."""
    import grpc

    reply = wire.Raw(data=b"x" * (reply_bytes - 3)).SerializeToString()  # 3: tag and length
    if io == "aio":

        async def serve() -> None:
            server = grpc.aio.server(options=OPTIONS)
            server.add_generic_rpc_handlers((_handlers(reply, True),))
            server.add_insecure_port(f"127.0.0.1:{port}")
            await server.start()
            gc.collect()
            gc.freeze()
            ready.send(os.getpid())
            stop = asyncio.Event()
            asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
            await stop.wait()
            await server.stop(0)

        asyncio.run(serve())
        return
    pool = futures.ThreadPoolExecutor(SYNC_THREADS)
    server = grpc.server(pool, options=OPTIONS)
    server.add_generic_rpc_handlers((_handlers(reply, False),))
    server.add_insecure_port(f"127.0.0.1:{port}")
    server.start()
    gc.collect()
    gc.freeze()
    ready.send(os.getpid())
    stopped = threading.Event()
    signal.signal(signal.SIGTERM, lambda signum, frame: stopped.set())
    stopped.wait()
    server.stop(0)


def main(argv: list[str] | None = None) -> int:
    """Start the workers, print READY, stop them on SIGTERM."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--io", choices=("sync", "aio"), required=True)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--reply-bytes", type=int, default=440)
    args = parser.parse_args(argv)
    holder = reserve_port("127.0.0.1", args.port)
    port = holder.getsockname()[1]
    spawn = multiprocessing.get_context("spawn")
    pids, processes = [], []
    for _ in range(args.workers):
        mine, theirs = spawn.Pipe()
        process = spawn.Process(target=worker_main, args=(args.io, port, args.reply_bytes, theirs))
        process.start()
        processes.append(process)
        if not mine.poll(120):
            raise SystemExit("a worker did not start")
        pids.append(mine.recv())
    print("READY", port, *pids, flush=True)
    stopped = threading.Event()
    signal.signal(signal.SIGTERM, lambda signum, frame: stopped.set())
    signal.signal(signal.SIGINT, lambda signum, frame: stopped.set())
    stopped.wait()
    for process in processes:
        if process.pid is not None:
            os.kill(process.pid, signal.SIGTERM)
    for process in processes:
        process.join(10)
    holder.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
