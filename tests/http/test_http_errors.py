"""Every refusal over HTTP is a JSON google.rpc.Status with an ErrorInfo: the server's own as the
server gave it over gRPC (same code, reason and metadata), with grpc-gateway's standard HTTP
status for its code; the gateway's own, for what never reaches the server, with a reason of
ours; a failure of the server a 500 that says nothing of it. Each case is checked against the
table of docs/http.md (test_http_gateway_docs.py checks that table against the binary)."""

from __future__ import annotations

import base64
import json
import socket
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import grpc
import pytest
from basra.v1 import rules_pb2 as pb
from basra.v1 import rules_pb2_grpc
from google.protobuf import json_format
from google.rpc import error_details_pb2, status_pb2  # type: ignore[import-untyped]

from clients.refusals import error_infos
from service.config import Config
from service.errors import INTERNAL_MESSAGE
from service.handlers import Handlers
from testkit import http_gateway
from testkit.calls import InProcess, start_server
from testkit.http_gateway import ROUTE, Answer, call, curl, running
from testkit.ports import reserved_port

SEED = b"refusals over http"
MAX_BODY = 2048
SECRET = "a secret the caller must not read"
NEW_MATCH = {"seed": base64.b64encode(SEED).decode()}
# docs/http.md's tables: the gateway's reasons (HTTP status, code) and the code mapping.
DOCUMENTED = {
    reason: (status, code)
    for reason, (status, code, _) in http_gateway.documented_reasons().items()
}
MAPPING = http_gateway.documented_mapping()


def _boom(seconds: float) -> None:
    raise KeyError(SECRET)


@pytest.fixture(scope="module")
def server() -> Iterator[InProcess]:
    """An in-process server with the default configuration."""
    started = start_server(Config())
    try:
        yield started
    finally:
        started.close()


@pytest.fixture(scope="module")
def url(server: InProcess) -> Iterator[str]:
    """The gateway in front of it, bodies bounded at MAX_BODY bytes."""
    with running(f"127.0.0.1:{server.port}", "--max-body-bytes", str(MAX_BODY)) as started:
        yield started.url


def refusal(answer: Answer) -> tuple[int, str, str, dict[str, str]]:
    """HTTP status, code name, reason and metadata of a refusal: a google.rpc.Status in
    proto3 JSON, with exactly one ErrorInfo of the service's domain."""
    assert answer.headers["content-type"] == "application/json", answer.headers
    status = json_format.Parse(answer.body, status_pb2.Status())
    infos = []
    for detail in status.details:
        info = error_details_pb2.ErrorInfo()
        if detail.Unpack(info):
            infos.append(info)
    assert len(infos) == 1, answer.body
    (info,) = infos
    assert info.domain == "basra.v1"
    code = grpc.StatusCode(next(c.value for c in grpc.StatusCode if c.value[0] == status.code))
    return answer.status, code.name, info.reason, dict(info.metadata)


def rules_calls(server: InProcess) -> int:
    """The RulesService calls the server has logged."""
    return sum(
        1
        for line in server.log_lines()
        if line.get("event") == "rpc" and line["method"].startswith("basra.v1.RulesService/")
    )


def new_match(url: str) -> dict[str, Any]:
    """A new match's answer, over HTTP."""
    answer = call(url, "NewMatch", NEW_MATCH)
    assert answer.status == 200, answer.body
    return dict(answer.json())


# ---- the gateway's own refusals: nothing reaches the server ----

GATEWAY_CASES: dict[str, tuple[str, dict[str, Any]]] = {
    # name: (reason, curl arguments)
    "not JSON": ("MALFORMED_JSON", {"body": '{"seed": '}),
    "data after the JSON": ("MALFORMED_JSON", {"body": '{"seed": "YQ=="} {}'}),
    "unknown field": ("UNKNOWN_FIELD", {"body": '{"seed": "YQ==", "colour": "red"}'}),
    "wrong type": ("INVALID_VALUE", {"body": '{"seed": 12}'}),
    "unknown enum name": (
        "INVALID_VALUE",
        {"body": '{"state": {"status": "STATUS_WHATEVER"}}', "path": ROUTE + "Apply"},
    ),
    "number out of range": (
        "INVALID_VALUE",
        {"body": '{"state": {"seq": 99999999999}}', "path": ROUTE + "Apply"},
    ),
    "duplicate field": ("INVALID_VALUE", {"body": '{"seed": "YQ==", "seed": "Yg=="}'}),
    "not an object": ("INVALID_VALUE", {"body": "[1, 2]"}),
    "body too large": ("BODY_TOO_LARGE", {"body": '{"labels": ["' + "x" * MAX_BODY + '"]}'}),
    "body too large, chunked": (
        "BODY_TOO_LARGE",
        {
            "body": '{"labels": ["' + "x" * MAX_BODY + '"]}',
            "headers": ("Content-Type: application/json", "Transfer-Encoding: chunked"),
        },
    ),
    "no content type": ("UNSUPPORTED_MEDIA_TYPE", {"body": "{}", "headers": ("Content-Type:",)}),
    "form content type": (
        "UNSUPPORTED_MEDIA_TYPE",
        {"body": "{}", "headers": ("Content-Type: application/x-www-form-urlencoded",)},
    ),
    "another charset": (
        "UNSUPPORTED_MEDIA_TYPE",
        {"body": "{}", "headers": ("Content-Type: application/json; charset=latin1",)},
    ),
    "bad timeout unit": (
        "INVALID_TIMEOUT",
        {"body": "{}", "headers": ("Content-Type: application/json", "Grpc-Timeout: 5x")},
    ),
    "timeout of 9 digits": (
        "INVALID_TIMEOUT",
        {"body": "{}", "headers": ("Content-Type: application/json", "Grpc-Timeout: 123456789S")},
    ),
    "unknown route": ("ROUTE_NOT_FOUND", {"body": "{}", "path": "/basra.v1.RulesService/Cheat"}),
    "root": ("ROUTE_NOT_FOUND", {"body": "{}", "path": "/"}),
    "GET": ("METHOD_NOT_ALLOWED", {"method": "GET"}),
    "PUT": ("METHOD_NOT_ALLOWED", {"method": "PUT", "body": "{}"}),
}


@pytest.mark.parametrize("case", sorted(GATEWAY_CASES))
def test_a_request_the_gateway_refuses_gets_its_reason_and_never_reaches_the_server(
    case: str, server: InProcess, url: str
) -> None:
    reason, how = GATEWAY_CASES[case]
    before = rules_calls(server)
    answer = curl(
        url + how.get("path", ROUTE + "NewMatch"),
        how.get("body"),
        method=how.get("method", "POST"),
        headers=how.get("headers", ("Content-Type: application/json",)),
    )
    status, code, found, metadata = refusal(answer)
    assert found == reason, answer.body
    assert (status, code) == DOCUMENTED[reason]
    assert rules_calls(server) == before  # no call reached the server
    if reason == "METHOD_NOT_ALLOWED":
        assert answer.headers["allow"] == "POST"
    if reason == "BODY_TOO_LARGE":
        assert metadata == {"maxBodyBytes": str(MAX_BODY)}
    if reason == "UNKNOWN_FIELD":
        assert metadata == {"field": "colour"}


def test_a_body_cut_short_is_refused_body_unread(server: InProcess, url: str) -> None:
    """A body that ends before its Content-Length (the caller stops sending)."""
    parts = urlsplit(url)
    with socket.create_connection((parts.hostname, parts.port), timeout=10) as raw:
        raw.sendall(
            b"POST " + (ROUTE + "NewMatch").encode() + b" HTTP/1.1\r\nHost: gateway\r\n"
            b'Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{"seed"'
        )
        raw.shutdown(socket.SHUT_WR)
        received = b""
        while chunk := raw.recv(65536):
            received += chunk
    status, code, reason, _ = refusal(http_gateway.parse_answer(received))
    assert reason == "BODY_UNREAD" and (status, code) == DOCUMENTED[reason]


def test_an_empty_body_is_the_empty_request(url: str) -> None:
    """As grpc-gateway takes it: NewMatch with no seed draws one."""
    answer = curl(url + ROUTE + "NewMatch", "")
    assert answer.status == 200 and answer.json()["state"]["seed"]


# ---- the server's refusals: as over gRPC ----


def _grpc_refusal(server: InProcess, method: str, request: Any) -> tuple[str, str, dict[str, str]]:
    stub = rules_pb2_grpc.RulesServiceStub(server.channel)  # type: ignore[no-untyped-call]
    with pytest.raises(grpc.RpcError) as raised:
        getattr(stub, method)(request, timeout=10)
    error: Any = raised.value
    (info,) = error_infos(error.trailing_metadata())
    return error.code().name, info.reason, dict(info.metadata)


def server_cases(url: str) -> dict[str, tuple[str, dict[str, Any], Any]]:
    """Requests the server refuses, each with a different code: method, JSON, message."""
    state = new_match(url)["state"]
    mover = state.get("toMove", 0)
    other = 1 - mover
    card = state["seats"][other]["hand"][0]
    cases: dict[str, tuple[str, dict[str, Any]]] = {
        "INVALID_ARGUMENT": ("LegalMoves", {}),
        "FAILED_PRECONDITION": (
            "Apply",
            {"state": state, "action": {"seat": other, "card": card, "trail": True}},
        ),
        "ABORTED": (
            "Apply",
            {
                "state": state,
                "action": {"seat": mover, "card": state["seats"][mover]["hand"][0]},
                "expectedSeq": 7,
            },
        ),
        "RESOURCE_EXHAUSTED": (
            "SuggestMove",
            {"state": state, "seat": mover, "budget": {"deals": 1000, "nodes": 1}},
        ),
    }
    requests = {"LegalMoves": pb.LegalMovesRequest, "Apply": pb.ApplyRequest}
    requests["SuggestMove"] = pb.SuggestMoveRequest
    return {
        code: (method, body, json_format.ParseDict(body, requests[method]()))
        for code, (method, body) in cases.items()
    }


def test_a_refusal_of_the_server_is_its_status_with_the_standard_http_status(
    server: InProcess, url: str
) -> None:
    """Same code, reason and metadata as over gRPC; the HTTP status of the documented mapping;
    a RESOURCE_EXHAUSTED that the server gives no RetryInfo (a bound, not load) has no
    Retry-After."""
    codes = {}
    for code, (method, body, message) in server_cases(url).items():
        answer = call(url, method, body)
        status, found_code, reason, metadata = refusal(answer)
        assert (found_code, reason, metadata) == _grpc_refusal(server, method, message)
        assert found_code == code
        assert status == MAPPING[code], (code, status)
        assert "retry-after" not in answer.headers
        codes[code] = reason
    assert codes["ABORTED"] == "SEQ_MISMATCH" and codes["RESOURCE_EXHAUSTED"] == "BUDGET_TOO_LARGE"


def test_a_failure_of_the_server_is_a_500_that_names_nothing_internal() -> None:
    """INTERNAL: the server's one sentence, no detail, nothing of the exception; the server
    logs it with its traceback as for any caller."""
    broken = start_server(Config(), Handlers(observe_plan_seconds=_boom))
    try:
        with running(f"127.0.0.1:{broken.port}") as started:
            answer = call(started.url, "NewMatch", NEW_MATCH)
            gateway_log = started.log_text()
    finally:
        broken.close()
    assert answer.status == 500
    assert answer.json() == {"code": 13, "message": INTERNAL_MESSAGE}
    assert SECRET not in answer.body.decode() and "KeyError" not in answer.body.decode()
    assert SECRET not in gateway_log
    (line,) = [
        line
        for line in broken.log_lines()
        if line.get("event") == "rpc" and line["method"].endswith("/NewMatch")
    ]
    assert (line["level"], line["code"], line["transport"]) == ("error", "INTERNAL", "http")
    assert f"KeyError: '{SECRET}'" in line["exception"]


def test_a_backend_that_cannot_be_reached_is_a_503_with_retry_after() -> None:
    """No server at the backend's address: after the published retry policy's attempts,
    503 BACKEND_UNAVAILABLE, Retry-After: 1, and nothing of the address in the answer."""
    with reserved_port() as port, running(f"127.0.0.1:{port}") as started:
        answer = call(started.url, "NewMatch", NEW_MATCH)
    status, code, reason, _ = refusal(answer)
    assert reason == "BACKEND_UNAVAILABLE" and (status, code) == DOCUMENTED[reason]
    assert answer.headers["retry-after"] == "1"
    assert str(port) not in answer.body.decode()


def test_a_deadline_that_passes_before_the_answer_is_a_504(url: str) -> None:
    """Grpc-Timeout of 1 ns: the gateway's call ends before the server can answer."""
    answer = call(url, "NewMatch", NEW_MATCH, "Grpc-Timeout: 1n")
    status, code, reason, _ = refusal(answer)
    assert reason == "DEADLINE_EXPIRED" and (status, code) == DOCUMENTED[reason]


def test_a_body_the_gateway_takes_but_the_server_bounds_is_its_request_too_large(
    server: InProcess,
) -> None:
    """A 2 MB body (a 1.5 MB seed, base64) fits the gateway's default 4 MiB but its message
    does not fit the server's 1 MiB: the server's own refusal, 429 without Retry-After (the same
    request would be refused again)."""
    body = {"seed": base64.b64encode(bytes(1_500_000)).decode()}
    with running(f"127.0.0.1:{server.port}") as started:
        answer = call(started.url, "NewMatch", body)
    assert 1_048_576 < len(json.dumps(body)) < 4_194_304
    status, code, reason, _ = refusal(answer)
    assert (status, code, reason) == (429, "RESOURCE_EXHAUSTED", "REQUEST_TOO_LARGE")
    assert "retry-after" not in answer.headers
