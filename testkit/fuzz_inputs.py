"""The inputs of the coverage-guided fuzz targets (testkit/atheris_target.py): what an input is
for each RPC, its seeds, its structure-aware mutations, and the replay of a corpus.

An input is the request's bytes, except for BatchApply: four leading bytes set the worker's
admission bound (0: none), the calls it holds besides this one, the call's deadline (0: none;
else the seconds left at its start and the step they shrink by at each asking, so that it can
run out part-way through the batch) and huge items (below 0xF1: none; else one to three items
padded with an unknown field to about the item bound, at, under or past it), then the request's
bytes: the inputs stay small, and so fast to mutate, while the requests reach the size bounds.
The seeds of each RPC are its requests in the golden corpus (tests/data/golden), every
profile's; BatchApply's are batches of the golden Apply requests, at, under and over the item
bound. Findings of the fuzz
targets are kept in tests/fuzz/corpus/<RPC>/, which the test command replays with the seeds:

    .venv/bin/python -m testkit.fuzz_inputs tests/fuzz/corpus /tmp/fuzz-long/corpus

replays every input of the seeds and of each directory's <RPC>/ subdirectories and prints the
inputs per RPC; it exits 1 on any unexpected outcome (run it under coverage.py for the lines
a corpus reaches).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from functools import cache
from pathlib import Path
from typing import Any

from basra.v1 import rules_pb2 as pb
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from service import batch
from service.config import Config
from testkit import fuzz
from testkit.fuzz_calls import BATCH, Context, Worker, check
from testkit.golden import load_cases
from testkit.rpcs import methods

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO / "tests" / "fuzz" / "corpus"
HEADER = 4
MAX_BOUND = 72
HUGE = 0xF1  # the first header value that pads items
DELTAS = (-1, 0, 1, -1000, 5000)  # bytes past the item bound a padded item has
ITEM_BOUND = Config().max_message_bytes
PADDING_FIELD = 1000  # a field number ApplyRequest does not have: read as an unknown field


# ---- what an input is ----


def decode(method: str, data: bytes) -> tuple[bytes, Context, tuple[int, int]]:
    """The request bytes of an input, its call's context and the worker's admission."""
    if method != BATCH:
        return data, Context(), (0, 0)
    head = data[:HEADER].ljust(HEADER, b"\0")
    bound = head[0] % (MAX_BOUND + 1)
    busy = head[1] % bound if bound else 0
    context = Context()
    if head[2]:
        # Seconds left: -0.002 to 0.028; step: 0 to 0.0075 s at each asking.
        context = Context((head[2] % 16) * 0.002 - 0.002, (head[2] // 16) * 0.0005)
    body = data[HEADER:]
    if head[3] >= HUGE:
        body = _inflated(body, head[3] - HUGE)
    return body, context, (bound, busy)


def _inflated(body: bytes, code: int) -> bytes:
    """The batch with 1 to 3 items padded to the item bound plus a delta (`code`: 0 to 14)."""
    try:
        items = list(batch.RequestWire.FromString(body).requests)
    except Exception:
        return body
    delta, count = DELTAS[code % len(DELTAS)], 1 + code // len(DELTAS)
    for at in range(min(count, len(items))):
        items[at] = padded(items[at], ITEM_BOUND + delta)
    return bytes(batch.RequestWire(requests=items).SerializeToString())


def padded(item: bytes, size: int) -> bytes:
    """The bytes with an unknown bytes field appended that brings them to `size` (as near as
    the field's own length allows): protobuf's encoding of a message of that one field, which
    appended to a message's encoding reads as the same message with an unknown field."""
    padding = _padding()
    room = size - len(item) - (padding(padding=b"\0").ByteSize() - 1)
    while room >= 0:
        encoded: bytes = padding(padding=bytes(room)).SerializeToString()
        if len(item) + len(encoded) <= size:
            return item + encoded
        room -= 1
    return item


@cache
def _padding() -> Any:
    """A message of one bytes field numbered PADDING_FIELD (made at run time: no stub)."""
    file = descriptor_pb2.FileDescriptorProto(
        name="testkit/fuzz_padding.proto", package="testkit.fuzz", syntax="proto3"
    )
    message = file.message_type.add(name="Padding")
    message.field.add(
        name="padding",
        number=PADDING_FIELD,
        type=descriptor_pb2.FieldDescriptorProto.TYPE_BYTES,
        label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL,
    )
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("testkit.fuzz.Padding"))


def encode_batch(
    body: bytes, bound: int = 0, busy: int = 0, deadline: int = 0, huge: int = 0
) -> bytes:
    """A BatchApply input: its header, then the request's bytes."""
    return bytes((bound, busy, deadline, huge)) + body


def run_input(worker: Worker, method: str, data: bytes) -> list[str]:
    """Run one input; return its unexpected outcomes ([]: none)."""
    body, context, admission = decode(method, data)
    return check(worker, method, body, context, admission=admission)[1]


# ---- seeds ----


@cache
def seeds(method: str) -> tuple[bytes, ...]:
    """The seed inputs of an RPC, from the golden corpus."""
    requests: dict[str, list[bytes]] = {}
    for case in load_cases():
        found = requests.setdefault(case.rpc, [])
        if case.request not in found:
            found.append(case.request)
    if method != BATCH:
        return tuple(requests.get(method, ()))
    applies = requests["Apply"]
    made = []
    for start, count, head in (
        (0, 1, (0, 0, 0, 0)),
        (5, 2, (0, 0, 0, 0)),
        (10, 8, (0, 0, 0, 0)),
        (20, 16, (4, 1, 0, 0)),
        (40, 16, (0, 0, 0x46, 0)),
        (60, 3, (0, 0, 0, HUGE + 1)),
        (70, 4, (0, 0, 0, HUGE + 14)),
        (80, fuzz.MAX_ITEMS, (0, 0, 0, 0)),
        (150, fuzz.MAX_ITEMS + 1, (0, 0, 0, 0)),
        (220, 0, (0, 0, 0, 0)),
    ):
        items = (applies * 2)[start : start + count]
        made.append(encode_batch(batch.RequestWire(requests=items).SerializeToString(), *head))
    return tuple(made)


# ---- structure-aware mutations ----


@cache
def _pool() -> tuple[bytes, ...]:
    return tuple(fuzz.state_pool(4))


def mutate(method: str, data: bytes, rnd: random.Random, max_size: int) -> bytes | None:
    """A change of the input's structure (None: it has none to change, or the change would not
    fit in `max_size`): its state, action, fields or, for a batch, its header and items."""
    body, _, _ = decode(method, data)
    if method == BATCH:
        changed = _mutate_batch(data[:HEADER].ljust(HEADER, b"\0"), body, rnd)
    else:
        changed = _mutate_request(method, body, rnd)
    return changed if changed is not None and len(changed) <= max_size else None


def _mutate_request(method: str, body: bytes, rnd: random.Random) -> bytes | None:
    request_type = methods()[method][0]
    try:
        request: Any = request_type.FromString(body)
    except Exception:
        return None
    change = MUTATIONS.get(method)  # an RPC without one is mutated byte by byte alone
    if change is None:
        return None
    if rnd.random() < 0.01:  # about the request bound: at, under or past it
        return padded(body, ITEM_BOUND + rnd.choice(DELTAS))
    change(request, rnd)
    return bytes(request.SerializeToString())


def _with_state(request: Any, rnd: random.Random) -> pb.State:
    """The request's state to change: its own, or one of the pool's."""
    if rnd.random() < 0.15 or not request.HasField("state"):
        request.state.CopyFrom(pb.State.FromString(rnd.choice(_pool())))
        request.ClearField("signed_state")
    state: pb.State = request.state
    return state


def _apply(request: pb.ApplyRequest, rnd: random.Random) -> None:
    roll = rnd.random()
    state = _with_state(request, rnd)
    if roll < 0.3 and state.status == pb.STATUS_IN_PROGRESS:
        try:
            request.CopyFrom(fuzz.legal_apply(rnd, state))
        except Exception:  # an inconsistent state has no legal action: change the state
            fuzz.mutate(state, rnd)
    elif roll < 0.6:
        fuzz.mutate(state, rnd)
    elif roll < 0.9:
        request.action.CopyFrom(fuzz.random_action_message(rnd, state))
    elif request.HasField("expected_seq"):
        request.ClearField("expected_seq")
    else:
        request.expected_seq = rnd.choice((state.seq, fuzz.number(rnd, False)))


def _stateful(request: Any, rnd: random.Random) -> None:
    state = _with_state(request, rnd)
    fields = request.DESCRIPTOR.fields_by_name
    roll = rnd.random()
    if roll < 0.6:
        fuzz.mutate(state, rnd)
    elif "seat" in fields and roll < 0.75:
        request.seat = rnd.choice((0, 1, state.to_move, fuzz.number(rnd, True)))
    elif "spectator" in fields and roll < 0.85:
        request.spectator = not request.spectator
    elif "level" in fields and roll < 0.85:
        request.level = rnd.choice((0, 1, 2, 3, fuzz.number(rnd, True)))
    elif "budget" in fields and roll < 0.95:
        request.budget.deals = rnd.choice((0, 1, 8, 64, 65, fuzz.number(rnd, False)))
        request.budget.nodes = rnd.choice((0, 1, 100, 20_000, 20_001, fuzz.number(rnd, False)))
    elif "bot_seed" in fields:
        request.bot_seed = rnd.randbytes(rnd.choice((0, 8, 64, 65)))


def _new_match(request: pb.NewMatchRequest, rnd: random.Random) -> None:
    if rnd.random() < 0.5:
        request.seed = rnd.choice((b"", rnd.randbytes(rnd.randint(1, 80))))
    else:
        del request.labels[:]
        request.labels.extend(fuzz.any_text(rnd) for _ in range(rnd.choice((0, 1, 2, 2, 3))))


def _replay(request: pb.ReplayRequest, rnd: random.Random) -> None:
    roll = rnd.random()
    if roll < 0.5:
        state = pb.State.FromString(rnd.choice(_pool()))
        request.actions.append(fuzz.random_action_message(rnd, state))
    elif roll < 0.7 and request.actions:
        del request.actions[rnd.randrange(len(request.actions))]
    elif roll < 0.85:
        request.seed = rnd.choice((b"", b"seed", rnd.randbytes(rnd.randint(1, 80))))
    else:
        request.labels.append(fuzz.any_text(rnd))


MUTATIONS: dict[str, Callable[[Any, random.Random], None]] = {
    "NewMatch": _new_match,
    "Apply": _apply,
    "LegalMoves": _stateful,
    "PlayerView": _stateful,
    "Replay": _replay,
    "SuggestMove": _stateful,
}


def _mutate_batch(head: bytes, body: bytes, rnd: random.Random) -> bytes | None:
    try:
        items = list(batch.RequestWire.FromString(body).requests)
    except Exception:
        return None
    roll = rnd.random()
    header = bytearray(head)
    if roll < 0.15:
        header[rnd.randrange(HEADER - 1)] = rnd.randrange(256)
    elif roll < 0.4:
        at = rnd.randint(0, len(items))
        items[at:at] = fuzz.batch_items(rnd, _pool())
    elif roll < 0.5 and items:
        del items[rnd.randrange(len(items))]
    elif roll < 0.75 and items:
        at = rnd.randrange(len(items))
        items[at] = _mutate_request("Apply", items[at], rnd) or fuzz.flipped(rnd, items[at])
    elif roll < 0.85 and items:
        # To the item bound, just under or just past it.
        wanted = fuzz.MAX_ITEMS + rnd.choice((-1, 0, 1))
        items = (items * (wanted // len(items) + 1))[:wanted]
    elif roll < 0.95 and items:
        items.insert(rnd.randint(0, len(items)), rnd.choice(items))
    elif roll < 0.97:
        header[3] = rnd.choice((0, HUGE + rnd.randrange(15)))
    else:
        items = []
    return bytes(header) + bytes(batch.RequestWire(requests=items).SerializeToString())


# ---- replay ----


def corpus_inputs(method: str, directories: Sequence[Path]) -> Iterator[tuple[str, bytes]]:
    """Every input of `method` in the directories' <method>/ subdirectories: (name, bytes)."""
    for directory in directories:
        folder = directory / method
        if folder.is_dir():
            for path in sorted(folder.iterdir()):
                if path.is_file():
                    yield str(path), path.read_bytes()


def replay(directories: Sequence[Path]) -> tuple[Counter[str], list[str]]:
    """Run every seed and every input of the directories; return the inputs per RPC and the
    unexpected outcomes (each with the input's name)."""
    worker = Worker()
    counts: Counter[str] = Counter()
    found: list[str] = []
    for method in methods():
        inputs = [(f"seed {n}", data) for n, data in enumerate(seeds(method))]
        for name, data in [*inputs, *corpus_inputs(method, directories)]:
            counts[method] += 1
            found += [f"{method} {name}: {problem}" for problem in run_input(worker, method, data)]
    return counts, found


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: replay the seeds and corpus directories; 1 on any unexpected outcome."""
    parser = argparse.ArgumentParser(prog="python -m testkit.fuzz_inputs")
    parser.add_argument("directories", nargs="*", type=Path, default=[CORPUS])
    args = parser.parse_args(argv)
    counts, found = replay(args.directories)
    print(json.dumps({"inputs": dict(counts), "unexpected": len(found), "samples": found[:20]}))
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
