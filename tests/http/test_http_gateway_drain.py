"""The gateway's drain on SIGTERM: keep-alives off at once, new requests still served for
--drain-seconds, then a shutdown that waits for the calls in flight; callers that keep calling
through it, on keep-alive connections, lose none (docs/http.md, "Shutdown")."""

from __future__ import annotations

import base64
import http.client
import json
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import closing
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import pytest

from service.config import Config
from service.handlers import Handlers
from testkit.calls import InProcess, start_server
from testkit.http_gateway import ROUTE, GatedApply, running

DRAIN_SECONDS = 2.0
CALLERS = 4
# Callers stop sending new requests this long after SIGTERM, well before the drain ends.
SEND_SECONDS = 1.2
# The held call is sent this long after SIGTERM, and let go this long after the drain's end:
# it is in flight when the shutdown begins, and the shutdown waits for it.
HELD_AT = 1.5
HELD_PAST_DRAIN = 1.0
WAIT = 30.0


@dataclass
class Tally:
    """What the callers saw, under one lock."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    ok: list[float] = field(default_factory=list)
    """When each answered call ended (time.monotonic())."""
    failed: list[str] = field(default_factory=list)
    closes: int = 0
    """Answers that said Connection: close."""


def post(connection: http.client.HTTPConnection, method: str, body: dict[str, Any]) -> Any:
    """One call on a keep-alive connection: its status, its Connection header and its JSON."""
    connection.request(
        "POST",
        ROUTE + method,
        json.dumps(body),
        {"Content-Type": "application/json", "Grpc-Timeout": "20S"},
    )
    answer = connection.getresponse()
    return answer.status, answer.getheader("Connection"), json.loads(answer.read())


def connect(url: str) -> http.client.HTTPConnection:
    """A connection to the gateway at `url` (HTTP/1.1: kept alive unless told otherwise)."""
    parts = urlsplit(url)
    return http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=WAIT)


def caller(url: str, stop: threading.Event, tally: Tally, index: int) -> None:
    """NewMatch after NewMatch on one keep-alive connection, a new one when it is closed."""
    connection = connect(url)
    seed = base64.b64encode(f"drain-{index}".encode()).decode()
    try:
        while not stop.is_set():
            try:
                status, close, _ = post(connection, "NewMatch", {"seed": seed})
            except (OSError, http.client.HTTPException) as error:
                with tally.lock:
                    tally.failed.append(repr(error))
                return
            with tally.lock:
                if status == 200:
                    tally.ok.append(time.monotonic())
                else:
                    tally.failed.append(str(status))
                if close == "close":
                    tally.closes += 1
            if close == "close":
                connection.close()
                connection = connect(url)
    finally:
        connection.close()


@pytest.fixture
def gated() -> Iterator[tuple[InProcess, GatedApply]]:
    """An in-process server whose Apply waits at a gate."""
    gate = GatedApply(Handlers(), WAIT)
    started = start_server(Config(), gate)  # type: ignore[arg-type]
    try:
        yield started, gate
    finally:
        gate.opened.set()
        started.close()


def test_calls_through_a_sigterm_all_succeed(gated: tuple[InProcess, GatedApply]) -> None:
    server, gate = gated
    tally, stop = Tally(), threading.Event()
    with running(f"127.0.0.1:{server.port}", "--drain-seconds", str(DRAIN_SECONDS)) as gateway:
        with closing(connect(gateway.url)) as first:
            status, _, answer = post(first, "NewMatch", {"seed": "ZHJhaW4="})
            assert status == 200
        state = answer["state"]
        move = answer["legalMoves"]["moves"][0]
        action = {"seat": state.get("toMove", 0), "card": move["card"]}
        action.update({"planId": move["plans"][0]["id"]} if move.get("plans") else {"trail": True})
        threads = [
            threading.Thread(target=caller, args=(gateway.url, stop, tally, i), daemon=True)
            for i in range(CALLERS)
        ]
        for thread in threads:
            thread.start()
        time.sleep(0.5)
        with tally.lock:
            assert tally.ok, tally.failed
        signalled = time.monotonic()
        gateway.process.send_signal(signal.SIGTERM)
        time.sleep(SEND_SECONDS)
        stop.set()
        for thread in threads:
            thread.join(WAIT)
        time.sleep(max(0.0, signalled + HELD_AT - time.monotonic()))
        held: dict[str, Any] = {}

        def send_held() -> None:
            with closing(connect(gateway.url)) as connection:
                held["answer"] = post(connection, "Apply", {"state": state, "action": action})

        sender = threading.Thread(target=send_held, daemon=True)
        sender.start()
        assert gate.waiting.acquire(timeout=WAIT)  # the held call reached the server
        time.sleep(max(0.0, signalled + DRAIN_SECONDS + HELD_PAST_DRAIN - time.monotonic()))
        still_running = gateway.process.poll() is None  # its shutdown waits for the call
        gate.opened.set()
        sender.join(WAIT)
        exit_code = gateway.process.wait(WAIT)
        draining = gateway.wait_for("draining", 1)
        gateway.wait_for("stopped", 1)

    assert tally.failed == []
    during_drain = [t for t in tally.ok if t > signalled]
    assert len(during_drain) >= CALLERS, (len(tally.ok), len(during_drain))
    assert tally.closes >= CALLERS  # each keep-alive connection was told to close
    held_status, held_close, held_answer = held["answer"]
    assert (held_status, held_close) == (200, "close"), held_answer
    assert held_answer["state"]["seq"] == state.get("seq", 0) + 1
    assert still_running and exit_code == 0
    assert draining["drain_seconds"] == DRAIN_SECONDS
