"""Generate the ghz data files (deploy/ghz/data/*.json) from simulated games.

Each file is a JSON array of requests in protobuf JSON (field names as in the .proto); ghz and
`basra-rules load` send them in turn, one per call. States are sampled from whole matches
played with random legal choices, at every point of a hand and in later hands too, so the load
looks like a real gateway's traffic. The output is deterministic: rerun it after a change to
the engine or the proto, and tests/load checks that the committed files are current. The
benchmarks read the same files (`read`) for their realistic requests.

    .venv/bin/python -m testkit.ghz_data            # rewrite the files
    .venv/bin/python -m testkit.ghz_data --check    # exit 1 if they are stale
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from basra.v1 import rules_pb2 as pb
from google.protobuf import json_format
from google.protobuf.message import Message

from engine import Action, State
from testkit.actions import action_to_proto, play_match
from testkit.messages import state_to_proto

ROOT = Path(__file__).resolve().parent.parent
DATA_DIR = ROOT / "deploy" / "ghz" / "data"
MATCHES = 6
REQUESTS_PER_FILE = 120
NEW_MATCH_REQUESTS = 16
# BatchApply: batches of this many Apply requests (a size a busy gateway reaches), this many.
BATCH_ITEMS = 16
BATCHES = 8
RANDOM_SEED = 20260601


M = TypeVar("M", bound=Message)


def read(name: str, kind: type[M]) -> list[M]:
    """The requests of one committed data file (`apply.json`, ...) as messages of `kind`."""
    items = json.loads((DATA_DIR / name).read_text(encoding="utf-8"))
    return [json_format.ParseDict(item, kind()) for item in items]


@dataclass(frozen=True, slots=True)
class Sample:
    """A state met during a simulated match and the action a player took in it."""

    state: State
    action: Action


def samples(matches: int = MATCHES, seed: int = RANDOM_SEED) -> list[Sample]:
    """Return every (state, action) of several simulated matches."""
    rnd = random.Random(seed)
    found: list[Sample] = []
    for number in range(matches):
        played = play_match(f"ghz-data-{number}".encode(), rnd, labels=("north", "south"))
        found.extend(map(Sample, played.states, played.actions))
    return found


def spread(items: list[Sample], count: int, rnd: random.Random) -> list[Sample]:
    """Choose `count` samples spread evenly over the matches, in a shuffled order."""
    step = len(items) / count
    chosen = [items[int(i * step)] for i in range(count)]
    rnd.shuffle(chosen)
    return chosen


def as_json(message: Message) -> dict[str, Any]:
    """Return a request as protobuf JSON with the .proto's own field names."""
    return json_format.MessageToDict(message, preserving_proto_field_name=True)


def render(items: list[dict[str, Any]]) -> str:
    """Format requests as a JSON array with one request per line (readable diffs)."""
    lines = ",\n".join(json.dumps(item, separators=(",", ":"), sort_keys=True) for item in items)
    return f"[\n{lines}\n]\n"


def render_all() -> dict[str, str]:
    """Return the text of every data file, by file name."""
    rnd = random.Random(RANDOM_SEED + 1)
    found = samples()
    apply_requests = [
        as_json(
            pb.ApplyRequest(
                state=state_to_proto(s.state),
                action=action_to_proto(s.action),
                expected_seq=s.state.seq,
            )
        )
        for s in spread(found, REQUESTS_PER_FILE, rnd)
    ]
    legal_requests = [
        as_json(pb.LegalMovesRequest(state=state_to_proto(s.state)))
        for s in spread(found, REQUESTS_PER_FILE, rnd)
    ]
    # The bot at the server's default level (STRONG) and budget: the costliest call a lobby
    # makes, for a seat that timed out or a hint.
    suggest_requests = [
        as_json(pb.SuggestMoveRequest(state=state_to_proto(s.state), seat=s.state.to_move))
        for s in spread(found, REQUESTS_PER_FILE, rnd)
    ]
    new_match_requests = [
        as_json(pb.NewMatchRequest(seed=f"ghz-new-{i}".encode(), labels=["north", "south"]))
        for i in range(NEW_MATCH_REQUESTS)
    ]
    # Drawn last, so that the other files stay as they were before this one existed.
    batched = [
        pb.ApplyRequest(
            state=state_to_proto(s.state),
            action=action_to_proto(s.action),
            expected_seq=s.state.seq,
        )
        for s in spread(found, BATCH_ITEMS * BATCHES, rnd)
    ]
    batch_requests = [
        as_json(pb.BatchApplyRequest(requests=batched[start : start + BATCH_ITEMS]))
        for start in range(0, len(batched), BATCH_ITEMS)
    ]
    return {
        "apply.json": render(apply_requests),
        "batch_apply.json": render(batch_requests),
        "legal_moves.json": render(legal_requests),
        "new_match.json": render(new_match_requests),
        "suggest_move.json": render(suggest_requests),
    }


def main(argv: list[str] | None = None) -> int:
    """Write the data files, or with --check report whether the committed ones are current."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare, do not write")
    parser.add_argument("--out", type=Path, default=DATA_DIR, help="output folder")
    args = parser.parse_args(argv)
    stale = []
    for name, text in render_all().items():
        path = args.out / name
        if args.check:
            if not path.exists() or path.read_text(encoding="utf-8") != text:
                stale.append(name)
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        print(f"wrote {path} ({len(text)} bytes)")
    if stale:
        print(f"stale: {', '.join(stale)}; run python -m testkit.ghz_data", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
