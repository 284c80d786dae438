"""The PHP lobby (examples/php) plays whole matches over HTTP/JSON, and its client keeps the
published retry policy and a deadline on every call.

The lobby runs with Debian's php-cli and php-curl (.ci/setup installs them as root): with
CI=true they must be there; elsewhere the tests are skipped and say why. The matches go
through the real gateway (testkit.http_gateway) in front of a real server; each outcome is
checked against the server itself, over gRPC: Replay of the recorded seed and actions gives
the same final state, `basra-rules verify` finds each seat's events honest, and every move
advanced seq by one. The retry policy is checked against a stand-in HTTP server whose
answers the test scripts.
"""

from __future__ import annotations

import base64
import json
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from basra.v1 import rules_pb2 as pb
from basra.v1 import rules_pb2_grpc as rpc
from google.protobuf import json_format

from clients import channels
from testkit import harness, php_lobby
from testkit.http_gateway import gateway
from testkit.ports import LOOPBACK

REPO = Path(__file__).resolve().parents[2]
CALL = Path(__file__).parent / "php" / "call.php"
SERVICE_CONFIG = REPO / "deploy" / "grpc-service-config.json"
# Room for php itself to start and stop around a call.
PHP_START_SECONDS = 1.0
MATCHES = 2


@pytest.fixture(scope="module")
def php() -> str:
    """Debian's php-cli, with its curl extension loaded."""
    return php_lobby.php()


def test_every_file_of_the_php_lobby_parses(php: str) -> None:
    """php -l: the example and the test's driver are valid PHP for Debian's php-cli."""
    files = [*sorted((REPO / "examples" / "php").glob("*.php")), CALL]
    assert len(files) >= 4
    for path in files:
        done = subprocess.run(
            [php, "-l", str(path)], capture_output=True, text=True, timeout=30, check=False
        )
        assert done.returncode == 0, done.stdout + done.stderr


def test_the_php_lobby_plays_whole_matches_over_http(php: str, tmp_path: Path) -> None:
    """Person against bot to the end, per-seat views, expectedSeq; a stale click is refused."""
    served = harness.start([])
    try:
        with gateway(served.target) as url:
            summary = php_lobby.play(php, url, tmp_path / "records.json", "--matches", str(MATCHES))
        records = json.loads((tmp_path / "records.json").read_text())
        assert summary["finished"] == MATCHES == len(records)
        # One stale click a match, refused with SEQ_MISMATCH by the service, nothing else.
        assert summary["refused"] == {"SEQ_MISMATCH": MATCHES}
        moves = sum(len(r["actions"]) for r in records)
        # At least a view and an Apply a move, the bot's SuggestMove too: the calls flowed.
        assert summary["calls"] >= 2 * moves + MATCHES
        assert all(r["signedState"] is None for r in records)
        php_lobby.check_matches(served.target, records)
    finally:
        served.stop()


def test_the_php_lobby_sends_signed_states_back_as_they_came(php: str, tmp_path: Path) -> None:
    """Against a server that signs, every request carries the signed state it was given (a
    plain or altered one is refused BAD_SIGNATURE), and the last one still verifies."""
    key = base64.b64encode(b"php lobby test key, 32 bytes...!").decode()
    served = harness.start([], env={"BASRA_SIGNING_KEYS": f"php:{key}"})
    try:
        with gateway(served.target) as url:
            summary = php_lobby.play(php, url, tmp_path / "records.json", "--seed", "php-signed")
        records = json.loads((tmp_path / "records.json").read_text())
        assert summary["finished"] == 1 and summary["refused"] == {"SEQ_MISMATCH": 1}
        signed = json_format.ParseDict(records[0]["signedState"], pb.SignedState())
        assert signed.key_id == "php"
        with channels.channel(served.target) as channel:
            stub = rpc.RulesServiceStub(channel)  # type: ignore[no-untyped-call]
            view = stub.PlayerView(pb.PlayerViewRequest(signed_state=signed, seat=0), timeout=30)
        assert view.view.seq == len(records[0]["actions"]) and view.view.status == pb.STATUS_OVER
        php_lobby.check_matches(served.target, records)
    finally:
        served.stop()


# One scripted answer of the stand-in: HTTP status, headers, JSON body.
Scripted = tuple[int, dict[str, str], dict[str, Any]]


class _StandIn(BaseHTTPRequestHandler):
    """Answers each POST with the next scripted (HTTP status, headers, body); records it."""

    script: list[Scripted]
    seen: list[tuple[str, dict[str, str], bytes]]
    delay: float = 0.0
    """Seconds to wait before answering (a server slower than the caller's deadline)."""

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        type(self).seen.append((self.path, dict(self.headers.items()), body))
        status, headers, answer = type(self).script.pop(0)
        time.sleep(type(self).delay)
        payload = json.dumps(answer).encode()
        self.send_response(status)
        for name, value in {**headers, "Content-Type": "application/json"}.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(payload)))
        try:
            self.end_headers()
            self.wfile.write(payload)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the caller stopped waiting (its deadline): what the test looks for

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the test reads what it needs from `seen`."""


@pytest.fixture
def stand_in() -> Iterator[tuple[str, type[_StandIn]]]:
    """A scripted HTTP server on loopback, stopped after the test."""
    handler = type("Handler", (_StandIn,), {"script": [], "seen": []})
    server = ThreadingHTTPServer((LOOPBACK, 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://{LOOPBACK}:{server.server_address[1]}", handler
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


def _status(code: int, reason: str, retry: str | None = None, **metadata: str) -> dict[str, Any]:
    """A google.rpc.Status in proto3 JSON, as the gateway writes one."""
    details: list[dict[str, Any]] = [
        {
            "@type": "type.googleapis.com/google.rpc.ErrorInfo",
            "reason": reason,
            "domain": "basra.v1",
            "metadata": metadata,
        }
    ]
    if retry is not None:
        details.append({"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": retry})
    return {"code": code, "message": f"{reason} for the test", "details": details}


UNAVAILABLE: Scripted = (503, {"Retry-After": "0"}, {"code": 14, "message": "no backend"})
SHED: Scripted = (429, {"Retry-After": "1"}, _status(8, "OVERLOADED", "0.050s", limit="1"))
BUDGET: Scripted = (429, {}, _status(8, "BUDGET_TOO_LARGE", maxDeals="64"))
STALE: Scripted = (409, {}, _status(10, "SEQ_MISMATCH", seq="3", expectedSeq="2"))
OK: Scripted = (200, {}, {"legalMoves": {"seat": 1}})


def _call(php: str, url: str, request: dict[str, Any], *deadline: str) -> dict[str, Any]:
    """One LegalMoves call through the PHP client (tests/http/php/call.php); what it printed."""
    done = subprocess.run(
        [php, str(CALL), url, "LegalMoves", json.dumps(request), str(SERVICE_CONFIG), *deadline],
        capture_output=True,
        text=True,
        timeout=php_lobby.PHP_SECONDS,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    out: dict[str, Any] = json.loads(done.stdout)
    return out


@pytest.mark.parametrize(
    ("script", "attempts", "outcome"),
    [
        ([UNAVAILABLE, UNAVAILABLE, OK], 3, "answer"),
        ([SHED, OK], 2, "answer"),
        ([UNAVAILABLE] * 5, 4, "UNAVAILABLE"),
        ([BUDGET], 1, "BUDGET_TOO_LARGE"),
        ([STALE], 1, "SEQ_MISMATCH"),
    ],
    ids=["unavailable-then-ok", "overloaded-then-ok", "at-most-max-attempts", "budget", "stale"],
)
def test_the_php_client_retries_what_the_published_policy_retries(
    php: str,
    stand_in: tuple[str, type[_StandIn]],
    script: list[Scripted],
    attempts: int,
    outcome: str,
) -> None:
    """UNAVAILABLE, and RESOURCE_EXHAUSTED with a RetryInfo, are sent again (as every RPC is
    pure), up to maxAttempts; a refusal of the request itself is not; each attempt carries the
    same body and a deadline (Grpc-Timeout) within the call's."""
    url, handler = stand_in
    handler.script.extend(script)
    request = {"state": {"seq": 2}}
    out = _call(php, url, request)
    assert out["attempts"] == attempts == len(handler.seen)
    if outcome == "answer":
        assert out["answer"] == OK[2]
    else:
        refusal = out["refusal"]
        assert refusal["reason"] == outcome
        details = script[-1][2].get("details", [{}])
        assert refusal["metadata"] == details[0].get("metadata", {})
    timeouts = []
    for path, headers, body in handler.seen:
        assert path == "/basra.v1.RulesService/LegalMoves"
        assert headers["Content-Type"] == "application/json"
        assert json.loads(body) == request
        value = headers["Grpc-Timeout"]
        assert value.endswith("m") and value[:-1].isdigit()
        timeouts.append(int(value[:-1]))
    # One deadline for the call, retries included: each attempt gets what is left of it.
    assert 0 < timeouts[-1] <= timeouts[0] <= 5000


def test_the_php_client_stops_at_its_deadline(
    php: str, stand_in: tuple[str, type[_StandIn]]
) -> None:
    """A server slower than the call's deadline: the call ends DEADLINE_EXCEEDED, not retried,
    and the one request told the gateway that deadline (Grpc-Timeout)."""
    url, handler = stand_in
    handler.script.append(OK)
    handler.delay = 1.5
    started = time.monotonic()
    out = _call(php, url, {"state": {"seq": 2}}, "0.3")
    assert out["refusal"]["status"] == "DEADLINE_EXCEEDED"
    assert out["attempts"] == 1 == len(handler.seen)
    assert 0 < int(handler.seen[0][1]["Grpc-Timeout"].removesuffix("m")) <= 300
    assert time.monotonic() - started < handler.delay + PHP_START_SECONDS


def test_the_php_client_retries_a_gateway_that_does_not_answer(php: str) -> None:
    """Nothing listens (a gateway restarting): no answer is UNAVAILABLE, retried up to
    maxAttempts, then reported as UNAVAILABLE."""
    with socket.socket() as held:  # bound, never listening: connections are refused
        held.bind((LOOPBACK, 0))
        out = _call(php, f"http://{LOOPBACK}:{held.getsockname()[1]}", {})
    assert out["refusal"]["status"] == "UNAVAILABLE"
    assert out["attempts"] == 4
