"""A small OTLP/gRPC trace receiver on loopback: what a collector would be sent, kept to read.

It serves `opentelemetry.proto.collector.trace.v1.TraceService` (from opentelemetry-proto, the
messages every OTLP exporter sends) on a free loopback port, with a thread-pool grpcio server,
and keeps every span it is sent in a plain form: hex ids as in a W3C traceparent, attributes
as a dict of Python values, the resource's attributes beside each span. Tests and benchmarks
point a server's OTEL_EXPORTER_OTLP_ENDPOINT at `endpoint` and wait for spans with a deadline.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Mapping
from concurrent import futures
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.proto.common.v1 import common_pb2
from opentelemetry.proto.trace.v1 import trace_pb2

from testkit.ports import LOOPBACK

# Span kinds and status codes of the OTLP messages, by the names the specification gives them.
SERVER = trace_pb2.Span.SPAN_KIND_SERVER
STATUS_UNSET = trace_pb2.Status.STATUS_CODE_UNSET
STATUS_ERROR = trace_pb2.Status.STATUS_CODE_ERROR


def value_of(value: common_pb2.AnyValue) -> Any:
    """The Python value of an OTLP AnyValue (lists and maps included)."""
    kind = value.WhichOneof("value")
    if kind is None:
        return None
    if kind == "array_value":
        return [value_of(v) for v in value.array_value.values]
    if kind == "kvlist_value":
        return attributes_of(value.kvlist_value.values)
    return getattr(value, kind)


def attributes_of(pairs: Any) -> dict[str, Any]:
    """A repeated KeyValue as a dict."""
    return {pair.key: value_of(pair.value) for pair in pairs}


@dataclass(frozen=True)
class ReceivedSpan:
    """One span as a collector received it."""

    trace_id: str
    """32 hex digits, as in a traceparent."""
    span_id: str
    """16 hex digits."""
    parent_span_id: str
    """16 hex digits; "" for a root span."""
    name: str
    kind: int
    attributes: Mapping[str, Any]
    status_code: int
    status_message: str
    events: tuple[tuple[str, Mapping[str, Any]], ...]
    resource: Mapping[str, Any]

    def values(self) -> Iterator[Any]:
        """Every value the span carries: its attributes, its events' and its resource's."""
        yield self.name
        yield self.status_message
        yield from self.attributes.values()
        for name, attributes in self.events:
            yield name
            yield from attributes.values()
        yield from self.resource.values()


class Receiver(trace_service_pb2_grpc.TraceServiceServicer):
    """Keeps the spans of every Export call, for tests to read and wait for."""

    def __init__(self, keep: bool = True) -> None:
        self._spans: list[ReceivedSpan] = []
        self._arrived = threading.Condition()
        self._keep = keep
        self.count = 0
        """Spans received so far (kept or not)."""
        self.endpoint = ""
        """http://127.0.0.1:<port>, for OTEL_EXPORTER_OTLP_ENDPOINT (plaintext)."""

    def Export(  # noqa: N802 (the RPC's name)
        self, request: trace_service_pb2.ExportTraceServiceRequest, context: Any
    ) -> trace_service_pb2.ExportTraceServiceResponse:
        """Keep the request's spans (count them only, when not keeping)."""
        if not self._keep:
            with self._arrived:
                self.count += sum(
                    len(scope.spans) for rs in request.resource_spans for scope in rs.scope_spans
                )
            return trace_service_pb2.ExportTraceServiceResponse()
        received = []
        for resource_spans in request.resource_spans:
            resource = attributes_of(resource_spans.resource.attributes)
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    received.append(
                        ReceivedSpan(
                            trace_id=span.trace_id.hex(),
                            span_id=span.span_id.hex(),
                            parent_span_id=span.parent_span_id.hex(),
                            name=span.name,
                            kind=span.kind,
                            attributes=attributes_of(span.attributes),
                            status_code=span.status.code,
                            status_message=span.status.message,
                            events=tuple(
                                (event.name, attributes_of(event.attributes))
                                for event in span.events
                            ),
                            resource=resource,
                        )
                    )
        with self._arrived:
            self._spans.extend(received)
            self.count += len(received)
            self._arrived.notify_all()
        return trace_service_pb2.ExportTraceServiceResponse()

    def spans(self) -> list[ReceivedSpan]:
        """Every span received so far."""
        with self._arrived:
            return list(self._spans)

    def wait_for(
        self, matching: Callable[[ReceivedSpan], bool], count: int = 1, timeout: float = 30.0
    ) -> list[ReceivedSpan]:
        """Wait until `count` received spans match; return every match (raise at the deadline)."""
        deadline = time.monotonic() + timeout
        with self._arrived:
            while True:
                found = [span for span in self._spans if matching(span)]
                if len(found) >= count:
                    return found
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError(
                        f"{len(found)} of {count} matching spans within {timeout} s "
                        f"({len(self._spans)} received)"
                    )
                self._arrived.wait(remaining)


@contextmanager
def receiving(keep: bool = True) -> Iterator[Receiver]:
    """Serve a Receiver on a free loopback port until the block ends (`keep`: the spans, not
    just their count)."""
    receiver = Receiver(keep)
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4, thread_name_prefix="otlp"))
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(receiver, server)  # type: ignore[no-untyped-call]
    port = server.add_insecure_port(f"{LOOPBACK}:0")
    server.start()
    receiver.endpoint = f"http://{LOOPBACK}:{port}"
    try:
        yield receiver
    finally:
        server.stop(0).wait()
