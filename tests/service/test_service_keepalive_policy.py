"""The server's keepalive enforcement permits the published client settings' pings: a client
pinging an idle connection a little slower than the server's minimum keeps it, one pinging
faster is sent GOAWAY too_many_pings (so the option is one gRPC core reads); the example lobbies
set the same keepalive as clients/channels.py."""

from __future__ import annotations

import re
import time

import grpc
import pytest
from basra.v1 import rules_pb2 as pb
from basra.v1 import rules_pb2_grpc

from clients import channels
from service import server
from service.config import Config
from testkit.deployment import REPO
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


def _go_seconds(text: str, field: str) -> float:
    """A time.Duration field of the Go example's keepalive.ClientParameters, in seconds."""
    found = re.search(rf"\b{field}:\s+(?:(\d+) \* )?time\.Second,", text)
    assert found, f"no {field} in examples/go/rules/client.go"
    return float(found.group(1) or 1)


def test_every_example_lobby_sets_the_published_keepalive() -> None:
    """The Go, Java and Node.js lobbies ping and time out as clients/channels.py does, also
    without calls (docs/integration.md, "Client settings")."""
    published = dict(channels.KEEPALIVE_OPTIONS)
    time_ms, timeout_ms = (
        published["grpc.keepalive_time_ms"],
        published["grpc.keepalive_timeout_ms"],
    )
    assert published["grpc.keepalive_permit_without_calls"] == 1
    go = (REPO / "examples/go/rules/client.go").read_text()
    assert _go_seconds(go, "Time") * 1000 == time_ms
    assert _go_seconds(go, "Timeout") * 1000 == timeout_ms
    assert "PermitWithoutStream: true" in go and "grpc.WithKeepaliveParams(Keepalive)" in go
    java = (
        REPO / "examples/java/src/main/java/com/example/basra/lobby/RulesClient.java"
    ).read_text()
    constants = {
        name: int(value.replace("_", ""))
        for name, value in re.findall(r"static final long (KEEPALIVE_\w+) = ([\d_]+);", java)
    }
    assert constants == {"KEEPALIVE_TIME_MS": time_ms, "KEEPALIVE_TIMEOUT_MS": timeout_ms}
    assert ".keepAliveWithoutCalls(true)" in java
    node = (REPO / "examples/lobby/rules.mjs").read_text()
    block = re.search(r"KEEPALIVE_OPTIONS = \{(.*?)\};", node, re.S)
    assert block, "no KEEPALIVE_OPTIONS in examples/lobby/rules.mjs"
    options = {k: int(v) for k, v in re.findall(r"'([\w.]+)': (\d+),", block.group(1))}
    assert options == {k: v for k, v in published.items() if "max_pings" not in k}
    assert "...KEEPALIVE_OPTIONS," in node
