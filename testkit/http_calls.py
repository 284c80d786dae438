"""Calls to the HTTP/JSON port (basra-gateway) as a plain HTTP/1.1 client makes them.

One keep-alive connection per `HttpCaller` (http.client: the standard library, so that what
goes on the wire is exactly the bytes and headers a test chose, garbage included), and the
reading of an answer: 200 with the response message as proto3 JSON, or a refusal, the JSON
google.rpc.Status with one ErrorInfo, whose HTTP status is grpc-gateway's standard mapping of
its code (runtime.HTTPStatusFromCode).
"""

from __future__ import annotations

import contextlib
import http.client
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import grpc
from google.protobuf import json_format
from google.rpc import error_details_pb2, status_pb2  # type: ignore[import-untyped]

from service.servicer import SERVICE_NAME
from testkit.http_gateway import Answer

TIMEOUT = 10.0
JSON = "application/json"

# grpc-gateway's runtime.HTTPStatusFromCode: the HTTP status of each gRPC code.
HTTP_STATUS: Mapping[grpc.StatusCode, int] = {
    grpc.StatusCode.OK: 200,
    grpc.StatusCode.CANCELLED: 499,
    grpc.StatusCode.UNKNOWN: 500,
    grpc.StatusCode.INVALID_ARGUMENT: 400,
    grpc.StatusCode.DEADLINE_EXCEEDED: 504,
    grpc.StatusCode.NOT_FOUND: 404,
    grpc.StatusCode.ALREADY_EXISTS: 409,
    grpc.StatusCode.PERMISSION_DENIED: 403,
    grpc.StatusCode.UNAUTHENTICATED: 401,
    grpc.StatusCode.RESOURCE_EXHAUSTED: 429,
    grpc.StatusCode.FAILED_PRECONDITION: 400,
    grpc.StatusCode.ABORTED: 409,
    grpc.StatusCode.OUT_OF_RANGE: 400,
    grpc.StatusCode.UNIMPLEMENTED: 501,
    grpc.StatusCode.INTERNAL: 500,
    grpc.StatusCode.UNAVAILABLE: 503,
    grpc.StatusCode.DATA_LOSS: 500,
}
CODE_BY_NUMBER: Mapping[int, grpc.StatusCode] = {c.value[0]: c for c in grpc.StatusCode}
# The refusals basra-gateway makes itself, before a call reaches the server (docs/http.md), and
# the HTTP status of each where it is more precise than its code's (written out by hand, as
# the contract a caller reads, so that a change on the gateway's side is caught here).
GATEWAY_REASONS: Mapping[str, int | None] = {
    "MALFORMED_JSON": None,
    "UNKNOWN_FIELD": None,
    "INVALID_VALUE": None,
    "BODY_TOO_LARGE": 413,
    "BODY_UNREAD": None,
    "UNSUPPORTED_MEDIA_TYPE": 415,
    "INVALID_TIMEOUT": None,
    "ROUTE_NOT_FOUND": None,
    "METHOD_NOT_ALLOWED": 405,
    "BACKEND_UNAVAILABLE": None,
}


def route(rpc: str) -> str:
    """The path of an RPC on the HTTP port: the gRPC method's own."""
    return f"/{SERVICE_NAME}/{rpc}"


@dataclass(frozen=True)
class Refusal:
    """A refusal read from its JSON google.rpc.Status."""

    code: grpc.StatusCode
    message: str
    reason: str
    domain: str
    metadata: Mapping[str, str] = field(default_factory=dict)


def refusal(answer: Answer) -> Refusal:
    """Read a refusal: the JSON google.rpc.Status with exactly one ErrorInfo, sent with the
    HTTP status its code maps to, or the gateway's own for its reason (an AssertionError says
    what differs)."""
    assert answer.headers.get("content-type", "").startswith(JSON), answer
    status = json_format.Parse(answer.body, status_pb2.Status())
    code = CODE_BY_NUMBER[status.code]
    infos = []
    for detail in status.details:
        info = error_details_pb2.ErrorInfo()
        if detail.Unpack(info):
            infos.append(info)
    assert len(infos) == 1, f"a refusal carries exactly one ErrorInfo: {answer.body!r}"
    (info,) = infos
    wanted = GATEWAY_REASONS.get(info.reason) or HTTP_STATUS[code]
    assert answer.status == wanted, (answer.status, code, answer.body)
    return Refusal(code, status.message, info.reason, info.domain, dict(info.metadata))


class HttpCaller:
    """A keep-alive HTTP/1.1 connection to a base URL (reopened after the server closes it)."""

    def __init__(self, base: str, timeout: float = TIMEOUT) -> None:
        parts = urlsplit(base)
        assert parts.scheme == "http" and parts.hostname and parts.port, base
        self.host, self.port, self.timeout = parts.hostname, parts.port, timeout
        self._connection: http.client.HTTPConnection | None = None

    def close(self) -> None:
        """Close the connection."""
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    def __enter__(self) -> HttpCaller:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def call(self, rpc: str, body: bytes | str, headers: Mapping[str, str] | None = None) -> Answer:
        """POST a body to an RPC's route, as JSON unless `headers` say otherwise."""
        sent = {"Content-Type": JSON, **(headers or {})}
        return self.send("POST", route(rpc), body, sent)

    def send(
        self,
        method: str,
        path: str,
        body: bytes | str | None,
        headers: Mapping[str, str],
        *,
        chunked: bool = False,
    ) -> Answer:
        """Send one request exactly as given (`chunked`: the body in chunked transfer coding,
        no Content-Length); read the whole answer."""
        data = body.encode() if isinstance(body, str) else body
        while True:
            reused = self._connection is not None
            connection = self._connection or http.client.HTTPConnection(
                self.host, self.port, timeout=self.timeout
            )
            self._connection = connection
            try:
                connection.putrequest(method, path, skip_accept_encoding=True)
                for name, value in headers.items():
                    connection.putheader(name, value)
                if chunked:
                    connection.putheader("Transfer-Encoding", "chunked")
                elif data is not None and not any(k.lower() == "content-length" for k in headers):
                    connection.putheader("Content-Length", str(len(data)))
                # The server may answer (a body too large) and close before it has read the
                # whole body: its answer is read all the same, as curl reads it.
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    connection.endheaders(data, encode_chunked=chunked)
                response = connection.getresponse()
                got = response.read()
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
                # A kept-alive connection the server had closed: once more on a new one (a
                # new connection closed without an answer is the server's failure, raised).
                self.close()
                if not reused:
                    raise
                continue
            if response.will_close:
                self.close()
            names = {k.lower(): v for k, v in response.getheaders()}
            return Answer(response.status, names, got)
