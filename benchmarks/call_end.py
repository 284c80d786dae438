"""What a call pays for its log line to carry the code its client saw (service/grace.py).

At the end of every call the interceptor asks grpc whether the call is still live,
`context.is_active()`, and for a call that is not, `context.time_remaining()`. This measures
those questions on real contexts, inside a handler of a real thread-pool server, beside the
Apply handler alone on the ghz data, in the same process and run: medians of the rounds,
nanoseconds per question, and their share of an Apply handler.

    .venv/bin/python -m benchmarks.call_end --rounds 7
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from concurrent import futures
from typing import Any

import grpc
from basra.v1 import rules_pb2 as pb

from benchmarks import ghz_data
from service.config import Config
from service.outcomes import Facts
from service.server import make_handlers

QUESTIONS = 100_000
METHOD = "/bench.CallEnd/Ask"


def _per_question(ask: Callable[[], object]) -> float:
    """Nanoseconds per call of `ask`, over QUESTIONS calls."""
    began = time.perf_counter_ns()
    for _ in range(QUESTIONS):
        ask()
    return (time.perf_counter_ns() - began) / QUESTIONS


def _handler(found: dict[str, float]) -> Any:
    def ask(request: bytes, context: Any) -> bytes:
        found["is_active"] = _per_question(context.is_active)
        found["time_remaining"] = _per_question(context.time_remaining)
        return b""

    return grpc.unary_unary_rpc_method_handler(ask)


def _generic(handler: Any) -> Any:
    return grpc.method_handlers_generic_handler("bench.CallEnd", {"Ask": handler})


def sync_questions() -> dict[str, float]:
    """The questions' cost on a thread-pool server's context."""
    found: dict[str, float] = {}
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=1))
    server.add_generic_rpc_handlers((_generic(_handler(found)),))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        channel.unary_unary(METHOD, None, None)(b"", timeout=120)
    server.stop(0)
    return found


def apply_handler_ns() -> float:
    """Nanoseconds of one Apply handler call on the ghz data, in process."""
    handlers = make_handlers(Config(), None)
    requests = ghz_data.read("apply.json", pb.ApplyRequest)
    began = time.perf_counter_ns()
    for request in requests:
        handlers.apply(request, Facts())
    return (time.perf_counter_ns() - began) / len(requests)


def main(argv: Sequence[str] | None = None) -> int:
    """Measure and print the medians of the rounds."""
    parser = argparse.ArgumentParser(prog="benchmarks.call_end", description=__doc__)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    rows: dict[str, list[float]] = {}
    for _ in range(args.rounds):
        found = {f"sync {k}": v for k, v in sync_questions().items()}
        found["Apply handler"] = apply_handler_ns()
        for name, value in found.items():
            rows.setdefault(name, []).append(value)
    medians = {name: statistics.median(values) for name, values in rows.items()}
    apply = medians["Apply handler"]
    for name, value in medians.items():
        print(f"{name:<26} {value:10.0f} ns  {value / apply:7.2%} of an Apply handler")
    return 0


if __name__ == "__main__":
    sys.exit(main())
