"""The server's keepalive enforcement permits the published client settings' pings: a client
pinging an idle connection a little slower than the server's minimum keeps it, one pinging
faster is sent GOAWAY too_many_pings (so the option is one gRPC core reads)."""

from __future__ import annotations

import time

import grpc
import pytest
from basra.v1 import rules_pb2 as pb
from basra.v1 import rules_pb2_grpc

from clients import channels
from service import server
from service.config import Config
from testkit.loopback import served_port

# The server's minimum, shortened for the test (gRPC core's client pings at most once a
# second, whatever its keepalive time); the client pings past it or within it.
MIN_MS = 2_000
# The first ping cannot strike; the server closes at the third strike.
PINGS = 5


def _states_while_idle(monkeypatch: pytest.MonkeyPatch, ping_ms: int) -> list[str]:
    """The channel's states while it stays idle for PINGS keepalive pings after one call."""
    monkeypatch.setattr(server, "MIN_CLIENT_PING_MS", MIN_MS)
    options = dict(channels.KEEPALIVE_OPTIONS)
    options["grpc.keepalive_time_ms"] = ping_ms
    states: list[str] = []
    with (
        served_port(Config()) as port,
        grpc.insecure_channel(f"127.0.0.1:{port}", options=list(options.items())) as channel,
    ):
        channel.subscribe(lambda state: states.append(state.name), try_to_connect=True)
        stub = rules_pb2_grpc.RulesServiceStub(channel)  # type: ignore[no-untyped-call]
        assert stub.NewMatch(pb.NewMatchRequest(seed=b"k"), timeout=10).state.hand_number == 1
        time.sleep(ping_ms / 1000 * PINGS + 1.0)
        return list(states)


def test_pings_slower_than_the_minimum_keep_the_connection(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """At 1.5 times the server's minimum, an idle connection stays READY through the pings."""
    states = _states_while_idle(monkeypatch, MIN_MS * 3 // 2)
    assert "READY" in states
    assert states[states.index("READY") :] == ["READY"], states


def test_pings_faster_than_the_minimum_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """At half the server's minimum, the third strike closes the connection (too_many_pings)."""
    states = _states_while_idle(monkeypatch, MIN_MS // 2)
    assert "READY" in states
    assert states[states.index("READY") :] != ["READY"], states
