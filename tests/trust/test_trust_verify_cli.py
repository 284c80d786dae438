"""`basra-rules verify` on match records a player keeps: honest ones pass, altered ones do not."""

from __future__ import annotations

import argparse
import copy
import io
import json
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from basra.v1 import rules_pb2 as pb
from google.protobuf import json_format

from clients import verify
from service import reading
from service.handlers import Handlers
from service.outcomes import Facts
from testkit.actions import action_to_proto, random_action

REPO = Path(__file__).resolve().parents[2]


def _record(seat: int, with_actions: bool) -> dict[str, Any]:
    """Play a whole match through the handlers; keep what `seat`'s player receives."""
    handlers = Handlers()
    rnd = random.Random(seat)
    result: pb.NewMatchResponse | pb.ApplyResponse
    result = pb.NewMatchResponse.FromString(
        handlers.new_match(pb.NewMatchRequest(seed=b"a record to verify"), Facts())
    )
    events = list(result.seat_events[seat].events)
    actions = []
    while result.legal_moves.HasField("seat"):
        action = action_to_proto(random_action(reading.state_from_proto(result.state), rnd))
        result = pb.ApplyResponse.FromString(
            handlers.apply(pb.ApplyRequest(state=result.state, action=action), Facts())
        )
        events.extend(result.seat_events[seat].events)
        actions.append(action)
    request = pb.PlayerViewRequest(state=result.state, seat=seat)
    view = pb.PlayerViewResponse.FromString(handlers.player_view(request, Facts())).view
    record = json_format.MessageToDict(view)
    kept = {"seed": record["seed"], "seedCommitment": record["seedCommitment"], "seat": seat}
    kept["events"] = [json_format.MessageToDict(e) for e in events]
    if with_actions:
        kept["actions"] = [json_format.MessageToDict(a) for a in actions]
    return kept


@pytest.fixture(scope="module")
def record() -> dict[str, Any]:
    """Seat 1's record of a whole match, with the action list."""
    return _record(1, with_actions=True)


def _run(record: dict[str, Any], *flags: str) -> tuple[int, str]:
    out = io.StringIO()
    parser = argparse.ArgumentParser()
    verify.add_arguments(parser)
    args = parser.parse_args(["-", *flags])
    code = verify.run(args, stdin=io.StringIO(json.dumps(record)), out=out)
    return code, out.getvalue()


def test_an_honest_record_passes(record: dict[str, Any]) -> None:
    code, text = _run(record)
    assert code == verify.HONEST, text
    assert text.startswith("honest")
    assert "match over" in text and "match not over" not in text


def test_a_record_of_events_alone_is_enough() -> None:
    """A player who kept only what it received can check the match."""
    code, text = _run(_record(0, with_actions=False))
    assert code == verify.HONEST, text


def test_a_changed_dealt_card_is_caught(record: dict[str, Any]) -> None:
    forged = copy.deepcopy(record)
    dealt = [e for e in forged["events"] if "cardsDealt" in e and e["cardsDealt"].get("seat") == 1]
    cards = dealt[2]["cardsDealt"]["cards"]
    cards[0], cards[1] = cards[1], cards[0]
    code, text = _run(forged)
    assert code == verify.DISHONEST
    assert "OBSERVED_MISMATCH" in text


def test_another_seed_than_the_committed_one_is_caught(record: dict[str, Any]) -> None:
    code, text = _run(record, "--seed", b"another seed".hex())
    assert code == verify.DISHONEST
    assert "COMMITMENT_MISMATCH" in text


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda r: r.pop("seed"), "no 'seed'"),
        (lambda r: r.update(seed="not base64!"), "'seed' is not readable"),
        (lambda r: r.update(seat=3), "'seat' must be 0 or 1"),
        (lambda r: r.pop("seat"), "needs the 'seat'"),
        (lambda r: r["actions"].append({"seat": 0, "card": "ZZ"}), "not a card code"),
        (lambda r: r["events"].append({"nonsense": 1}), "not a Event"),
    ],
)
def test_an_unusable_record_is_refused_plainly(
    record: dict[str, Any], change: Any, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = copy.deepcopy(record)
    change(broken)
    code, _ = _run(broken)
    assert code == verify.UNUSABLE
    assert message in capsys.readouterr().err


def test_the_module_runs_as_a_command(record: dict[str, Any], tmp_path: Path) -> None:
    path = tmp_path / "record.json"
    path.write_text(json.dumps(record))
    done = subprocess.run(
        [sys.executable, "-m", "clients.verify", str(path)],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
        check=False,
    )
    assert done.returncode == verify.HONEST, done.stderr
    assert "deal events seat 1 received that match" in done.stdout
