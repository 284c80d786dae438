"""The PHP example lobby (examples/php/lobby.php) as the tests run it: Debian's php-cli with its
curl extension, the lobby's summary line, and each recorded match checked against the server
over gRPC (Replay gives the same end, seq advanced one a move, each seat's inbox honest)."""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from basra.v1 import rules_pb2 as pb
from basra.v1 import rules_pb2_grpc as rpc
from google.protobuf import json_format

from clients import channels
from clients.verify import check_record
from testkit.deployment import REPO

LOBBY = REPO / "examples" / "php" / "lobby.php"
PHP_SECONDS = 120.0


def php() -> str:
    """Debian's php-cli, with its curl extension loaded (with CI=true it must be there; else
    the test is skipped, saying why)."""
    found = shutil.which("php")
    ready = found is not None and (
        subprocess.run(
            [found, "-r", 'exit(extension_loaded("curl") ? 0 : 1);'], check=False, timeout=30
        ).returncode
        == 0
    )
    if not ready:
        if os.environ.get("CI") == "true":
            pytest.fail("CI=true, yet there is no php with its curl extension (php-cli, php-curl)")
        pytest.skip("no php with its curl extension here (Debian's php-cli and php-curl)")
    assert found is not None
    return found


def play(php: str, url: str, record: Path, *flags: str) -> dict[str, Any]:
    """Run the lobby; return its summary line (it must exit 0)."""
    done = subprocess.run(
        [php, str(LOBBY), "--gateway", url, "--record", str(record), *flags],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=PHP_SECONDS,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    summary: dict[str, Any] = json.loads(done.stdout)
    return summary


def check_matches(target: str, records: list[dict[str, Any]]) -> None:
    """Each recorded match, checked against the server over gRPC and by the fairness check."""
    with channels.channel(target) as channel:
        stub = rpc.RulesServiceStub(channel)  # type: ignore[no-untyped-call]
        for record in records:
            actions = [json_format.ParseDict(a, pb.Action()) for a in record["actions"]]
            final = json_format.ParseDict(record["state"], pb.State())
            # Every Apply advanced seq by one: no move was lost or applied twice.
            assert record["seqs"] == list(range(1, len(actions) + 1))
            assert final.seq == len(actions)
            replayed = stub.Replay(
                pb.ReplayRequest(
                    seed=base64.b64decode(record["seed"]),
                    actions=actions,
                    labels=["php-person", "php-bot"],
                ),
                timeout=30,
            )
            assert not replayed.HasField("refused_index")
            assert replayed.state == final
            assert final.status == pb.STATUS_OVER
            # The scores add up: the winner holds the higher total, as the last event says.
            over = replayed.events[-1].match_over
            assert list(over.totals) == record["totals"] == [s.total for s in final.seats]
            assert over.winner == final.winner == record["winner"]
            assert record["totals"][record["winner"]] > record["totals"][1 - record["winner"]]
            assert record["seedChecked"] is True
            for seat in (0, 1):
                # What each seat was sent: honest, and never a card dealt to the other seat.
                verdict = check_record({**record, "seat": seat, "events": record["inbox"][seat]})
                assert verdict.honest and verdict.match_over
                assert verdict.observed_checked > 0
                dealt = [e["cardsDealt"] for e in record["inbox"][seat] if "cardsDealt" in e]
                assert {d["seat"] for d in dealt if "seat" in d} == {seat}
