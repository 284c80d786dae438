"""Fuzzing the handlers in process, at scale: raw bytes, mutated valid states, random actions.

Every request goes through the server's request reader and `respond`, exactly as a worker
runs it, and must end as an answer or as a refusal with an allowed code, one ErrorInfo and a
known reason; never INTERNAL (which would mean an exception nobody anticipated).
Every answer must parse as its type, and an answer of Apply, LegalMoves or PlayerView must
read back as what the engine says of the same request (read_back: the state through the
service's request reader, the events through clients.messages.event_from_proto, the cards
of the moves and views); legal actions on valid states must be answered. The test
command runs a few thousand requests (tests/fuzz/test_fuzz_in_process.py); long runs:

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
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
from basra.v1 import rules_pb2 as pb
from google.protobuf.message import Message

import engine
from clients.messages import event_from_proto
from service import errors, reading, writing
from service.config import Config
from service.errors import Failure, Refusal
from service.outcomes import Facts
from service.server import make_handlers
from service.servicer import METHODS, RulesServicer, respond
from testkit.actions import action_to_proto, play_match, random_action
from testkit.registered import method_handlers, request_reader
from wire.actions import action_from_proto

# The codes a refusal may end with, written out by hand (not read from service.errors) so
# that both fuzzers would catch a reason mapped to the wrong code.
ALLOWED = {
    grpc.StatusCode.INVALID_ARGUMENT,
    grpc.StatusCode.FAILED_PRECONDITION,
    grpc.StatusCode.ABORTED,
    grpc.StatusCode.UNAUTHENTICATED,
    grpc.StatusCode.RESOURCE_EXHAUSTED,
}
KNOWN = frozenset(errors.known_reasons())
CODES = [engine.code(c) for c in range(52)]
TRICKY = ["", "AC", "10D", "1D", "0C", "11S", "ac", " KS", "JS\0", "🂡", "10DD", "x" * 70]
ZONES = ("deck", "floor", "unclaimed", "hand0", "hand1", "captured0", "captured1")
MAX_SAMPLES = 20


def _pool(matches: int) -> list[bytes]:
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


def _number(rnd: random.Random, signed: bool) -> int:
    """A small value most of the time, sometimes anything of the field's type."""
    if rnd.random() < 0.7:
        return rnd.randint(-3 if signed else 0, 200)
    return rnd.randint(-(2**31), 2**31 - 1) if signed else rnd.randint(0, 2**32 - 1)


def _text(rnd: random.Random) -> str:
    if rnd.random() < 0.5:
        return rnd.choice(TRICKY)
    return "".join(chr(rnd.randint(1, 0x2FFF)) for _ in range(rnd.randint(0, 20)))


def mutate(message: pb.State, rnd: random.Random) -> None:
    """One change to a state: a field, a card zone, the seats or the seed."""
    kind = rnd.choice(("scalar", "optional", "status", "seat", "label", "zone", "seats", "seed"))
    if kind == "scalar":
        setattr(message, rnd.choice(("seq", "hand_number", "carry")), _number(rnd, False))
    elif kind == "optional":
        name = rnd.choice(("to_move", "winner", "last_capturer", "dealer"))
        if name != "dealer" and rnd.random() < 0.3:
            message.ClearField(name)
        else:
            setattr(message, name, _number(rnd, True))
    elif kind == "status":
        message.status = rnd.choice((-1, 0, 1, 2, 3, _number(rnd, True)))  # type: ignore[assignment]
    elif kind in ("seat", "label") and len(message.seats) > 0:
        seat = message.seats[rnd.randrange(len(message.seats))]
        if kind == "label":
            seat.label = _text(rnd)
        else:
            setattr(seat, rnd.choice(("basras", "total")), _number(rnd, False))
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
    text = rnd.choice(CODES) if rnd.random() < 0.6 else _text(rnd)
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
        action.seat = rnd.choice((0, 1, 0, 1, _number(rnd, True)))
    held = [c for s in state.seats for c in s.hand]
    action.card = rnd.choice(held) if held and rnd.random() < 0.7 else rnd.choice(CODES + TRICKY)
    choice = rnd.choice(("none", "plan_id", "capture", "trail"))
    if choice == "plan_id":
        action.plan_id = rnd.choice((0, 1, 1, 2, 3, 13, _number(rnd, False)))
    elif choice == "capture":
        floor = list(state.floor)
        picks = [rnd.choice(floor) if floor and rnd.random() < 0.8 else rnd.choice(CODES)]
        action.capture.cards.extend(picks * rnd.randint(0, 4))
    elif choice == "trail":
        action.trail = rnd.random() < 0.8
    return action


@dataclass
class Run:
    """The handlers and the tally of one fuzzing run."""

    requests: int = 0
    outcomes: Counter[str] = field(default_factory=Counter)
    reasons: Counter[str] = field(default_factory=Counter)
    unexpected: list[str] = field(default_factory=list)
    unexpected_count: int = 0

    def __post_init__(self) -> None:
        self.handlers = make_handlers(Config(), None)
        # The request readers a worker's server registers (never raising, size-limited).
        registered = method_handlers(RulesServicer(self.handlers), Config().max_message_bytes)
        self.readers = {rpc: request_reader(registered[rpc]) for rpc in METHODS}
        self.methods: dict[str, Callable[[Any, Facts], bytes]] = {
            "NewMatch": self.handlers.new_match,
            "Apply": self.handlers.apply,
            "LegalMoves": self.handlers.legal_moves,
            "PlayerView": self.handlers.player_view,
            "Replay": self.handlers.replay,
            "SuggestMove": self.handlers.suggest_move,
        }

    def finding(self, text: str) -> None:
        """Record an unexpected outcome."""
        self.unexpected_count += 1
        if len(self.unexpected) < MAX_SAMPLES:
            self.unexpected.append(text)

    def send(self, rpc: str, data: bytes, must_answer: bool = False) -> None:
        """Run one request as a worker does; check the outcome against the rules above."""
        self.requests += 1
        try:
            answer = respond(self.methods[rpc], self.readers[rpc](data), Facts())
        except Exception as error:  # respond lets nothing out; anything is a finding
            self.finding(f"{rpc} raised {type(error).__name__}: {data.hex()}")
            return
        if isinstance(answer, Failure):
            self.outcomes[f"{rpc} INTERNAL"] += 1
            self.finding(f"{rpc} failed INTERNAL ({type(answer.error).__name__}): {data.hex()}")
            return
        if isinstance(answer, Refusal):
            refusal = answer
            self.outcomes[f"{rpc} {refusal.code.name}"] += 1
            self.reasons[refusal.reason] += 1
            status = refusal.status()
            if refusal.code not in ALLOWED or refusal.reason not in KNOWN or must_answer:
                self.finding(f"{rpc} refused {refusal.reason} ({refusal.message}): {data.hex()}")
            elif status.code is not refusal.code:
                self.finding(f"{rpc} status {status.code} for {refusal.code}: {data.hex()}")
            return
        self.outcomes[f"{rpc} OK"] += 1
        try:
            wrong = read_back(rpc, METHODS[rpc][0].FromString(data), answer)
        except Exception as error:
            self.finding(f"{rpc} answer not read back ({error!r}): {data.hex()}")
            return
        if wrong:
            self.finding(f"{rpc} answer reads back another {wrong}: {data.hex()}")


def read_back(rpc: str, request: Any, answer: bytes) -> str:
    """What of an answer differs from the engine's own values for the same request ("" for
    nothing); every answer must parse as its type."""
    response: Any = METHODS[rpc][1].FromString(answer)
    if rpc not in ("Apply", "LegalMoves", "PlayerView"):
        return ""
    state = reading.state_from_proto(request.state)
    if rpc == "Apply":
        after, events = engine.apply(state, action_from_proto(request.action), check=False)
        shown = [[event_from_proto(e) for e in seat.events] for seat in response.seat_events]
        checks = {
            "state": reading.state_from_proto(response.state) == after,
            "events": [event_from_proto(e) for e in response.events] == list(events),
            "seat events": shown == [list(engine.seat_events(events, s)) for s in (0, 1)],
            "public events": [event_from_proto(e) for e in response.public_events]
            == list(engine.public_events(events)),
            "moves": _cards(response.legal_moves) == _hand_cards(after),
        }
    elif rpc == "LegalMoves":
        checks = {"moves": _cards(response.legal_moves) == _hand_cards(state)}
    elif request.spectator:
        public = engine.public_view(state)
        checks = {"floor": list(response.public_view.floor) == engine.codes(public.floor)}
    else:
        view = engine.seat_view(state, request.seat)
        checks = {
            "hand": list(response.view.hand) == engine.codes(view.hand),
            "floor": list(response.view.floor) == engine.codes(view.public.floor),
        }
    return ", ".join(name for name, same in checks.items() if not same)


def _cards(moves: pb.LegalMoves) -> list[str]:
    """The cards of a LegalMoves message, in order."""
    return [m.card for m in moves.moves]


def _hand_cards(state: engine.State) -> list[str]:
    """The codes of the hand to move (none once the match is over)."""
    return [] if state.to_move is None else engine.codes(state.hands[state.to_move])


def requests(rnd: random.Random, pool: Sequence[bytes]) -> tuple[str, bytes, bool]:
    """One request: (method, body, whether it must be answered)."""
    roll = rnd.random()
    state = pb.State.FromString(rnd.choice(pool))
    if roll < 0.15 and state.status == pb.STATUS_IN_PROGRESS:
        engine_state = reading.state_from_proto(state)
        action = action_to_proto(random_action(engine_state, rnd, any_spelling=True))
        request: Message = pb.ApplyRequest(state=state, action=action)
        if rnd.random() < 0.3:
            request.expected_seq = state.seq  # type: ignore[attr-defined]
        return "Apply", request.SerializeToString(), True
    for _ in range(rnd.choice((0, 1, 1, 1, 2, 3))):
        mutate(state, rnd)
    if roll < 0.45:
        request = pb.ApplyRequest(state=state, action=random_action_message(rnd, state))
        if rnd.random() < 0.2:
            request.expected_seq = rnd.choice((state.seq, _number(rnd, False)))
        return "Apply", request.SerializeToString(), False
    if roll < 0.6:
        return "LegalMoves", pb.LegalMovesRequest(state=state).SerializeToString(), False
    if roll < 0.75:
        view = pb.PlayerViewRequest(state=state)
        if rnd.random() < 0.95:
            view.seat = rnd.choice((0, 1, 0, 1, _number(rnd, True)))
        if rnd.random() < 0.25:
            view.spectator = True  # the public view or, with a seat, its refusal
        return "PlayerView", view.SerializeToString(), False
    if roll < 0.85:
        return rnd.choice(sorted(METHODS)), rnd.randbytes(rnd.randint(0, 600)), False
    if roll < 0.95:
        rpc = rnd.choice(sorted(METHODS))
        body = bytearray(_valid(rpc, state, rnd))
        for _ in range(rnd.randint(1, 3)):
            if body:
                body[rnd.randrange(len(body))] = rnd.randrange(256)
        return rpc, bytes(body), False
    if rnd.random() < 0.5:
        labels = [_text(rnd) for _ in range(rnd.choice((0, 1, 2, 2, 3)))]
        seed = rnd.choice((state.seed, rnd.randbytes(rnd.randint(0, 80))))
        return "NewMatch", pb.NewMatchRequest(seed=seed, labels=labels).SerializeToString(), False
    replay = pb.ReplayRequest(seed=rnd.choice((state.seed, rnd.randbytes(rnd.randint(0, 40)))))
    replay.actions.extend(random_action_message(rnd, state) for _ in range(rnd.randint(0, 8)))
    return "Replay", replay.SerializeToString(), False


def _valid(rpc: str, state: pb.State, rnd: random.Random) -> bytes:
    """A well-formed request of `rpc` on `state`, to damage."""
    action = random_action_message(rnd, state)
    made: dict[str, Message] = {
        "NewMatch": pb.NewMatchRequest(seed=state.seed or b"seed", labels=["a", "b"]),
        "Apply": pb.ApplyRequest(state=state, action=action),
        "LegalMoves": pb.LegalMovesRequest(state=state),
        "PlayerView": pb.PlayerViewRequest(state=state, seat=1),
        "Replay": pb.ReplayRequest(seed=state.seed, actions=[action]),
        "SuggestMove": pb.SuggestMoveRequest(
            state=state, seat=state.to_move, level=pb.BOT_LEVEL_GREEDY, bot_seed=b"fuzz"
        ),
    }
    return made[rpc].SerializeToString()


def fuzz(count: int, seed: int = 0, matches: int = 12) -> Run:
    """Send `count` requests made from `seed`; return the run's tally."""
    rnd = random.Random(seed)
    pool = _pool(matches)
    run = Run()
    for _ in range(count):
        run.send(*requests(rnd, pool))
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
