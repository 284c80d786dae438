"""OpenTelemetry traces of RulesService calls, on with --tracing / BASRA_TRACING (off by default).

Only a worker with tracing on imports this module, and with it the OpenTelemetry packages;
with tracing off nothing here runs and the per-call path is the untraced one, unchanged.

Each worker process builds its own TracerProvider after it is spawned (`Tracing.start`): the
resource, the sampler and the OTLP/gRPC exporter are configured by the standard OTEL_*
variables (OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES, OTEL_TRACES_SAMPLER and _ARG,
OTEL_EXPORTER_OTLP_ENDPOINT and the exporter's others, OTEL_BSP_* for the batching), and the
caller's context is read from the call's metadata by the propagators OTEL_PROPAGATORS names
(W3C traceparent and baggage by default). Spans leave in batches from a background thread, so
a slow or absent collector never holds a call; on a graceful stop the worker sends what is
left within FLUSH_SECONDS.

The server spans come from opentelemetry-instrumentation-grpc's interceptor, placed outside
the service's own (server.py), so the servicer runs inside the span. The call's observer
(service/interceptors.py) then gives the span how the call ended, the value its counts and
log line take (`mark`, given the call's outcomes.Ended): the status code (the instrumentation
records none for a refusal sent with abort_with_status, which the server uses), the refusal's
reason, seq and seat; never a card, the deck or the seed, as in the logs; and for a failed
call (INTERNAL) an exception event with the exception's type and stack, not its message. The
log line gets the span's trace and span ids in return.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import logging
import os
import threading
import traceback
from collections.abc import Iterator
from typing import Any

import grpc
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.instrumentation.grpc import server_interceptor
from opentelemetry.sdk.resources import OTELResourceDetector, Resource
from opentelemetry.sdk.trace import SpanProcessor
from opentelemetry.sdk.trace import TracerProvider as SdkTracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import (
    NoOpTracer,
    Span,
    SpanContext,
    Status,
    StatusCode,
    Tracer,
    TracerProvider,
    get_current_span,
)

from service.logs import Logger
from service.outcomes import Ended
from wire.contract import PREFIX

# The service's name and version when OTEL_SERVICE_NAME / OTEL_RESOURCE_ATTRIBUTES give none.
DEFAULT_SERVICE_NAME = "basra-rules"
# How long a stopping worker may spend sending its last spans: well inside the margin the
# supervisor gives a worker past its grace (service.workers.EXIT_MARGIN_SECONDS).
FLUSH_SECONDS = 3.0
# The attribute the instrumentation gives the status code, and the service's own attributes.
STATUS_CODE_ATTRIBUTE = "rpc.grpc.status_code"
REASON_ATTRIBUTE = "basra.reason"
SEQ_ATTRIBUTE = "basra.seq"
SEAT_ATTRIBUTE = "basra.seat"
# Codes that mean the server failed; a server span is marked Error for these only, as the
# gRPC semantic conventions ask. A refusal is the caller's error: its span keeps status Unset
# and carries its code and reason as attributes.
SERVER_ERRORS = frozenset(
    {
        grpc.StatusCode.UNKNOWN,
        grpc.StatusCode.DEADLINE_EXCEEDED,
        grpc.StatusCode.UNIMPLEMENTED,
        grpc.StatusCode.INTERNAL,
        grpc.StatusCode.UNAVAILABLE,
        grpc.StatusCode.DATA_LOSS,
    }
)
_CODES = {code.name: code for code in grpc.StatusCode}


def resource() -> Resource:
    """This worker's resource: the OTEL_* variables, then the service's name, version and pid."""
    given = OTELResourceDetector().detect().attributes
    ours: dict[str, str | int] = {"service.name": DEFAULT_SERVICE_NAME, "process.pid": os.getpid()}
    with contextlib.suppress(importlib.metadata.PackageNotFoundError):
        ours["service.version"] = importlib.metadata.version("basra-rules")
    return Resource.create({k: v for k, v in ours.items() if k not in given})


class _SpanWithoutExceptions:
    """A span that records no exception events and forwards everything else."""

    def __init__(self, span: Span) -> None:
        self._span = span

    def __getattr__(self, name: str) -> Any:
        return getattr(self._span, name)

    def record_exception(self, *args: Any, **kwargs: Any) -> None:
        """Record nothing: the call's code and reason say how it ended."""


class _Tracer(Tracer):
    """The provider's tracer, except that spans record no exception events.

    grpc ends a refused call by raising (abort_with_status), and the instrumentation records
    every such exception on the span: a stack trace whose chained exceptions hold the
    refusal's sentence, and for an unexpected error its message, either of which may name a
    card. The span already carries the code and the reason, so the exception adds nothing a
    reader needs.
    """

    def __init__(self, tracer: Tracer) -> None:
        self._tracer = tracer

    def start_span(self, *args: Any, **kwargs: Any) -> Span:
        """Start a span as the provider's tracer does."""
        return self._tracer.start_span(*args, **kwargs)

    @contextlib.contextmanager
    def start_as_current_span(self, *args: Any, **kwargs: Any) -> Iterator[Span]:  # type: ignore[override]
        """Start a current span that records no exception events."""
        kwargs["record_exception"] = False
        with self._tracer.start_as_current_span(*args, **kwargs) as span:
            yield _SpanWithoutExceptions(span)  # type: ignore[misc]


class _Provider(TracerProvider):
    """Hands the instrumentation tracers whose spans record no exception events."""

    def __init__(self, provider: TracerProvider) -> None:
        self._provider = provider

    def get_tracer(self, *args: Any, **kwargs: Any) -> Tracer:
        """The provider's tracer, wrapped."""
        return _Tracer(self._provider.get_tracer(*args, **kwargs))


def _traced(details: Any) -> bool:
    """Whether a call gets a span: RulesService calls do; health checks and reflection do not."""
    return str(details.method).startswith(PREFIX)


class _OpenTelemetryLogs(logging.Handler):
    """Hands the OpenTelemetry packages' own warnings (an unreachable collector, a full
    queue) to the service's logger, so they come out as JSON lines like every other line."""

    def __init__(self, logger: Logger) -> None:
        super().__init__(logging.WARNING)
        self._logger = logger

    def emit(self, record: logging.LogRecord) -> None:
        """Write one line for the record."""
        try:
            log = self._logger.error if record.levelno >= logging.ERROR else self._logger.warning
            log("tracing", logger=record.name, message=record.getMessage())
        except Exception:  # a log line must never take the worker down
            self.handleError(record)


def _exception_event(error: BaseException) -> dict[str, str]:
    """The attributes of a failed call's exception event: its type and where it was raised,
    not its message, which may name a card (the log line, kept by the operator, has it)."""
    return {
        "exception.type": type(error).__qualname__,
        "exception.stacktrace": "".join(traceback.format_tb(error.__traceback__)),
    }


class Tracing:
    """One worker's tracer provider and what the servers and interceptors take from it."""

    def __init__(self, provider: SdkTracerProvider) -> None:
        self.provider = provider
        self._instrumented = _Provider(provider)
        # With OTEL_SDK_DISABLED=true the SDK hands out tracers that make no span: the span a
        # call sees is then the caller's, from its traceparent, and nothing is exported.
        self.exporting = not isinstance(provider.get_tracer(__name__), NoOpTracer)

    @classmethod
    def start(cls, logger: Logger, processor: SpanProcessor | None = None) -> Tracing:
        """Set up this process's provider; spans go to `processor` (default: OTLP in batches)."""
        otel_logger = logging.getLogger("opentelemetry")
        for old in [h for h in otel_logger.handlers if isinstance(h, _OpenTelemetryLogs)]:
            otel_logger.removeHandler(old)  # one provider per process, one handler with it
        otel_logger.addHandler(_OpenTelemetryLogs(logger))
        otel_logger.propagate = False
        # The sampler comes from OTEL_TRACES_SAMPLER(_ARG) when none is given. The worker
        # flushes at its own stop, within a bound, instead of at interpreter exit.
        provider = SdkTracerProvider(resource=resource(), shutdown_on_exit=False)
        provider.add_span_processor(processor or BatchSpanProcessor(OTLPSpanExporter()))
        tracing = cls(provider)
        if not tracing.exporting:
            logger.warning(
                "tracing",
                message="OTEL_SDK_DISABLED is true: no span is made or sent; log lines carry "
                "the caller's trace_id alone",
            )
        return tracing

    def interceptor(self) -> Any:
        """The instrumentation's server interceptor (RulesService calls only)."""
        return server_interceptor(tracer_provider=self._instrumented, filter_=_traced)  # type: ignore[no-untyped-call]

    def mark(self, end: Ended) -> dict[str, Any]:
        """Give the current call's span how the call ended; return the span's ids for the
        call's log line.

        The span gets the code, the reason, seq and seat (the facts the line names: no card,
        no deck, no seed) and, for a failure, an exception event; whether or not the line is
        written at the configured level. The ids are W3C hex: `trace_id` (32 digits),
        `span_id` (16 digits), and `trace_sampled`, whether the span is recorded and
        exported. With the SDK disabled there is no span of the server's: the line gets the
        caller's `trace_id` alone, and claims no span id and no sampling.
        """
        span = get_current_span()
        context = span.get_span_context()
        if context.is_valid and self.exporting and span.is_recording():
            code = _CODES[end.code]
            attributes: dict[str, str | int] = {STATUS_CODE_ATTRIBUTE: code.value[0]}
            if end.reason:
                attributes[REASON_ATTRIBUTE] = end.reason
            facts = end.facts
            if facts is not None and facts.seq is not None:
                attributes[SEQ_ATTRIBUTE] = facts.seq
            if facts is not None and facts.seat is not None:
                attributes[SEAT_ATTRIBUTE] = facts.seat
            span.set_attributes(attributes)
            if code in SERVER_ERRORS:
                span.set_status(Status(StatusCode.ERROR, code.name))
            if end.error is not None:
                span.add_event("exception", _exception_event(end.error))
        return self._ids(context)

    def ids(self) -> dict[str, Any]:
        """The current call's span's ids for a log line of the call (see `mark`)."""
        return self._ids(get_current_span().get_span_context())

    def _ids(self, context: SpanContext) -> dict[str, Any]:
        if not context.is_valid:
            return {}
        ids: dict[str, Any] = {"trace_id": format(context.trace_id, "032x")}
        if self.exporting:
            ids["span_id"] = format(context.span_id, "016x")
            ids["trace_sampled"] = context.trace_flags.sampled
        return ids

    def stop(self, seconds: float = FLUSH_SECONDS) -> bool:
        """Send the spans still queued and stop; give up after `seconds`. True if it finished."""
        stopping = threading.Thread(target=self.provider.shutdown, name="tracing-stop", daemon=True)
        stopping.start()
        stopping.join(seconds)
        return not stopping.is_alive()
