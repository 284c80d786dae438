"""`basra-rules verify`: check that a finished match was dealt honestly, from a JSON record.

The record is what a player can keep, written in the protobuf JSON mapping (bytes as base64,
field names in lowerCamelCase), so the final PlayerView's fields can be copied as they are:

    {
      "seed": "<base64>",              PlayerView.seed, revealed once the match is over
      "seedCommitment": "<base64>",    PlayerView.seed_commitment, shown from the start
      "actions": [{"seat": 0, "card": "7D", "planId": 1}, ...],       basra.v1.Action
      "seat": 0,                       the seat whose events follow (optional)
      "events": [{"cardsDealt": {"seat": 0, "cards": ["AC", ...]}}, ...]   basra.v1.Event
    }

"actions" may be left out when "events" holds everything the seat received (its
`seat_events`, in order): plays are public, so the actions are read from them. The check is
engine.fairness.verify; the exit status is 0 for an honest match, 1 when a discrepancy is
found and 2 when the record cannot be used.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import json
import sys
from collections.abc import Sequence
from typing import Any, TextIO

from basra.v1 import rules_pb2 as pb
from google.protobuf import json_format

from clients.messages import event_from_proto
from engine import Action, Event, HiddenDeal, RuleError
from engine.fairness import Verdict, actions_from_events, verify
from wire.actions import action_from_proto

HONEST, DISHONEST, UNUSABLE = 0, 1, 2


class RecordError(ValueError):
    """The record cannot be read as a match record."""


def _bytes(record: dict[str, Any], key: str, override: str | None) -> bytes:
    """A bytes field: from its hex override when given, else base64 from the record."""
    try:
        if override is not None:
            return bytes.fromhex(override)
        value = record.get(key)
        if not isinstance(value, str):
            raise RecordError(f"the record has no {key!r} (base64)")
        return base64.b64decode(value, validate=True)
    except (ValueError, binascii.Error) as error:
        raise RecordError(f"{key!r} is not readable: {error}") from None


# The kinds of event the check reads: deals, and the plays the actions are read from.
_READ = frozenset(
    {
        "hand_started",
        "cards_dealt",
        "hidden_deal",
        "floor_fixed",
        "card_played",
        "captured",
        "trailed",
    }
)


def _messages(record: dict[str, Any], key: str, kind: type[Any]) -> list[Any]:
    items = record.get(key, [])
    if not isinstance(items, list):
        raise RecordError(f"{key!r} must be a list")
    try:
        return [json_format.ParseDict(item, kind()) for item in items]
    except json_format.ParseError as error:
        raise RecordError(
            f"{key!r} holds an entry that is not a {kind.__name__}: {error}"
        ) from None


def check_record(
    record: dict[str, Any], seed_hex: str | None = None, commitment_hex: str | None = None
) -> Verdict:
    """Run the fairness check on a parsed record; refuse an unusable one with RecordError."""
    if not isinstance(record, dict):
        raise RecordError("the record must be a JSON object")
    seed = _bytes(record, "seed", seed_hex)
    commitment = _bytes(record, "seedCommitment", commitment_hex)
    seat = record.get("seat")
    if seat is not None and seat not in (0, 1):
        raise RecordError("'seat' must be 0 or 1")
    try:
        observed: list[Event | HiddenDeal] | None = None
        if "events" in record:
            if seat is None:
                raise RecordError("'events' needs the 'seat' that received them")
            messages = _messages(record, "events", pb.Event)
            observed = [event_from_proto(m) for m in messages if m.WhichOneof("kind") in _READ]
        if "actions" in record:
            actions: Sequence[Action] = [
                action_from_proto(m) for m in _messages(record, "actions", pb.Action)
            ]
        elif observed is not None:
            actions = actions_from_events(observed)
        else:
            raise RecordError("the record has neither 'actions' nor 'events'")
    except RuleError as error:
        raise RecordError(error.message) from None
    return verify(seed, commitment, actions, observed=observed, seat=seat)


def describe(verdict: Verdict, seat: int | None) -> str:
    """A readable account of a verdict."""
    found = verdict.discrepancy
    state = "match over" if verdict.match_over else "match not over"
    lines = [
        "honest: the seed matches its commitment and every deal follows from it"
        if found is None
        else f"NOT HONEST: {found.finding.value}: {found.message}",
        f"actions replayed: {verdict.actions_applied} ({state})",
        f"hands: {verdict.hands}, deals checked: {verdict.deals_checked}, "
        f"floor fixes checked: {verdict.fixes_checked}",
    ]
    if seat is not None:
        lines.append(f"deal events seat {seat} received that match: {verdict.observed_checked}")
    return "\n".join(lines)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of `verify`."""
    parser.add_argument("record", help="JSON match record ('-' for standard input)")
    parser.add_argument("--seed", dest="seed_hex", help="the seed in hex (overrides the record)")
    parser.add_argument(
        "--commitment", dest="commitment_hex", help="the commitment in hex (overrides the record)"
    )


def run(args: argparse.Namespace, stdin: TextIO | None = None, out: TextIO | None = None) -> int:
    """Check the record named by `args`; print the verdict; return the exit status."""
    out = out or sys.stdout
    try:
        if args.record == "-":
            record = json.load(stdin or sys.stdin)
        else:
            with open(args.record) as source:
                record = json.load(source)
        verdict = check_record(record, args.seed_hex, args.commitment_hex)
    except (OSError, json.JSONDecodeError, RecordError) as error:
        print(f"basra-rules verify: {error}", file=sys.stderr)
        return UNUSABLE
    print(describe(verdict, record.get("seat")), file=out)
    return HONEST if verdict.honest else DISHONEST


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of `python -m clients.verify`."""
    parser = argparse.ArgumentParser(prog="basra-rules verify", description=__doc__.split("\n")[0])
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
