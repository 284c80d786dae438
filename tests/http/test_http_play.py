"""A whole match over HTTP/JSON, by curl through basra-gateway in front of a real server, is
the same match as over gRPC: each answer's JSON is the canonical proto3 JSON of the gRPC answer
to the same request (issue 43); and so is the answer of every other route, BatchApply
included."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Any

import pytest
from basra.v1 import rules_pb2 as pb
from basra.v1 import rules_pb2_grpc
from google.protobuf import json_format

# A batch item's refusal holds an ErrorInfo in an Any: json_format finds its type by import.
from google.rpc import error_details_pb2  # type: ignore[import-untyped]  # noqa: F401

from clients import channels
from testkit import harness
from testkit.http_gateway import call, first_move, gateway

SEED = b"http-play"
LABELS = ["north", "south"]
TIMEOUT = 10.0
MOST_TURNS = 2000


@pytest.fixture(scope="module")
def served() -> Iterator[harness.ServedProcess]:
    """`basra-rules serve` on loopback."""
    server = harness.start()
    try:
        yield server
    finally:
        server.stop()


def test_a_match_over_http_is_the_match_over_grpc(served: harness.ServedProcess) -> None:
    with (
        gateway(served.target) as url,
        channels.channel(served.target) as channel,
    ):
        stub = rules_pb2_grpc.RulesServiceStub(channel)  # type: ignore[no-untyped-call]
        request: dict[str, Any] = {
            "seed": base64.b64encode(SEED).decode(),
            "labels": LABELS,
        }
        method = "NewMatch"
        reply_type: Any = pb.NewMatchResponse
        grpc_request: Any = json_format.ParseDict(request, pb.NewMatchRequest())
        turns = 0
        while True:
            answer = call(url, method, request)
            assert answer.status == 200, answer.body
            assert answer.headers["content-type"] == "application/json"
            by_grpc = getattr(stub, method)(grpc_request, timeout=TIMEOUT)
            # The same answer in both encodings: proto3's canonical JSON of the gRPC answer,
            # and the same message once parsed.
            assert answer.json() == json_format.MessageToDict(by_grpc)
            assert json_format.Parse(answer.body, reply_type()) == by_grpc
            state = answer.json()["state"]
            if state["status"] == "STATUS_OVER":
                break
            turns += 1
            assert turns < MOST_TURNS, "the match did not end"
            request = {
                "state": state,
                "action": first_move(answer.json()["legalMoves"]),
                "expectedSeq": state.get("seq", 0),
            }
            method, reply_type = "Apply", pb.ApplyResponse
            grpc_request = json_format.ParseDict(request, pb.ApplyRequest())
        # A whole match: more than one hand's worth of moves, and it ended with a winner or a tie.
        assert turns > 40
        assert by_grpc.state.status == pb.STATUS_OVER


def test_every_route_answers_as_grpc_does(served: harness.ServedProcess) -> None:
    """LegalMoves, PlayerView, SuggestMove, Replay and BatchApply on a match's second state."""
    with (
        gateway(served.target) as url,
        channels.channel(served.target) as channel,
    ):
        stub = rules_pb2_grpc.RulesServiceStub(channel)  # type: ignore[no-untyped-call]
        started = call(url, "NewMatch", {"seed": base64.b64encode(SEED).decode()}).json()
        first = first_move(started["legalMoves"])
        apply = {"state": started["state"], "action": first}
        state = call(url, "Apply", apply).json()["state"]
        seat = state.get("toMove", 0)
        requests: dict[str, dict[str, Any]] = {
            "LegalMoves": {"state": state},
            "PlayerView": {"state": state, "seat": 1 - seat},
            "SuggestMove": {"state": state, "seat": seat, "level": "BOT_LEVEL_GREEDY"},
            "Replay": {"seed": base64.b64encode(SEED).decode(), "actions": [first]},
            "BatchApply": {"requests": [apply, {**apply, "expectedSeq": 5}]},
        }
        for method, request in requests.items():
            answer = call(url, method, request)
            assert answer.status == 200, (method, answer.body)
            request_type = getattr(pb, f"{method}Request")
            reply_type = getattr(pb, f"{method}Response")
            by_grpc = getattr(stub, method)(
                json_format.ParseDict(request, request_type()), timeout=TIMEOUT
            )
            expected = json_format.MessageToDict(by_grpc)
            assert answer.json() == expected, method
            # Parsed, the same message (compared as values: an Any's bytes hold a map, whose
            # order protobuf does not fix).
            parsed = json_format.Parse(answer.body, reply_type())
            assert json_format.MessageToDict(parsed) == expected, method
        # The batch's second item was refused inside the answer, as over gRPC.
        results = call(url, "BatchApply", requests["BatchApply"]).json()["results"]
        assert "response" in results[0] and results[1]["status"]["code"] == 10  # ABORTED
