"""The observer of calls, the one path from a call's end to its metrics, its log line and its
span; and the interceptor that feeds it the calls of other services (health, reflection).

A MethodObserver counts and times a method's calls (the standard grpc_server_* series and the
refusal counter, through the process's metrics Tally), writes one log line per call and, with
tracing, gives the call's span how it ended. Every call reaches it as one value,
`outcomes.Ended`, through `record` (a call with a log line) or `count` (a call with no line and
no span of its own: refused at admission, ended before its work started, a batch item, from
admission and the batch). Neither reads a gRPC context: the caller says how the call ended and
passes its request metadata, so another transport calls the same two. The transport a call came
by is read from that metadata: basra-gateway (the HTTP/JSON port, docs/http.md) marks its calls
`basra-transport: http`, which becomes the label transport="http" of the call's grpc_server_*
series and the field `transport` of its log line ("grpc" for every other call). The gRPC callers:
`finished`, which the servicer (`servicer.serve`) gives a RulesService call's outcome and
context, and the interceptor here for other services. Calls of RulesService are logged at info, a
failure (INTERNAL) at error with its traceback; health checks and reflection at debug, so
probes do not drown the log. Each method's observer (and wrapped handler) is built on its first
call and reused, so a call pays only for what it observes.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from time import perf_counter
from typing import TYPE_CHECKING, Any

import grpc

from service import grpc_surface, outcomes
from service.errors import Failure
from service.grace import Grace, seen_by_client
from service.logs import Logger
from service.metrics import MethodTally, Tally
from service.outcomes import Ended, Facts, Outcome
from wire.contract import PREFIX, SERVICE_NAME

if TYPE_CHECKING:  # imported by workers with tracing on only
    from service.tracing import Tracing

REQUEST_ID_KEY = "x-request-id"
MAX_REQUEST_ID_CHARS = 128
# The metadata by which basra-gateway marks the calls it makes for HTTP callers, and the values
# of the `transport` label (any other value of the key counts as gRPC: the label stays bounded).
TRANSPORT_KEY = "basra-transport"
GRPC = "grpc"
HTTP = "http"
TRANSPORTS = (GRPC, HTTP)

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


def transport_of(metadata: Metadata) -> str:
    """The transport a call came by: "http" when basra-gateway marked it, else "grpc"."""
    for key, value in metadata or ():
        if key == TRANSPORT_KEY:
            return HTTP if value == HTTP else GRPC
    return GRPC


def metadata_of(context: Context) -> Metadata:
    """A call's request metadata, for observation only: None where its context has none."""
    if context is None:
        return None
    try:
        return context.invocation_metadata()  # type: ignore[no-any-return]
    except Exception:  # observation never decides how a call ends (see record)
        return None


def _request_id(metadata: Metadata) -> str | None:
    for key, value in metadata or ():
        if key == REQUEST_ID_KEY:
            text = value.decode("utf-8", "replace") if isinstance(value, bytes) else value
            return text[:MAX_REQUEST_ID_CHARS]
    return None


@dataclass(frozen=True, slots=True)
class CallObserver:
    """Records the start and the end of calls in metrics and logs (and spans, when tracing)."""

    metrics: Tally | None
    logger: Logger
    tracing: Tracing | None = None
    grace: Grace = field(default_factory=Grace)
    """The server's grace, begun by its stop: calls it cuts are recorded as UNAVAILABLE."""

    def method(self, kind: CallKind) -> MethodObserver:
        """The observer of one method's calls (build it once per method, not per call)."""
        tallies = None
        if self.metrics is not None:
            labels = (kind.grpc_type, kind.grpc_service, kind.grpc_method)
            tallies = {t: self.metrics.method(*labels, t) for t in TRANSPORTS}
        return MethodObserver(self, kind, tallies)

    def unary(self, grpc_service: str, grpc_method: str) -> MethodObserver:
        """The observer of one unary method's calls."""
        return self.method(CallKind("UNARY", grpc_service, grpc_method))


class MethodObserver:
    """Records the calls of one method; what does not change between calls is looked up once."""

    __slots__ = ("_error", "_log", "_name", "_tallied", "_tally", "_tracing", "grace")

    def __init__(
        self, observer: CallObserver, kind: CallKind, tallies: dict[str, MethodTally] | None
    ) -> None:
        self._tally = observer.metrics
        self._tallied = tallies
        """The method's tally by transport (None: no metrics)."""
        self.grace = observer.grace
        """The server's grace: a call it cuts is recorded as its client saw it (UNAVAILABLE)."""
        ours = kind.grpc_service == SERVICE_NAME
        # Calls of RulesService are logged at info; health checks and reflection at debug.
        level = logging.INFO if ours else logging.DEBUG
        logger = observer.logger
        enabled = getattr(logger, "is_enabled_for", None)
        self._log = None
        if enabled is None or enabled(level):
            self._log = logger.info if ours else logger.debug
        self._error = logger.error
        # Only RulesService calls have spans, and only traced methods pay for them.
        self._tracing = observer.tracing if ours else None
        self._name = f"{kind.grpc_service}/{kind.grpc_method}"

    def started(self, context: Context = None) -> float:
        """Count a call (by the transport its `context`'s metadata names) as started; its
        start time."""
        if self._tallied is not None:
            transport = transport_of(metadata_of(context))
            self._tally.started(self._tallied[transport])  # type: ignore[union-attr]
        return perf_counter()

    def record(self, start: float, end: Ended, metadata: Metadata) -> None:
        """The one path from a call's end to its counts, its span and its log line: count and
        time the call started at `start`, give its span how it ended (the line gets the span's
        ids), write its line (with its request id and transport, from `metadata`)."""
        # Observation never decides how a call ends: a failure here must not turn an answer
        # into UNKNOWN, so it is dropped (the counters and log simply miss this call). A plain
        # try costs nothing per call; contextlib.suppress builds a context manager each time.
        try:
            seconds = perf_counter() - start
            transport = transport_of(metadata)
            self._count(end, seconds, transport)
            ids = self._tracing.mark(end) if self._tracing is not None else None
            log = self._log if end.error is None else self._error
            if log is None:
                return
            fields = {} if end.facts is None else end.facts.fields()  # only for a line written
            if end.error is not None:
                fields["exc_info"] = end.error
            if ids:
                fields.update(ids)
            log(
                "rpc",
                method=self._name,
                code=end.code,
                reason=end.reason,
                duration_ms=round(seconds * 1000, 3),
                request_id=_request_id(metadata),
                transport=transport,
                **fields,
            )
        except Exception:
            pass

    def finished(self, start: float, context: Context, outcome: Outcome, facts: Facts) -> None:
        """Record a RulesService call that its handler ended with `outcome`, as its gRPC client
        saw it: a call that had ended already (deadline, client gone, cut at the end of the
        grace) is recorded with the code its client saw, not the handler's."""
        try:
            seen = None if context.is_active() else seen_by_client(context, self.grace).name
            self.record(start, outcomes.ended(outcome, facts, seen), context.invocation_metadata())
        except Exception:  # observation never decides how a call ends (see record)
            pass

    def count(self, end: Ended, seconds: float = 0.0, metadata: Metadata = None) -> None:
        """Count a call that gets no log line and no span of its own: refused at admission,
        ended before its work started, or a batch item (its batch's line and span are the
        call's, and its line counts the item); by the transport its `metadata` names."""
        transport = transport_of(metadata)
        if self._tallied is not None:
            self._tally.started(self._tallied[transport])  # type: ignore[union-attr]
        self._count(end, seconds, transport)

    def _count(self, end: Ended, seconds: float, transport: str) -> None:
        if self._tallied is not None:
            tallied = self._tallied[transport]
            self._tally.finished(tallied, end.code, seconds, end.reason)  # type: ignore[union-attr]

    def item_failed(self, failure: Failure, metadata: Metadata) -> None:
        """Log the failure of a batch item with its traceback (its batch's line counts it);
        with tracing, the line carries the call's trace ids."""
        try:
            ids = self._tracing.ids() if self._tracing is not None else {}
            self._error(
                "batch item failed",
                method=self._name,
                code=failure.code.name,
                request_id=_request_id(metadata),
                exc_info=failure.error,
                **ids,
            )
        except Exception:
            pass


def _code_of(context: Context, failed: bool) -> grpc.StatusCode:
    """The status a call ended with: as set by the servicer, else OK or UNKNOWN."""
    code = grpc_surface.code_set(context)
    if code is not None:
        return code
    return grpc.StatusCode.UNKNOWN if failed else grpc.StatusCode.OK


def _stream_code(context: Context, failed: bool, cancelled: bool) -> grpc.StatusCode:
    """The status of a streaming call that may have ended because the client went away."""
    if failed and cancelled and grpc_surface.code_set(context) is None:
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


class HandlerCache:
    """The handlers an interceptor built so far, by method, each from grpc's handler of that
    method: rebuilt only if grpc's handler changes (with tracing on, the instrumentation's
    interceptor hands a new one to the interceptors outside it on every call)."""

    def __init__(self) -> None:
        self._by_method: dict[str, tuple[Handler, Handler]] = {}

    def get(self, method: str, handler: Handler, build: Callable[[], Handler]) -> Handler:
        """What `build` makes of `handler`, built the first time it is met."""
        known = self._by_method.get(method)
        if known is not None and known[0] is handler:
            return known[1]
        wrapped = build()
        self._by_method[method] = (handler, wrapped)  # a race only builds it twice
        return wrapped


class ObservingInterceptor(grpc.ServerInterceptor):  # type: ignore[type-arg]
    """The interceptor feeding a CallObserver the calls of other services than RulesService
    (whose servicer observes its own); each method's wrapped handler is built once."""

    def __init__(self, observer: CallObserver) -> None:
        self._observer = observer
        self._wrapped = HandlerCache()

    def intercept_service(
        self, continuation: Callable[[Any], Handler], handler_call_details: Any
    ) -> Handler:
        """Wrap the method's behaviour so that its outcome is observed."""
        handler = continuation(handler_call_details)
        method = handler_call_details.method
        if handler is None or method.startswith(PREFIX):
            return handler
        return self._wrapped.get(method, handler, lambda: self._observed(method, handler))

    def _observed(self, method: str, handler: Handler) -> Handler:
        observer = self._observer.method(call_kind(method, handler))
        grace = self._observer.grace
        inner = _behaviour(handler)
        if not handler.response_streaming:

            def single(request: Any, context: Context) -> Any:
                start = observer.started(context)
                failed = True
                try:
                    response = inner(request, context)
                    failed = False
                    return response
                finally:
                    # Ended already (deadline, client gone, cut at the end of the grace):
                    # its client saw that, not what the handler made.
                    if context.is_active():
                        code = _code_of(context, failed)
                    else:
                        code = seen_by_client(context, grace)
                    observer.record(start, Ended(code.name), context.invocation_metadata())

            return _rebuild(handler, single)

        if grpc_surface.is_non_blocking(inner):
            return _rebuild(handler, _non_blocking(inner, observer, grace))

        def stream(request: Any, context: Context) -> Iterator[Any]:
            start = observer.started(context)
            failed = True
            try:
                yield from inner(request, context)
                failed = False
            finally:
                code = _stream_code(context, failed, not context.is_active())
                observer.record(start, Ended(code.name), context.invocation_metadata())

        return _rebuild(handler, stream)


def _non_blocking(inner: Callable[..., Any], observer: MethodObserver, grace: Grace) -> Any:
    """A non-blocking streaming behaviour (health Watch) observed without blocking: it returns
    at once and sends its answers through grpc's callback, so it holds no thread while its
    client watches; the call is recorded when it ends."""

    @grpc_surface.non_blocking
    def watched(request: Any, context: Context, send_response_callback: Any = None) -> None:
        start = observer.started(context)

        def ended() -> None:
            code = seen_by_client(context, grace)
            observer.record(start, Ended(code.name), context.invocation_metadata())

        if not context.add_callback(ended):  # ended already
            ended()
            return
        inner(request, context, send_response_callback)

    pool = grpc_surface.pool_of(inner)
    return watched if pool is None else grpc_surface.on_pool(watched, pool)
