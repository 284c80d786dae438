# ruff: noqa: N802 (method names are the RPC names that grpc looks up)
"""The RulesService servicer and its registration on a server.

The servicer calls the handlers (which know no gRPC) and ends a refused call with its status.
Registration reads request bodies with a reader that never raises, because grpc would answer
an unreadable body with INTERNAL; the servicer refuses it with INVALID_ARGUMENT instead. The
handlers answer with the encoded response, so the response serializer is the identity, or
takes the bytes out of the Answer of NewMatch and Replay (whose seq the call's log line names).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any, TypeVar

import grpc
from basra.v1 import rules_pb2 as pb
from basra.v1 import rules_pb2_grpc
from google.protobuf.message import Message

from service import deadlines, errors
from service.errors import Refusal, ServiceReason
from service.handlers import Answer, Handlers, encoded

SERVICE_NAME = "basra.v1.RulesService"

# Request and response types of each RPC, in the order of the .proto (the handlers answer
# with the response type's encoding).
METHODS: dict[str, tuple[type[Message], type[Message]]] = {
    "NewMatch": (pb.NewMatchRequest, pb.NewMatchResponse),
    "Apply": (pb.ApplyRequest, pb.ApplyResponse),
    "LegalMoves": (pb.LegalMovesRequest, pb.LegalMovesResponse),
    "PlayerView": (pb.PlayerViewRequest, pb.PlayerViewResponse),
    "Replay": (pb.ReplayRequest, pb.ReplayResponse),
    "SuggestMove": (pb.SuggestMoveRequest, pb.SuggestMoveResponse),
}

# The response serializer of each RPC whose handler answers with an Answer (others: identity).
RESPONSE_SERIALIZERS: dict[str, Callable[[bytes | Answer], bytes]] = {
    "NewMatch": encoded,
    "Replay": encoded,
}

Req = TypeVar("Req")
Resp = TypeVar("Resp")


@dataclass(frozen=True, slots=True)
class Unreadable:
    """A request body that does not parse as its message type."""

    message_type: str
    size: int
    limit: int | None = None
    """The configured maximum when the body was refused for its size, else None."""


def _reader(
    message_type: type[Message], limit: int | None = None
) -> Callable[[bytes], Message | Unreadable]:
    """Return a request deserializer that yields Unreadable instead of raising."""
    parse = message_type.FromString

    def read(data: bytes) -> Message | Unreadable:
        if limit is not None and len(data) > limit:
            return Unreadable(message_type.DESCRIPTOR.name, len(data), limit)
        try:
            return parse(data)
        except Exception:  # any parse failure is the caller's malformed input
            return Unreadable(message_type.DESCRIPTOR.name, len(data))

    return read


def respond(
    handler: Callable[[Req], Resp], request: Req | Unreadable, seconds_left: float | None = None
) -> Resp:
    """Run a handler; every failure leaves as a Refusal, whatever raised it. A call with no
    time left (`seconds_left`: its caller's, None for no deadline) is refused, not run."""
    late = deadlines.expired(seconds_left)
    if late is not None:
        raise late
    if isinstance(request, Unreadable) and request.limit is not None:
        raise errors.refusal(
            ServiceReason.REQUEST_TOO_LARGE,
            f"The request has {request.size} bytes; this server takes at most {request.limit}.",
            size=request.size,
            max_bytes=request.limit,
        )
    if isinstance(request, Unreadable):
        raise errors.refusal(
            ServiceReason.MALFORMED_REQUEST,
            f"The request body is not a valid {request.message_type} message.",
            message_type=request.message_type,
            size=request.size,
        )
    try:
        return handler(request)
    except Refusal:
        raise
    except Exception as error:  # the promise: no input ends a call with UNKNOWN/INTERNAL
        raise errors.unexpected(error) from error


class RulesServicer(rules_pb2_grpc.RulesServiceServicer):
    """Servicer for grpc's thread-pool server."""

    def __init__(self, handlers: Handlers) -> None:
        self._handlers = handlers

    def NewMatch(self, request: Any, context: grpc.ServicerContext) -> Answer:
        """Start a match."""
        return _answer(self._handlers.new_match, request, context)

    def Apply(self, request: Any, context: grpc.ServicerContext) -> bytes:
        """Apply one action."""
        return _answer(self._handlers.apply, request, context)

    def LegalMoves(self, request: Any, context: grpc.ServicerContext) -> bytes:
        """List the legal moves."""
        return _answer(self._handlers.legal_moves, request, context)

    def PlayerView(self, request: Any, context: grpc.ServicerContext) -> bytes:
        """Return one seat's view."""
        return _answer(self._handlers.player_view, request, context)

    def Replay(self, request: Any, context: grpc.ServicerContext) -> Answer:
        """Replay a match."""
        return _answer(self._handlers.replay, request, context)

    def SuggestMove(self, request: Any, context: grpc.ServicerContext) -> bytes:
        """Suggest a move for the seat to move."""
        left = context.time_remaining()
        return _answer(partial(self._handlers.suggest_move, seconds_left=left), request, context)


def _answer(
    handler: Callable[[Req], Resp], request: Req | Unreadable, context: grpc.ServicerContext
) -> Resp:
    try:
        return respond(handler, request, context.time_remaining())
    except Refusal as refusal:
        status = refusal.status()
        try:
            context.abort_with_status(status)
        except NotImplementedError:
            # grpc_testing lacks abort_with_status and its abort drops trailing metadata, so
            # there the status (with its ErrorInfo) is set and the call ends normally.
            context.set_code(status.code)
            context.set_details(status.details)
            context.set_trailing_metadata(status.trailing_metadata)
            return None  # type: ignore[return-value]
        raise  # abort_with_status always raises; this line only tells type checkers so


def add_to_server(
    servicer: RulesServicer,
    server: Any,
    max_request_bytes: int | None = None,
    more: Mapping[str, grpc.RpcMethodHandler[Any, Any]] | None = None,
) -> None:
    """Register a servicer on a server, with never-raising request readers, and `more` method
    handlers of the same service (BatchApply).

    Requests larger than `max_request_bytes` are refused with REQUEST_TOO_LARGE.
    """
    handlers = {
        name: grpc.unary_unary_rpc_method_handler(
            getattr(servicer, name),
            request_deserializer=_reader(request_type, max_request_bytes),
            response_serializer=RESPONSE_SERIALIZERS.get(name),
        )
        for name, (request_type, _) in METHODS.items()
    }
    handlers.update(more or {})
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE_NAME, handlers),))
    server.add_registered_method_handlers(SERVICE_NAME, handlers)
