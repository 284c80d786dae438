"""BatchApply: many Apply requests in one call, each answered exactly as a unary Apply would be.

A gRPC call costs the server more CPU than the work of one Apply (docs/service.md, "Batches");
a batch pays it once for its items. Each item goes through the unary path: the same request
reader (its own size bound, MALFORMED_REQUEST for its own bytes), the same handler (signing,
expected_seq, views, limits), the same refusals; its answer is the unary answer's bytes, its
refusal the bytes of the google.rpc.Status the unary call's details carry (`rich_status`, sent
as ItemStatus, which has its wire).

The request is read and the response written through wire mirrors: the batch messages with
every message field turned into bytes, built at import from the generated descriptors (their
field numbers are read from there, never written here). So an item's bytes reach the unary
reader as they came, and the unary answer's bytes are embedded as they were made: no item is
parsed twice or encoded again.

Admission counts items: the call holds one unit as any call; its other items take what room
the worker's bound has left, and the items past that room are refused OVERLOADED, as unary
calls arriving then would be. Each unit is given back as its item ends. The call's deadline
covers its items: an item that cannot start, and still be answered before the deadline, is
refused DEADLINE_EXPIRED, so the batch itself always answers in time with what it did.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from functools import partial
from time import perf_counter
from typing import Any

import grpc
from basra.v1 import rules_pb2 as pb
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import Message

from service import deadlines, errors, outcomes
from service.admission import Admission
from service.config import Config
from service.errors import Refusal, ServiceReason
from service.handlers import Handlers
from service.interceptors import CallObserver, Metadata, metadata_of
from service.outcomes import Facts, Outcome
from service.running_mean import RunningMean
from service.servicer import Unreadable, reader, respond, serve
from wire.contract import APPLY, BATCH_APPLY, SERVICE_NAME

MIRROR_PACKAGE = "basra.v1.wire"
# An item is not started unless the call's time left covers this many times the running mean
# of an item's time, plus SEND_SECONDS to send the answer: its answer must not be lost with
# the rest when the deadline ends the call.
ITEM_MARGIN = 2.0
SEND_SECONDS = 0.002
FIRST_ITEM_SECONDS = 0.0005
# Weight of the newest item in the running mean of an item's time.
ITEM_WEIGHT = 0.05


def _mirror_pool(descriptors: tuple[Any, ...]) -> descriptor_pool.DescriptorPool:
    """A pool of its own holding, for each descriptor, a message of the same name, fields and
    numbers, whose message fields are bytes (a message's encoding is a length-delimited field,
    as bytes are: both read and write the same wire)."""
    file = descriptor_pb2.FileDescriptorProto(
        name="basra/v1/wire_mirror.proto", package=MIRROR_PACKAGE, syntax="proto3"
    )
    for descriptor in descriptors:
        message = file.message_type.add()
        descriptor.CopyToProto(message)
        for field in message.field:
            if field.type == descriptor_pb2.FieldDescriptorProto.TYPE_MESSAGE:
                field.type = descriptor_pb2.FieldDescriptorProto.TYPE_BYTES
                field.ClearField("type_name")
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return pool


_POOL = _mirror_pool(
    (pb.BatchApplyRequest.DESCRIPTOR, pb.BatchApplyResponse.DESCRIPTOR, pb.ApplyResult.DESCRIPTOR)
)


def _mirror(descriptor: Any) -> Any:
    """The mirror class of a message (typed Any: it is made at run time, it has no stub)."""
    found = _POOL.FindMessageTypeByName(f"{MIRROR_PACKAGE}.{descriptor.name}")
    return message_factory.GetMessageClass(found)


RequestWire = _mirror(pb.BatchApplyRequest.DESCRIPTOR)
ResponseWire = _mirror(pb.BatchApplyResponse.DESCRIPTOR)
ResultWire = _mirror(pb.ApplyResult.DESCRIPTOR)


def too_many_items(items: int, limit: int) -> Refusal:
    """The refusal of a whole batch past the bound on its items."""
    return errors.refusal(
        ServiceReason.TOO_MANY_ITEMS,
        f"The batch has {items} requests; this server takes at most {limit} in one call.",
        items=items,
        max_items=limit,
    )


def _response_too_large(size: int, limit: int) -> Refusal:
    return errors.refusal(
        ServiceReason.RESPONSE_TOO_LARGE,
        f"The batch's answers would have passed {limit} bytes at {size}, the most this server "
        "sends in one call: send this request and the ones after it in another batch.",
        size=size,
        max_bytes=limit,
    )


class _ItemClock:
    """The running mean of an item's seconds on this worker."""

    def __init__(self) -> None:
        self._mean = RunningMean(ITEM_WEIGHT, FIRST_ITEM_SECONDS)
        self._lock = threading.Lock()

    def observe(self, seconds: float) -> None:
        with self._lock:
            self._mean.add(seconds)

    def too_late(self, seconds_left: float | None, slowest: float) -> bool:
        """Whether an item started now could not be answered before the deadline (`slowest`:
        the longest item of this batch so far, for a worker whose mean lags behind)."""
        if seconds_left is None:
            return False
        return seconds_left < ITEM_MARGIN * max(self._mean.value, slowest) + SEND_SECONDS


class BatchApply:
    """The BatchApply behaviour of the server."""

    def __init__(
        self,
        handlers: Handlers,
        *,
        admission: Admission,
        observer: CallObserver,
        max_items: int,
        max_item_bytes: int,
        max_response_bytes: int,
        shed: Callable[[int], None] = lambda refused: None,
    ) -> None:
        self._apply = handlers.apply
        self._admission = admission
        self._shed = shed
        self._tally = observer.metrics
        self._observed = observer.unary(SERVICE_NAME, BATCH_APPLY)
        self._item = observer.unary(SERVICE_NAME, APPLY)
        self._max_items = max_items
        self._read_item = reader(pb.ApplyRequest, max_item_bytes)
        self._max_response_bytes = max_response_bytes
        self._clock = _ItemClock()

    def __call__(self, request: Any, context: grpc.ServicerContext) -> bytes:
        """Answer every item of a batch, in order (a refusal of the whole call aborts it)."""
        return serve(self._observed, partial(self._run, context=context), request, context)

    def _run(self, request: Any, facts: Facts, context: grpc.ServicerContext) -> bytes:
        items = list(request.requests)
        facts.items = len(items)
        if self._tally is not None:
            self._tally.observe_batch(len(items))
        if len(items) > self._max_items:
            raise too_many_items(len(items), self._max_items)
        # The call holds one unit already (its first item's); the others take what is left.
        extra = self._admission.take(len(items) - 1) if len(items) > 1 else 0
        held = extra
        results: list[bytes] = []
        ended: Counter[str] = Counter()
        metadata = metadata_of(context)  # the items' transport is the call's
        size = 0
        slowest = 0.0
        full: Refusal | None = None  # once an answer did not fit, later items are not run
        try:
            for index, data in enumerate(items):
                start = perf_counter()
                outcome: Outcome
                if index > extra:
                    outcome = self._admission.overloaded()
                elif full is not None:
                    outcome = full
                else:
                    outcome = self._one(data, context, slowest)
                    slowest = max(slowest, perf_counter() - start)
                if 0 < index <= extra:  # this item's unit, taken for it alone
                    self._admission.release(1)
                    held -= 1
                if isinstance(outcome, bytes):
                    result = ResultWire(response=outcome).SerializeToString()
                    if size + len(result) > self._max_response_bytes:
                        full = outcome = _response_too_large(
                            size + len(result), self._max_response_bytes
                        )
                if not isinstance(outcome, bytes):
                    status = outcome.rich_status().SerializeToString()
                    result = ResultWire(status=status).SerializeToString()
                size += len(result)
                results.append(result)
                self._count(outcome, perf_counter() - start, ended, metadata)
        finally:
            if held:
                self._admission.release(held)
        if shed := ended[ServiceReason.OVERLOADED.value]:
            self._shed(shed)
        facts.outcomes = ended
        answer: bytes = ResponseWire(results=results).SerializeToString()
        return answer

    def _one(self, data: bytes, context: grpc.ServicerContext, slowest: float) -> Outcome:
        """One item through the unary path (`respond`): its answer's bytes, or how it ended."""
        left = context.time_remaining()
        if self._clock.too_late(left, slowest):
            return deadlines.past_deadline()
        start = perf_counter()
        outcome = respond(self._apply, self._read_item(data), Facts(), left)
        self._clock.observe(perf_counter() - start)
        if isinstance(outcome, errors.Failure):
            self._item.item_failed(outcome, context.invocation_metadata())
        return outcome

    def _count(
        self, outcome: Outcome, seconds: float, ended: Counter[str], metadata: Metadata
    ) -> None:
        """Count one item under the unary method's series, as a unary call would be."""
        end = outcomes.ended(outcome)
        ended[end.reason or end.code] += 1
        self._item.count(end, seconds, metadata)


def served(
    config: Config,
    handlers: Handlers,
    admission: Admission,
    observer: CallObserver,
    max_call_bytes: int,
    *,
    shed: Callable[[int], None],
) -> dict[str, grpc.RpcMethodHandler[Any, Any]]:
    """The batch method's handler, reading its body with a reader that never raises; a whole
    request, and a whole response, is held to `max_call_bytes` (its items to the unary bound)."""
    batch = BatchApply(
        handlers,
        admission=admission,
        observer=observer,
        max_items=config.max_batch_items,
        max_item_bytes=config.max_message_bytes,
        max_response_bytes=max_call_bytes,
        shed=shed,
    )
    read: Callable[[bytes], Message | Unreadable] = reader(RequestWire, max_call_bytes)
    return {BATCH_APPLY: grpc.unary_unary_rpc_method_handler(batch, request_deserializer=read)}
