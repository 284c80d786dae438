"""`basra-rules play`: the service's bots play a whole match against each other.

A demonstration client: it only speaks the public contract (NewMatch, then, for the seat to
move, SuggestMove at that seat's level and Apply of its action with expected_seq, until the
match is over, then PlayerView for the revealed seed) and prints what happens in plain words.
Each state goes back as it came: the signed_state when the server signs. It speaks plaintext,
TLS or mutual TLS (clients/channels.py).
With --record it also writes what seat 0's player keeps, the record that `basra-rules verify`
checks.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import random
import sys
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO

import grpc
from basra.v1 import rules_pb2 as pb
from basra.v1 import rules_pb2_grpc
from google.protobuf import json_format
from google.protobuf.message import Message

from clients import channels
from clients.refusals import reason_of
from wire.tls import TLSConfigError

# A match ends after a handful of hands (48 plays each); this only stops a runaway loop.
MAX_ACTIONS = 20_000

# The levels of --bots, as BotLevel values of the contract.
BOT_LEVEL_BY_NAME = {
    "random": pb.BOT_LEVEL_RANDOM,
    "greedy": pb.BOT_LEVEL_GREEDY,
    "strong": pb.BOT_LEVEL_STRONG,
}


def _cards(cards: Sequence[str]) -> str:
    return " ".join(cards) if cards else "-"


def describe(event: pb.Event, names: Sequence[str]) -> str | None:
    """Return one readable line for an event (None for events folded into another line)."""
    kind = event.WhichOneof("kind")
    if kind == "hand_started":
        e = event.hand_started
        return f"\n== Hand {e.hand_number}: {names[e.dealer]} deals"
    if kind == "cards_dealt":
        d = event.cards_dealt
        who = names[d.seat] if d.HasField("seat") else "floor"
        return f"   dealt to {who}: {_cards(d.cards)}"
    if kind == "floor_fixed":
        f = event.floor_fixed
        return f"   floor fixed: {_cards(f.returned)} back, {_cards(f.replacements)} dealt"
    if kind == "captured":
        c = event.captured
        return f"{names[c.seat]:>8} plays {c.card:>3} and takes {_cards(c.cards)}"
    if kind == "trailed":
        t = event.trailed
        return f"{names[t.seat]:>8} plays {t.card:>3} and trails it"
    if kind == "basra_scored":
        return f"{'':>8} BASRA for {names[event.basra_scored.seat]}!"
    if kind == "leftovers_awarded":
        left = event.leftovers_awarded
        who = names[left.seat] if left.HasField("seat") else "nobody"
        return f"   leftovers {_cards(left.cards)} go to {who}"
    if kind == "hand_scored":
        h = event.hand_scored
        parts = [
            f"{names[s]} {score.cards} cards, {score.hand_total} points "
            f"(total {score.running_total})"
            for s, score in enumerate(h.seats)
        ]
        carry = f"; carry {h.carry_after}" if h.carry_after else ""
        return f"-- Hand {h.hand_number} scored: " + " | ".join(parts) + carry
    if kind == "match_over":
        m = event.match_over
        return f"\n== {names[m.winner]} wins, {m.totals[0]} to {m.totals[1]}"
    return None  # card_played is shown with its capture or trail; hidden deals never appear


@dataclass
class Kept:
    """What one seat's player keeps of a match: the record `basra-rules verify` reads."""

    seat: int = 0
    commitment: bytes = b""
    """The seed commitment received with the first deal."""
    seed: bytes = b""
    """The seed, as revealed by the seat's PlayerView once the match is over."""
    events: list[pb.Event] = field(default_factory=list)
    actions: list[pb.Action] = field(default_factory=list)

    def json(self) -> str:
        """The record in the protobuf JSON mapping, one event or action per line."""

        def items(messages: Sequence[pb.Event] | Sequence[pb.Action]) -> str:
            return ",\n".join(
                "    " + json.dumps(json_format.MessageToDict(m), separators=(", ", ": "))
                for m in messages
            )

        return (
            "{\n"
            f'  "seed": "{base64.b64encode(self.seed).decode()}",\n'
            f'  "seedCommitment": "{base64.b64encode(self.commitment).decode()}",\n'
            f'  "seat": {self.seat},\n'
            f'  "events": [\n{items(self.events)}\n  ],\n'
            f'  "actions": [\n{items(self.actions)}\n  ]\n'
            "}\n"
        )


def play(
    stub: rules_pb2_grpc.RulesServiceStub,
    seed: bytes,
    names: tuple[str, str],
    out: TextIO,
    *,
    timeout: float,
    bots: tuple[pb.BotLevel, pb.BotLevel] = (pb.BOT_LEVEL_STRONG, pb.BOT_LEVEL_GREEDY),
    kept: Kept | None = None,
) -> pb.State:
    """Play one match to its end, printing each event; return the final state.

    Each seat's moves are the server's suggestions at that seat's level; with no bot seed,
    a suggestion follows from the position, so the same match seed replays the same match.
    At the end the seed is read back from a PlayerView and checked against the commitment
    received at the start; `kept` (seat 0's by default) collects the match record.
    """
    kept = kept if kept is not None else Kept()

    def call(method: Callable[..., Message], request: Message) -> Any:
        metadata = (("x-request-id", uuid.uuid4().hex),)
        return method(request, timeout=timeout, metadata=metadata)

    result = call(stub.NewMatch, pb.NewMatchRequest(seed=seed, labels=list(names)))
    kept.commitment = result.seed_commitment
    print(f"Seed commitment {result.seed_commitment.hex()}", file=out)
    for _ in range(MAX_ACTIONS):
        kept.events.extend(result.seat_events[kept.seat].events)
        for event in result.events:
            line = describe(event, names)
            if line is not None:
                print(line, file=out)
        state: pb.State = result.state
        carried = _carried(result)
        if state.status == pb.STATUS_OVER:
            _reveal(stub, carried, kept, out, timeout)
            return state
        seat = state.to_move
        asked = pb.SuggestMoveRequest(**carried, seat=seat, level=bots[seat])
        action = call(stub.SuggestMove, asked).action
        request = pb.ApplyRequest(**carried, action=action, expected_seq=state.seq)
        result = call(stub.Apply, request)
        kept.actions.append(action)
    raise RuntimeError(f"the match did not end within {MAX_ACTIONS} actions")


def _carried(result: pb.NewMatchResponse | pb.ApplyResponse) -> dict[str, Any]:
    """The state to send next, as the answer gave it: its signed_state when the server signs
    (sent back unchanged), else its plain state."""
    if result.HasField("signed_state"):
        return {"signed_state": result.signed_state}
    return {"state": result.state}


def _reveal(
    stub: rules_pb2_grpc.RulesServiceStub,
    carried: dict[str, Any],
    kept: Kept,
    out: TextIO,
    timeout: float,
) -> None:
    """Read the revealed seed from the seat's PlayerView and print it against the commitment."""
    request = pb.PlayerViewRequest(**carried, seat=kept.seat)
    kept.seed = stub.PlayerView(request, timeout=timeout).view.seed
    honest = hashlib.sha256(kept.seed).digest() == kept.commitment
    verdict = "is" if honest else "is NOT"
    print(f"Seed revealed {kept.seed.hex()}: its SHA-256 {verdict} the commitment above", file=out)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the flags of `play`."""
    parser.add_argument("--target", default="localhost:50051", help="server address")
    parser.add_argument("--seed", default=None, help="match seed in hex (default: random)")
    parser.add_argument(
        "--bots",
        nargs=2,
        default=("strong", "greedy"),
        type=str.lower,
        choices=tuple(BOT_LEVEL_BY_NAME),
        metavar="LEVEL",
        help="level of seat 0 and of seat 1: random, greedy or strong (default strong greedy)",
    )
    parser.add_argument(
        "--names", nargs=2, default=None, metavar="NAME", help="default: the levels' names"
    )
    parser.add_argument("--timeout", type=float, default=10.0, help="seconds per call")
    channels.add_arguments(parser)
    parser.add_argument(
        "--record",
        metavar="FILE",
        help="write seat 0's match record (JSON) for `basra-rules verify FILE`",
    )


def run(args: argparse.Namespace, out: TextIO = sys.stdout) -> int:
    """Play a match against --target; return the exit code."""
    try:
        seed = bytes.fromhex(args.seed) if args.seed else random.randbytes(16)
    except ValueError:
        print("--seed must be hexadecimal", file=sys.stderr)
        return 2
    names = args.names or [level.capitalize() for level in args.bots]
    if names[0] == names[1]:
        names = [f"{names[0]} {seat}" for seat in (0, 1)]
    bots = (BOT_LEVEL_BY_NAME[args.bots[0]], BOT_LEVEL_BY_NAME[args.bots[1]])
    try:
        channel = channels.channel(args.target, channels.from_args(args))
    except TLSConfigError as error:
        print(f"basra-rules play: {error}", file=sys.stderr)
        return 2
    with channel:
        stub = rules_pb2_grpc.RulesServiceStub(channel)  # type: ignore[no-untyped-call]
        kept = Kept()
        try:
            play(stub, seed, (names[0], names[1]), out, timeout=args.timeout, bots=bots, kept=kept)
        except grpc.RpcError as error:
            reason = reason_of(error)
            code = error.code().name + (f" {reason}" if reason else "")
            print(f"call failed: {code}: {error.details()}", file=sys.stderr)
            return 1
    if args.record:
        with open(args.record, "w") as record:
            record.write(kept.json())
    return 0
