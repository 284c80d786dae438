# ruff: noqa: N802 (method names are the RPC names that grpc looks up)
"""The RulesService servicer, its registration on a server, and `respond`, the one way through
a call.

`respond` runs a handler (which knows no gRPC) and returns what the call came to, as a value:
the encoded response, a Refusal, or a Failure (an exception nobody anticipated). `serve` turns
that value into how the call ended (outcomes.ended), gives it to the call's observer (metrics,
log line, span: `MethodObserver.record`) and ends the call with it; BatchApply runs each of
its items through the same `respond`.

Registration reads request bodies with a reader that never raises, because grpc would answer
an unreadable body with INTERNAL; `respond` refuses it with INVALID_ARGUMENT instead. The
handlers answer with the encoded response, so the response serializer is the identity.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

import grpc
from basra.v1 import rules_pb2_grpc
from google.protobuf.message import Message

from engine import RuleError
from service import deadlines, errors, grpc_surface
from service.errors import Failure, Refusal, ServiceReason
from service.handlers import Handlers
from service.outcomes import Facts, Outcome
from wire import contract

if TYPE_CHECKING:  # only the server's builder, which imports both, hands an observer in
    from service.interceptors import CallObserver, MethodObserver

SERVICE_NAME = contract.SERVICE_NAME
"""The name the servicer registers its methods under (wire/contract.py holds it)."""
METHODS: dict[str, contract.Method] = {
    name: method for name, method in contract.METHODS.items() if name != contract.BATCH_APPLY
}
"""The methods the servicer answers, each with its handler (the handlers answer with the
response type's encoding); BatchApply is the batch's (service/batch.py)."""

Handler = Callable[[Any, Facts], bytes]


@dataclass(frozen=True, slots=True)
class Unreadable:
    """A request body that does not parse as its message type."""

    message_type: str
    size: int
    limit: int | None = None
    """The configured maximum when the body was refused for its size, else None."""


def reader(
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
    handler: Handler, request: Any, facts: Facts, seconds_left: float | None = None
) -> Outcome:
    """Run a handler; return its answer, its refusal, or the Failure of an exception nobody
    anticipated. A call with no time left (`seconds_left`: its caller's, None for no deadline)
    is refused, not run."""
    late = deadlines.expired(seconds_left)
    if late is not None:
        return late
    if isinstance(request, Unreadable) and request.limit is not None:
        return errors.refusal(
            ServiceReason.REQUEST_TOO_LARGE,
            f"The request has {request.size} bytes; this server takes at most {request.limit}.",
            size=request.size,
            max_bytes=request.limit,
        )
    if isinstance(request, Unreadable):
        return errors.refusal(
            ServiceReason.MALFORMED_REQUEST,
            f"The request body is not a valid {request.message_type} message.",
            message_type=request.message_type,
            size=request.size,
        )
    try:
        return handler(request, facts)
    except Refusal as refusal:
        return refusal
    except RuleError as error:
        return errors.from_rule_error(error)
    except Exception as error:  # a bug of ours: INTERNAL, logged with its traceback
        return Failure(error)


class RulesServicer(rules_pb2_grpc.RulesServiceServicer):
    """Servicer for grpc's thread-pool server; with an observer, it records every call."""

    def __init__(self, handlers: Handlers, observer: CallObserver | None = None) -> None:
        self._handlers = handlers
        self._observer = observer
        self._observed = {name: self.observed(name) for name in METHODS}

    def observed(self, method: str) -> MethodObserver | None:
        """The observer of one method's calls (None without an observer)."""
        if self._observer is None:
            return None
        return self._observer.unary(SERVICE_NAME, method)

    def NewMatch(self, request: Any, context: grpc.ServicerContext) -> bytes:
        """Start a match."""
        return serve(self._observed["NewMatch"], self._handlers.new_match, request, context)

    def Apply(self, request: Any, context: grpc.ServicerContext) -> bytes:
        """Apply one action."""
        return serve(self._observed["Apply"], self._handlers.apply, request, context)

    def LegalMoves(self, request: Any, context: grpc.ServicerContext) -> bytes:
        """List the legal moves."""
        return serve(self._observed["LegalMoves"], self._handlers.legal_moves, request, context)

    def PlayerView(self, request: Any, context: grpc.ServicerContext) -> bytes:
        """Return one seat's view."""
        return serve(self._observed["PlayerView"], self._handlers.player_view, request, context)

    def Replay(self, request: Any, context: grpc.ServicerContext) -> bytes:
        """Replay a match."""
        return serve(self._observed["Replay"], self._handlers.replay, request, context)

    def SuggestMove(self, request: Any, context: grpc.ServicerContext) -> bytes:
        """Suggest a move for the seat to move."""
        suggest = partial(self._handlers.suggest_move, seconds_left=context.time_remaining())
        return serve(self._observed["SuggestMove"], suggest, request, context)


def serve(
    observed: MethodObserver | None, handler: Handler, request: Any, context: grpc.ServicerContext
) -> bytes:
    """Run one call: respond, record how it ended (with `observed`), end the call with it."""
    start = 0.0 if observed is None else observed.started(context)
    facts = Facts()
    outcome = respond(handler, request, facts, context.time_remaining())
    if observed is not None:
        observed.finished(start, context, outcome, facts)
    if isinstance(outcome, bytes):
        return outcome
    grpc_surface.abort_with(context, outcome.status())
    return None  # type: ignore[return-value]  # grpc_testing's context: the status is set


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
            getattr(servicer, name), request_deserializer=reader(request_type, max_request_bytes)
        )
        for name, (request_type, _) in METHODS.items()
    }
    handlers.update(more or {})
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE_NAME, handlers),))
    server.add_registered_method_handlers(SERVICE_NAME, handlers)
