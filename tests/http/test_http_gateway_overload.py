"""The overload path over HTTP: a server past its admission bound refuses an HTTP caller as it
refuses a gRPC one (RESOURCE_EXHAUSTED, OVERLOADED, with a RetryInfo), and the caller gets a
429 with Retry-After, the server's delay in whole seconds (docs/http.md, "Headers")."""

from __future__ import annotations

import math
from collections.abc import Iterator

import pytest
from basra.v1 import rules_pb2 as pb
from google.protobuf import json_format

import engine
from service.config import Config
from service.handlers import Handlers
from testkit.actions import action_to_proto
from testkit.calls import InProcess, start_server
from testkit.http_gateway import GatedApply, call, gateway
from testkit.messages import state_to_proto

WAIT = 10.0


def apply_request() -> pb.ApplyRequest:
    state, _ = engine.new_match(b"overload over http")
    action = next(engine.legal_actions(state))
    return pb.ApplyRequest(state=state_to_proto(state), action=action_to_proto(action))


@pytest.fixture
def gated() -> Iterator[tuple[InProcess, GatedApply]]:
    """A server that holds at most one call, whose Apply waits at a gate."""
    config = Config(admission_limit=1)
    gate = GatedApply(Handlers())
    server = start_server(config, gate)  # type: ignore[arg-type]
    try:
        yield server, gate
    finally:
        gate.opened.set()
        server.close()


def test_a_shed_http_call_is_a_429_with_the_servers_retry_after(
    gated: tuple[InProcess, GatedApply],
) -> None:
    server, gate = gated
    request = apply_request()
    apply = server.channel.unary_unary(
        "/basra.v1.RulesService/Apply",
        request_serializer=pb.ApplyRequest.SerializeToString,
        response_deserializer=pb.ApplyResponse.FromString,
    )
    with gateway(f"127.0.0.1:{server.port}") as url:
        held = apply.future(request, timeout=WAIT)  # takes the one slot, and keeps it
        assert gate.waiting.acquire(timeout=WAIT)
        answer = call(url, "Apply", json_format.MessageToDict(request), "Grpc-Timeout: 8S")
        gate.opened.set()
        assert held.result(WAIT).state.seq == 1
        # With the slot free again, the same call over HTTP is answered.
        again = call(url, "Apply", json_format.MessageToDict(request))
    assert answer.status == 429, answer.body
    status = answer.json()
    assert status["code"] == 8  # RESOURCE_EXHAUSTED
    info, retry = status["details"]
    assert info["@type"].endswith("google.rpc.ErrorInfo") and info["reason"] == "OVERLOADED"
    assert info["metadata"]["limit"] == "1"
    assert retry["@type"].endswith("google.rpc.RetryInfo")
    delay = float(retry["retryDelay"].removesuffix("s"))
    assert answer.headers["retry-after"] == str(max(1, math.ceil(delay)))
    assert again.status == 200 and again.json()["state"]["seq"] == 1

    server.tally.flush()
    labels = {"grpc_type": "UNARY", "grpc_service": "basra.v1.RulesService"}
    shed = server.registry.get_sample_value(
        "grpc_server_handled_total",
        {**labels, "grpc_method": "Apply", "transport": "http", "grpc_code": "RESOURCE_EXHAUSTED"},
    )
    # Each attempt of the gateway's retry policy was shed and counted as an HTTP call.
    assert shed is not None and shed >= 1
