"""The observer of calls, the one writer of the grpc_server_* series, and the interceptor that
feeds it the calls of other services (health, reflection).

A MethodObserver counts and times a method's calls (the standard grpc_server_* series and the
refusal counter, through the process's metrics Tally) and writes one log line per call.
RulesService calls reach it from the servicer (`servicer.serve`) with their outcome and facts
as values; calls it counts without a log line (refused at admission, ended before their work
started, batch items) from admission and the batch. Calls of RulesService are logged at info,
a failure (INTERNAL) at error with its traceback; health checks and reflection at debug, so
probes do not drown the log. Each method's observer (and wrapped handler) is built on its first
call and reused, so a call pays only for what it observes.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from dataclasses import astuple, dataclass, field
from time import perf_counter
from typing import TYPE_CHECKING, Any

import grpc

from service import outcomes
from service.errors import Failure
from service.grace import Grace, seen_by_client
from service.logs import Logger
from service.metrics import MethodTally, Tally
from service.outcomes import Facts, Outcome
from service.servicer import SERVICE_NAME

if TYPE_CHECKING:  # imported by workers with tracing on only
    from service.tracing import Tracing

_RULES_PREFIX = f"/{SERVICE_NAME}/"
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
        tally = self.metrics.method(*astuple(kind)) if self.metrics is not None else None
        return MethodObserver(self, kind, tally)

    def unary(self, grpc_service: str, grpc_method: str) -> MethodObserver:
        """The observer of one unary method's calls."""
        return self.method(CallKind("UNARY", grpc_service, grpc_method))


class MethodObserver:
    """Records the calls of one method; what does not change between calls is looked up once."""

    __slots__ = ("_error", "_grace", "_log", "_name", "_ours", "_tallied", "_tally")

    def __init__(self, observer: CallObserver, kind: CallKind, tally: MethodTally | None) -> None:
        self._tally = observer.metrics
        self._tallied = tally
        self._grace = observer.grace
        self._ours = kind.grpc_service == SERVICE_NAME
        # Calls of RulesService are logged at info; health checks and reflection at debug.
        level = logging.INFO if self._ours else logging.DEBUG
        logger = observer.logger
        enabled = getattr(logger, "is_enabled_for", None)
        self._log = None
        if enabled is None or enabled(level):
            self._log = logger.info if self._ours else logger.debug
        self._error = logger.error
        if observer.tracing is not None and self._ours:
            # Only traced methods pay for it: the span gets the line's facts, the line its ids.
            self._log = observer.tracing.annotating(self._log)
            self._error = observer.tracing.annotating(self._error)
        self._name = f"{kind.grpc_service}/{kind.grpc_method}"

    def started(self) -> float:
        """Count a call as started; return its start time."""
        if self._tallied is not None:
            self._tally.started(self._tallied)  # type: ignore[union-attr]
        return perf_counter()

    def finished(self, start: float, context: Context, outcome: Outcome, facts: Facts) -> None:
        """Count, time and log a RulesService call that its handler ended with `outcome`."""
        # Observation never decides how a call ends: a failure here must not turn an answer
        # into UNKNOWN, so it is dropped (the counters and log simply miss this call). A plain
        # try costs nothing per call; contextlib.suppress builds a context manager each time.
        try:
            # Ended already (deadline, client gone, cut at the end of the grace): its client
            # saw that, not what the handler made.
            if context.is_active():
                code = outcomes.code_name(outcome)
            else:
                code = seen_by_client(context, self._grace).name
            error = outcome.error if isinstance(outcome, Failure) else None
            self._record(start, context, code, outcomes.reason(outcome), facts=facts, error=error)
        except Exception:
            pass

    def ended(self, start: float, context: Context, code: grpc.StatusCode) -> None:
        """Count, time and log a call of another service (health, reflection) as it ended."""
        try:  # noqa: SIM105
            self._record(start, context, code.name, None, facts=None, error=None)
        except Exception:
            pass

    def counted(self, code: str, reason: str | None, seconds: float = 0.0) -> None:
        """Count a call that gets no log line: refused at admission, ended before its work
        started, or a batch item (its batch's line counts it)."""
        if self._tallied is not None:
            self._tally.started(self._tallied)  # type: ignore[union-attr]
            self._tally.finished(self._tallied, code, seconds, reason)  # type: ignore[union-attr]

    def failed(self, context: Context, failure: Failure) -> None:
        """Log the failure of a batch item (its batch's line counts it) with its traceback."""
        try:  # noqa: SIM105
            self._error(
                "batch item failed",
                method=self._name,
                code=failure.code.name,
                request_id=_request_id(context.invocation_metadata()),
                exc_info=failure.error,
            )
        except Exception:
            pass

    def _record(
        self,
        start: float,
        context: Context,
        code: str,
        reason: str | None,
        *,
        facts: Facts | None,
        error: BaseException | None,
    ) -> None:
        duration = perf_counter() - start
        if self._tallied is not None:
            self._tally.finished(self._tallied, code, duration, reason)  # type: ignore[union-attr]
        log = self._log if error is None else self._error
        if log is None:
            return
        fields = {} if facts is None else facts.fields()  # only for a line that is written
        if error is not None:
            fields["exc_info"] = error
        log(
            "rpc",
            method=self._name,
            code=code,
            reason=reason,
            duration_ms=round(duration * 1000, 3),
            request_id=_request_id(context.invocation_metadata()),
            **fields,
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


class _Wrapped:
    """The observed handlers built so far, by method: rebuilt only if grpc's handler changes."""

    def __init__(self) -> None:
        self._by_method: dict[str, tuple[Handler, Handler]] = {}

    def get(self, method: str, handler: Handler, build: Callable[[], Handler]) -> Handler:
        """The observed form of `handler`, built by `build` the first time it is met."""
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
        self._wrapped = _Wrapped()

    def intercept_service(
        self, continuation: Callable[[Any], Handler], handler_call_details: Any
    ) -> Handler:
        """Wrap the method's behaviour so that its outcome is observed."""
        handler = continuation(handler_call_details)
        method = handler_call_details.method
        if handler is None or method.startswith(_RULES_PREFIX):
            return handler
        return self._wrapped.get(method, handler, lambda: self._observed(method, handler))

    def _observed(self, method: str, handler: Handler) -> Handler:
        observer = self._observer.method(call_kind(method, handler))
        grace = self._observer.grace
        inner = _behaviour(handler)
        if not handler.response_streaming:

            def single(request: Any, context: Context) -> Any:
                start = observer.started()
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
                    observer.ended(start, context, code)

            return _rebuild(handler, single)

        if getattr(inner, "experimental_non_blocking", False):
            return _rebuild(handler, _non_blocking(inner, observer, grace))

        def stream(request: Any, context: Context) -> Iterator[Any]:
            start = observer.started()
            failed = True
            try:
                yield from inner(request, context)
                failed = False
            finally:
                code = _stream_code(context, failed, not context.is_active())
                observer.ended(start, context, code)

        return _rebuild(handler, stream)


def _non_blocking(inner: Callable[..., Any], observer: MethodObserver, grace: Grace) -> Any:
    """A non-blocking streaming behaviour (health Watch) observed without blocking: it returns
    at once and sends its answers through grpc's callback, so it holds no thread while its
    client watches; the call is recorded when it ends."""

    def watched(request: Any, context: Context, send_response_callback: Any = None) -> None:
        start = observer.started()

        def ended() -> None:
            observer.ended(start, context, seen_by_client(context, grace))

        if not context.add_callback(ended):  # ended already
            ended()
            return
        inner(request, context, send_response_callback=send_response_callback)

    watched.experimental_non_blocking = True  # type: ignore[attr-defined]
    watched.experimental_thread_pool = getattr(inner, "experimental_thread_pool", None)  # type: ignore[attr-defined]
    return watched
