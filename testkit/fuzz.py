"""Fuzzing the handlers in process, at scale: raw bytes, mutated valid states, random actions,
batches.

Every request goes through the handler the server registers for its RPC, exactly as a worker
runs it, every RPC of the contract (BatchApply included), and its outcome is held to the rules
of testkit.fuzz_calls: an answer that parses, fits and reads back as what the engine says of
the same request, from a state the engine accepts, or a refusal with an allowed code, one
ErrorInfo and a known reason; never INTERNAL (which would mean an exception nobody
anticipated); a batch item answered as the unary Apply of it. Legal actions on valid states
must be answered. Batches come with item counts at, under and over the bound, valid, mutated
and unparsable items mixed, two moves of one match, huge items, a deadline that runs out
part-way and an admission bound with little room left. The test command runs a few thousand
requests (tests/fuzz/test_fuzz_in_process.py); long runs:

    .venv/bin/python -m testkit.fuzz --requests 1000000 --report fuzz-in-process.json

It prints (and writes to --report) the requests per method and outcome, the refusals per
reason, and every unexpected outcome (up to a sample); it exits 1 if there was any.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from basra.v1 import rules_pb2 as pb
from google.protobuf.message import Message

import engine
from service import batch, reading, writing
from testkit.actions import action_to_proto, play_match, random_action
from testkit.fuzz_calls import BATCH, Context, Worker, check, item_outcome, reason
from testkit.rpcs import methods
from wire.actions import action_from_proto

CODES = [engine.code(c) for c in range(52)]
TRICKY = ["", "AC", "10D", "1D", "0C", "11S", "ac", " KS", "JS\0", "🂡", "10DD", "x" * 70]
ZONES = ("deck", "floor", "unclaimed", "hand0", "hand1", "captured0", "captured1")
MAX_SAMPLES = 20


def state_pool(matches: int) -> list[bytes]:
    """Encoded states of random whole matches, every one of them (the end included)."""
    rnd = random.Random(11)
    states: list[engine.State] = []
    for n in range(matches):
        states += play_match(f"fuzz-in-process-{n}".encode(), rnd).states
    return [writing.state_bytes(writing.state_fields(s)) for s in states]


def zone(message: pb.State, name: str) -> Any:
    """One card zone of a State message, by its name in ZONES."""
    if name.startswith("hand"):
        return message.seats[int(name[-1])].hand
    if name.startswith("captured"):
        return message.seats[int(name[-1])].captured
    return getattr(message, name)


def number(rnd: random.Random, signed: bool) -> int:
    """A small value most of the time, sometimes anything of the field's type."""
    if rnd.random() < 0.7:
        return rnd.randint(-3 if signed else 0, 200)
    return rnd.randint(-(2**31), 2**31 - 1) if signed else rnd.randint(0, 2**32 - 1)


def any_text(rnd: random.Random) -> str:
    """A tricky string or random characters."""
    if rnd.random() < 0.5:
        return rnd.choice(TRICKY)
    return "".join(chr(rnd.randint(1, 0x2FFF)) for _ in range(rnd.randint(0, 20)))


def mutate(message: pb.State, rnd: random.Random) -> None:
    """One change to a state: a field, a card zone, the seats or the seed."""
    kind = rnd.choice(("scalar", "optional", "status", "seat", "label", "zone", "seats", "seed"))
    if kind == "scalar":
        setattr(message, rnd.choice(("seq", "hand_number", "carry")), number(rnd, False))
    elif kind == "optional":
        name = rnd.choice(("to_move", "winner", "last_capturer", "dealer"))
        if name != "dealer" and rnd.random() < 0.3:
            message.ClearField(name)
        else:
            setattr(message, name, number(rnd, True))
    elif kind == "status":
        message.status = rnd.choice((-1, 0, 1, 2, 3, number(rnd, True)))  # type: ignore[assignment]
    elif kind in ("seat", "label") and len(message.seats) > 0:
        seat = message.seats[rnd.randrange(len(message.seats))]
        if kind == "label":
            seat.label = any_text(rnd)
        else:
            setattr(seat, rnd.choice(("basras", "total")), number(rnd, False))
    elif kind == "seats":
        kept = list(message.seats)[: rnd.randint(0, 4)]
        del message.seats[:]
        message.seats.extend(kept + [pb.SeatState()] * rnd.randint(0, 4 - len(kept)))
    elif kind == "seed":
        message.seed = rnd.randbytes(rnd.randint(0, 80))
    elif len(message.seats) >= 2:
        _mutate_zone(message, rnd)


ZONE_OPS = ("duplicate", "drop", "move", "insert", "replace", "shuffle")


def _mutate_zone(message: pb.State, rnd: random.Random) -> None:
    cards, source = zone(message, rnd.choice(ZONES)), zone(message, rnd.choice(ZONES))
    text = rnd.choice(CODES) if rnd.random() < 0.6 else any_text(rnd)
    zone_op(cards, source, rnd.choice(ZONE_OPS), rnd.randint(0, 60), text=text, order=rnd)


def zone_op(
    cards: Any, source: Any, op: str, index: int, *, text: str, order: random.Random
) -> None:
    """Change the card zone `cards` (of a State message) by `op`, taking from `source`."""
    if op == "duplicate" and source:
        cards.append(source[index % len(source)])
    elif op == "drop" and cards:
        del cards[index % len(cards)]
    elif op == "move" and source:
        cards.append(source[index % len(source)])
        del source[index % len(source)]
    elif op == "insert":
        cards.insert(index, text)
    elif op == "replace" and cards:
        cards[index % len(cards)] = text
    elif op == "shuffle":
        shuffled = list(cards)
        order.shuffle(shuffled)
        del cards[:]
        cards.extend(shuffled)


def random_action_message(rnd: random.Random, state: pb.State) -> pb.Action:
    """An action of any shape; often a card of the state's hands."""
    action = pb.Action()
    if rnd.random() < 0.9:
        action.seat = rnd.choice((0, 1, 0, 1, number(rnd, True)))
    held = [c for s in state.seats for c in s.hand]
    action.card = rnd.choice(held) if held and rnd.random() < 0.7 else rnd.choice(CODES + TRICKY)
    choice = rnd.choice(("none", "plan_id", "capture", "trail"))
    if choice == "plan_id":
        action.plan_id = rnd.choice((0, 1, 1, 2, 3, 13, number(rnd, False)))
    elif choice == "capture":
        floor = list(state.floor)
        picks = [rnd.choice(floor) if floor and rnd.random() < 0.8 else rnd.choice(CODES)]
        action.capture.cards.extend(picks * rnd.randint(0, 4))
    elif choice == "trail":
        action.trail = rnd.random() < 0.8
    return action


@dataclass(frozen=True, slots=True)
class Request:
    """One fuzzed call: its method and body, and how it is made."""

    method: str
    body: bytes
    must_answer: bool = False
    deadline: tuple[float, float] | None = None
    """The call's seconds left at its start and how many fewer at each asking (None: none)."""
    admission: tuple[int, int] = (0, 0)
    """The worker's admission bound and the calls it holds besides this one."""


@dataclass
class Run:
    """The worker and the tally of one fuzzing run."""

    requests: int = 0
    outcomes: Counter[str] = field(default_factory=Counter)
    reasons: Counter[str] = field(default_factory=Counter)
    unexpected: list[str] = field(default_factory=list)
    unexpected_count: int = 0
    worker: Worker = field(default_factory=Worker)

    def finding(self, text: str) -> None:
        """Record an unexpected outcome."""
        self.unexpected_count += 1
        if len(self.unexpected) < MAX_SAMPLES:
            self.unexpected.append(text)

    def send(self, request: Request) -> None:
        """Make one call as a worker does; check the outcome against the rules above."""
        self.requests += 1
        rpc, data = request.method, request.body
        context = Context(*request.deadline) if request.deadline else None
        ended, problems = check(self.worker, rpc, data, context, admission=request.admission)
        if ended is None:
            self.outcomes[f"{rpc} raised"] += 1
        elif ended.code.name != "OK":
            self.outcomes[f"{rpc} {ended.code.name}"] += 1
            self.reasons[reason(ended) or ended.code.name] += 1
            if request.must_answer:
                problems = [*problems, f"{rpc} refused {reason(ended)} a legal action"]
        else:
            self.outcomes[f"{rpc} OK"] += 1
            if rpc == BATCH:
                self._items(ended.body)
        for problem in problems:
            self.finding(f"{problem}: {rpc} {data.hex()[:4000]}")

    def _items(self, answer: bytes) -> None:
        for result in batch.ResponseWire.FromString(answer).results:
            item = item_outcome(result)
            self.outcomes[f"{BATCH} item {item.code.name}"] += 1
            if item.code.name != "OK":
                self.reasons[f"item {reason(item)}"] += 1


def requests(rnd: random.Random, pool: Sequence[bytes]) -> Request:
    """One request of any RPC of the contract."""
    roll = rnd.random()
    if roll < 0.1:
        return batch_request(rnd, pool)
    state = pb.State.FromString(rnd.choice(pool))
    if roll < 0.22 and state.status == pb.STATUS_IN_PROGRESS:
        return Request("Apply", legal_apply(rnd, state).SerializeToString(), True)
    for _ in range(rnd.choice((0, 1, 1, 1, 2, 3))):
        mutate(state, rnd)
    if roll < 0.45:
        return Request("Apply", mutated_apply(rnd, state).SerializeToString())
    if roll < 0.6:
        return Request("LegalMoves", pb.LegalMovesRequest(state=state).SerializeToString())
    if roll < 0.75:
        view = pb.PlayerViewRequest(state=state)
        if rnd.random() < 0.95:
            view.seat = rnd.choice((0, 1, 0, 1, number(rnd, True)))
        if rnd.random() < 0.25:
            view.spectator = True  # the public view or, with a seat, its refusal
        return Request("PlayerView", view.SerializeToString())
    rpcs = sorted(methods())
    if roll < 0.85:
        return Request(rnd.choice(rpcs), rnd.randbytes(rnd.randint(0, 600)))
    if roll < 0.95:
        rpc = rnd.choice(rpcs)
        return Request(rpc, flipped(rnd, valid(rpc, state, rnd)))
    if rnd.random() < 0.5:
        labels = [any_text(rnd) for _ in range(rnd.choice((0, 1, 2, 2, 3)))]
        seed = rnd.choice((state.seed, rnd.randbytes(rnd.randint(0, 80))))
        return Request("NewMatch", pb.NewMatchRequest(seed=seed, labels=labels).SerializeToString())
    replay = pb.ReplayRequest(seed=rnd.choice((state.seed, rnd.randbytes(rnd.randint(0, 40)))))
    replay.actions.extend(random_action_message(rnd, state) for _ in range(rnd.randint(0, 8)))
    return Request("Replay", replay.SerializeToString())


def legal_apply(rnd: random.Random, state: pb.State) -> pb.ApplyRequest:
    """An Apply of a legal action, in any spelling, on a valid state in progress."""
    engine_state = reading.state_from_proto(state)
    action = action_to_proto(random_action(engine_state, rnd, any_spelling=True))
    request = pb.ApplyRequest(state=state, action=action)
    if rnd.random() < 0.3:
        request.expected_seq = state.seq
    return request


def mutated_apply(rnd: random.Random, state: pb.State) -> pb.ApplyRequest:
    """An Apply of an action of any shape on `state` (mutated or not)."""
    request = pb.ApplyRequest(state=state, action=random_action_message(rnd, state))
    if rnd.random() < 0.2:
        request.expected_seq = rnd.choice((state.seq, number(rnd, False)))
    return request


def flipped(rnd: random.Random, body: bytes) -> bytes:
    """The bytes with one to three of them changed."""
    changed = bytearray(body)
    for _ in range(rnd.randint(1, 3)):
        if changed:
            changed[rnd.randrange(len(changed))] = rnd.randrange(256)
    return bytes(changed)


def valid(rpc: str, state: pb.State, rnd: random.Random) -> bytes:
    """A well-formed request of `rpc` on `state`, to damage."""
    action = random_action_message(rnd, state)
    apply = pb.ApplyRequest(state=state, action=action)
    made: dict[str, Message] = {
        "NewMatch": pb.NewMatchRequest(seed=state.seed or b"seed", labels=["a", "b"]),
        "Apply": apply,
        "LegalMoves": pb.LegalMovesRequest(state=state),
        "PlayerView": pb.PlayerViewRequest(state=state, seat=1),
        "Replay": pb.ReplayRequest(seed=state.seed, actions=[action]),
        "SuggestMove": pb.SuggestMoveRequest(
            state=state, seat=state.to_move, level=pb.BOT_LEVEL_GREEDY, bot_seed=b"fuzz"
        ),
        BATCH: pb.BatchApplyRequest(requests=[apply, apply]),
    }
    return made[rpc].SerializeToString()


# ---- batches ----

MAX_ITEMS = 64  # the default --max-batch-items (Worker() runs the defaults)
HUGE_ITEM = 1 << 20  # the default --max-message-bytes: huge items sit at and past it


def batch_request(rnd: random.Random, pool: Sequence[bytes]) -> Request:
    """A BatchApply call: item counts at, under and over the bound, items of every kind, a
    deadline that may run out part-way, an admission bound that may have little room."""
    small = rnd.choice((0, 1, 2, rnd.randint(3, 16), rnd.randint(3, 16)))
    count = rnd.choice((small, small, small, MAX_ITEMS - 1, MAX_ITEMS, MAX_ITEMS + 1, 90))
    items: list[bytes] = []
    while len(items) < count:
        items += batch_items(rnd, pool)
    items = items[:count]
    for _ in range(rnd.choice((0,) * 30 + (1, 1, 2, 5))):  # rare: each costs a parse of 1 MiB
        state = pb.State.FromString(rnd.choice(pool))
        items.insert(rnd.randint(0, len(items)), huge_item(rnd, state))
    body = batch.RequestWire(requests=items).SerializeToString()
    if rnd.random() < 0.05:
        body = flipped(rnd, body)
    deadline = None
    if rnd.random() < 0.2:
        seconds = rnd.choice((-1.0, 0.0, 0.001, 0.004, 0.01, 0.03, 0.1))
        deadline = (seconds, rnd.choice((0.0, 0.0005, 0.001, 0.004)))
    admission = (0, 0)
    if rnd.random() < 0.2:
        limit = rnd.randint(1, 80)
        admission = (limit, rnd.randint(0, limit - 1))
    return Request(BATCH, body, deadline=deadline, admission=admission)


def batch_items(rnd: random.Random, pool: Sequence[bytes]) -> list[bytes]:
    """One or two items of a batch: valid, mutated, unparsable, two moves of one match (or two
    moves on one state)."""
    state = pb.State.FromString(rnd.choice(pool))
    playing = state.status == pb.STATUS_IN_PROGRESS
    kind = rnd.random()
    if kind < 0.35 and playing:
        return [legal_apply(rnd, state).SerializeToString()]
    if kind < 0.45 and playing:
        return two_moves(rnd, state)
    if kind < 0.75:
        for _ in range(rnd.choice((0, 1, 1, 2))):
            mutate(state, rnd)
        return [mutated_apply(rnd, state).SerializeToString()]
    if kind < 0.85:
        return [flipped(rnd, valid("Apply", state, rnd))]
    if kind < 0.95:
        return [rnd.randbytes(rnd.randint(0, 200))]
    return [b""]  # an empty Apply: no state


def two_moves(rnd: random.Random, state: pb.State) -> list[bytes]:
    """Two Apply requests of one match: a move and the next one on its result (or two moves on
    the same state), in either order; each is answered on its own state."""
    first = legal_apply(rnd, state)
    engine_state = reading.state_from_proto(state)
    if rnd.random() < 0.3:
        second = legal_apply(rnd, state)
    else:
        after, _ = engine.apply(engine_state, action_from_proto(first.action))
        if after.status is not engine.Status.IN_PROGRESS:
            return [first.SerializeToString()]
        second = legal_apply(rnd, writing_state(after))
    pair = [first.SerializeToString(), second.SerializeToString()]
    rnd.shuffle(pair)
    return pair


def huge_item(rnd: random.Random, state: pb.State) -> bytes:
    """An Apply whose label makes it about --max-message-bytes long, at, under or past it."""
    request = pb.ApplyRequest(state=state, action=random_action_message(rnd, state))
    size = len(request.SerializeToString())
    target = HUGE_ITEM + rnd.choice((-1, 0, 1, -1000, 5000))
    if len(state.seats) > 0:
        state.seats[0].label = "x" * max(0, target - size - 4)
        request = pb.ApplyRequest(state=state, action=request.action)
    return request.SerializeToString()


def writing_state(state: engine.State) -> pb.State:
    """The State message of an engine state, as the service writes it."""
    return pb.State.FromString(writing.state_bytes(writing.state_fields(state)))


def fuzz(count: int, seed: int = 0, matches: int = 12) -> Run:
    """Send `count` requests made from `seed`; return the run's tally."""
    rnd = random.Random(seed)
    pool = state_pool(matches)
    run = Run()
    for _ in range(count):
        run.send(requests(rnd, pool))
    return run


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: fuzz, print the tally, write it to --report; 1 on any unexpected outcome."""
    parser = argparse.ArgumentParser(prog="python -m testkit.fuzz")
    parser.add_argument("--requests", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--report", type=Path, help="also write the tally as JSON here")
    args = parser.parse_args(argv)
    began = time.monotonic()
    run = fuzz(args.requests, args.seed)
    seconds = time.monotonic() - began
    report = {
        "requests": run.requests,
        "seconds": round(seconds, 1),
        "seed": args.seed,
        "outcomes": dict(sorted(run.outcomes.items())),
        "reasons": dict(sorted(run.reasons.items())),
        "unexpected": run.unexpected_count,
        "unexpected_samples": run.unexpected,
    }
    print(json.dumps(report, indent=1))
    if args.report:
        args.report.write_text(json.dumps(report, indent=1))
    return 1 if run.unexpected_count else 0


if __name__ == "__main__":
    sys.exit(main())
