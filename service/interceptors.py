"""Server interceptors that count, time and log every call (sync and asyncio flavours).

Both flavours feed one CallObserver, which updates the standard grpc_server_* series and the
refusal counter and writes one log line per call. Calls of RulesService are logged at info;
health checks and reflection at debug, so probes do not drown the log.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass
from time import perf_counter
from typing import Any

import grpc
from basra.v1 import rules_pb2 as pb

from service import errors
from service.logs import Logger
from service.metrics import Metrics
from service.servicer import SERVICE_NAME

REQUEST_ID_KEY = "x-request-id"
MAX_REQUEST_ID_CHARS = 128

Metadata = Sequence[tuple[str, str | bytes]] | None
# grpc's handler and context types are generic only in the stubs; calls see plain objects.
Handler = Any
Context = Any


@dataclass(frozen=True, slots=True)
class CallKind:
    """Labels of one RPC method."""

    grpc_type: str
    grpc_service: str
    grpc_method: str


def call_kind(full_method: str, handler: Handler) -> CallKind:
    """Return the labels of a method from its full name ("/pkg.Service/Method") and handler."""
    service, _, method = full_method.lstrip("/").rpartition("/")
    if handler.request_streaming and handler.response_streaming:
        kind = "BIDI_STREAM"
    elif handler.request_streaming:
        kind = "CLIENT_STREAM"
    elif handler.response_streaming:
        kind = "SERVER_STREAM"
    else:
        kind = "UNARY"
    return CallKind(kind, service or "unknown", method)


def _request_id(metadata: Metadata) -> str | None:
    for key, value in metadata or ():
        if key == REQUEST_ID_KEY:
            text = value.decode("utf-8", "replace") if isinstance(value, bytes) else value
            return text[:MAX_REQUEST_ID_CHARS]
    return None


def _facts(request: object, response: object) -> dict[str, int]:
    """The seq and seat a call was about; only these numbers, never cards or the seed."""
    facts: dict[str, int] = {}
    if isinstance(
        request,
        pb.ApplyRequest | pb.LegalMovesRequest | pb.PlayerViewRequest | pb.SuggestMoveRequest,
    ):
        if request.HasField("state"):
            facts["seq"] = request.state.seq
        if isinstance(request, pb.ApplyRequest) and request.action.HasField("seat"):
            facts["seat"] = request.action.seat
        elif isinstance(request, pb.PlayerViewRequest | pb.SuggestMoveRequest) and request.HasField(
            "seat"
        ):
            facts["seat"] = request.seat
    elif isinstance(response, pb.NewMatchResponse | pb.ApplyResponse | pb.ReplayResponse):
        facts["seq"] = response.state.seq
    return facts


@dataclass(frozen=True, slots=True)
class CallObserver:
    """Records the start and the end of calls in metrics and logs."""

    metrics: Metrics | None
    logger: Logger

    def started(self, kind: CallKind) -> float:
        """Count a call as started; return its start time."""
        if self.metrics is not None:
            self.metrics.started.labels(kind.grpc_type, kind.grpc_service, kind.grpc_method).inc()
        return perf_counter()

    def finished(
        self,
        kind: CallKind,
        start: float,
        context: Context,
        code: grpc.StatusCode,
        exchange: tuple[object, object] = (None, None),
    ) -> None:
        """Count, time and log a finished call; `exchange` is its (request, response)."""
        # Observation never decides how a call ends: a failure here must not turn an answer
        # into UNKNOWN, so it is dropped (the counters and log simply miss this call).
        with contextlib.suppress(Exception):
            self._record(kind, start, context, code, exchange)

    def _record(
        self,
        kind: CallKind,
        start: float,
        context: Context,
        code: grpc.StatusCode,
        exchange: tuple[object, object],
    ) -> None:
        duration = perf_counter() - start
        status = code.name
        reason = errors.reason_in(context.trailing_metadata()) if status != "OK" else None
        if self.metrics is not None:
            labels = (kind.grpc_type, kind.grpc_service, kind.grpc_method)
            self.metrics.handled.labels(*labels, status).inc()
            self.metrics.handling_seconds.labels(*labels).observe(duration)
            if reason is not None:
                self.metrics.refusals.labels(kind.grpc_method, reason).inc()
        log = self.logger.info if kind.grpc_service == SERVICE_NAME else self.logger.debug
        log(
            "rpc",
            method=f"{kind.grpc_service}/{kind.grpc_method}",
            code=status,
            reason=reason,
            duration_ms=round(duration * 1000, 3),
            request_id=_request_id(context.invocation_metadata()),
            **_facts(*exchange),
        )


def _code_of(context: Context, failed: bool) -> grpc.StatusCode:
    """The status a call ended with: as set by the servicer, else OK or UNKNOWN."""
    code = context.code()
    if code is not None:
        return code  # type: ignore[no-any-return]
    return grpc.StatusCode.UNKNOWN if failed else grpc.StatusCode.OK


def _stream_code(context: Context, failed: bool, cancelled: bool) -> grpc.StatusCode:
    """The status of a streaming call that may have ended because the client went away."""
    if failed and cancelled and context.code() is None:
        return grpc.StatusCode.CANCELLED
    return _code_of(context, failed)


def _rebuild(handler: Handler, behaviour: Callable[..., Any]) -> Handler:
    """Return a method handler of the same kind and serializers around another behaviour."""
    if handler.request_streaming and handler.response_streaming:
        make = grpc.stream_stream_rpc_method_handler
    elif handler.request_streaming:
        make = grpc.stream_unary_rpc_method_handler
    elif handler.response_streaming:
        make = grpc.unary_stream_rpc_method_handler
    else:
        make = grpc.unary_unary_rpc_method_handler
    return make(behaviour, handler.request_deserializer, handler.response_serializer)


def _behaviour(handler: Handler) -> Callable[..., Any]:
    """Return the one behaviour a method handler holds."""
    return (  # type: ignore[no-any-return]
        handler.unary_unary or handler.unary_stream or handler.stream_unary or handler.stream_stream
    )


class ObservingInterceptor(grpc.ServerInterceptor):  # type: ignore[type-arg]
    """Sync-server interceptor feeding a CallObserver."""

    def __init__(self, observer: CallObserver) -> None:
        self._observer = observer

    def intercept_service(
        self, continuation: Callable[[Any], Handler], handler_call_details: Any
    ) -> Handler:
        """Wrap the method's behaviour so that its outcome is observed."""
        handler = continuation(handler_call_details)
        if handler is None:
            return None
        kind = call_kind(handler_call_details.method, handler)
        observer = self._observer
        inner = _behaviour(handler)
        if not handler.response_streaming:

            def single(request: Any, context: Context) -> Any:
                start = observer.started(kind)
                response, failed = None, True
                try:
                    response = inner(request, context)
                    failed = False
                    return response
                finally:
                    code = _code_of(context, failed)
                    observer.finished(kind, start, context, code, (request, response))

            return _rebuild(handler, single)

        def stream(request: Any, context: Context) -> Iterator[Any]:
            start = observer.started(kind)
            failed = True
            try:
                yield from inner(request, context)
                failed = False
            finally:
                code = _stream_code(context, failed, not context.is_active())
                observer.finished(kind, start, context, code)

        return _rebuild(handler, stream)


class AsyncObservingInterceptor(grpc.aio.ServerInterceptor):  # type: ignore[type-arg]
    """Asyncio-server interceptor feeding a CallObserver."""

    def __init__(self, observer: CallObserver) -> None:
        self._observer = observer

    async def intercept_service(
        self,
        continuation: Callable[[Any], Awaitable[Handler]],
        handler_call_details: Any,
    ) -> Handler:
        """Wrap the method's behaviour so that its outcome is observed."""
        handler = await continuation(handler_call_details)
        if handler is None:
            return None
        kind = call_kind(handler_call_details.method, handler)
        observer = self._observer
        inner = _behaviour(handler)
        if inspect.isasyncgenfunction(inner):

            async def stream(request: Any, context: Context) -> AsyncIterator[Any]:
                start = observer.started(kind)
                failed = True
                try:
                    async for item in inner(request, context):
                        yield item
                    failed = False
                finally:
                    code = _stream_code(context, failed, context.cancelled())
                    observer.finished(kind, start, context, code)

            return _rebuild(handler, stream)

        # Unary methods, and streaming ones written with context.write (health Watch).
        async def single(request: Any, context: Context) -> Any:
            start = observer.started(kind)
            response, failed = None, True
            try:
                response = await inner(request, context)
                failed = False
                return response
            finally:
                code = _stream_code(context, failed, context.cancelled())
                exchange = (None, None) if handler.response_streaming else (request, response)
                observer.finished(kind, start, context, code, exchange)

        return _rebuild(handler, single)
