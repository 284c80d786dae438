"""Every RPC of the contract called in process as a worker's server calls it, from request bytes
to response bytes, and the rules each outcome must keep: the one oracle of the fuzzers
(testkit/fuzz.py, testkit/atheris_target.py).

A call goes through the method handler the server registers for it (the never-raising request
reader, the servicer or BatchApply, `respond`, the abort with the refusal's status), with a
stand-in for grpc's ServicerContext. Its outcome must be one of:
- an answer that parses as the response type and fits the service's own size bound, for a
  request whose state the engine accepts; Apply, LegalMoves and PlayerView answers read back as
  the engine's values for the same request;
- a refusal with an allowed code, whose google.rpc.Status has that code and exactly one
  ErrorInfo (domain basra.v1, a known reason).
A BatchApply answer has one result per item, each the outcome a unary Apply of the item's bytes
has (the same response bytes, or the same status), but for the outcomes only a batch gives,
each where it may: OVERLOADED past the admission bound (and then every later item),
DEADLINE_EXPIRED under a deadline (and then every later item run), RESPONSE_TOO_LARGE once the
answers pass the call's bound (and then every later item run). Anything else (an exception
escaping the handler, INTERNAL, UNKNOWN, a units leak of the admission bound) is a finding.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import Any

import grpc
from basra.v1 import rules_pb2 as pb
from google.rpc import error_details_pb2, status_pb2  # type: ignore[import-untyped]

import engine
from clients.messages import event_from_proto
from service import batch, errors, reading
from service.admission import Admission
from service.config import Config
from service.errors import ServiceReason
from service.interceptors import CallObserver
from service.logs import make_logger
from service.server import RECEIVE_FACTOR, make_handlers, receive_limit
from service.servicer import RulesServicer
from testkit.registered import method_handlers
from testkit.rpcs import methods
from wire.actions import action_from_proto
from wire.contract import BATCH_APPLY

# The codes a refusal may end with, written out by hand (not read from service.errors) so
# that the fuzzers would catch a reason mapped to the wrong code.
ALLOWED = {
    grpc.StatusCode.INVALID_ARGUMENT,
    grpc.StatusCode.FAILED_PRECONDITION,
    grpc.StatusCode.ABORTED,
    grpc.StatusCode.UNAUTHENTICATED,
    grpc.StatusCode.RESOURCE_EXHAUSTED,
}
KNOWN = frozenset(errors.known_reasons())
BATCH = BATCH_APPLY
OVERLOADED = ServiceReason.OVERLOADED.value
EXPIRED = ServiceReason.DEADLINE_EXPIRED.value
TOO_LARGE = ServiceReason.RESPONSE_TOO_LARGE.value
# A call with a deadline may also end DEADLINE_EXCEEDED (DEADLINE_EXPIRED, DEADLINE_TOO_SHORT).
ALLOWED_WITH_DEADLINE = ALLOWED | {grpc.StatusCode.DEADLINE_EXCEEDED}
_CODES = {code.value[0]: code for code in grpc.StatusCode}


class Aborted(Exception):  # noqa: N818 (it is no error: grpc ends a call so)
    """The abort of a call: the status it ends with."""

    def __init__(self, status: grpc.Status) -> None:
        super().__init__(status.code)
        self.status = status


class Context:
    """What the handlers ask of grpc's ServicerContext: the time left (None: no deadline; with
    one, `step` seconds less at each asking, so that it runs out part-way through a batch), the
    metadata, and the abort that ends a call with its status."""

    def __init__(self, seconds: float | None = None, step: float = 0.0) -> None:
        self.deadline = seconds is not None
        self._left = seconds
        self._step = step

    def time_remaining(self) -> float | None:
        """The seconds left, a step fewer each time."""
        left = self._left
        if left is not None:
            self._left = left - self._step
        return left

    def invocation_metadata(self) -> tuple[()]:
        """No metadata."""
        return ()

    def is_active(self) -> bool:
        """The client is always there."""
        return True

    def abort_with_status(self, status: grpc.Status) -> None:
        """End the call with `status`, as grpc does: by raising."""
        raise Aborted(status)


@dataclass(frozen=True, slots=True)
class Ended:
    """How one call ended: OK with the response's bytes, or a code with the status's bytes."""

    code: grpc.StatusCode
    body: bytes = b""
    status: bytes = b""

    def rich(self) -> Any:
        """The google.rpc.Status of a refusal."""
        return status_pb2.Status.FromString(self.status)


class Worker:
    """The handlers one worker's server registers, every RPC of the contract among them, and the
    admission bound its batches take units from."""

    def __init__(self, config: Config | None = None) -> None:
        self.config = config or Config()
        self.contract = methods()
        self.handlers = make_handlers(self.config, None)
        self.log = io.StringIO()  # a batch item's failure is logged here (and found as INTERNAL)
        observer = CallObserver(None, make_logger("error", "json", self.log))
        self.admission = Admission(0)
        self.max_call_bytes = RECEIVE_FACTOR * self.config.max_message_bytes
        batched = batch.served(
            self.config,
            self.handlers,
            self.admission,
            observer,
            self.max_call_bytes,
            shed=lambda refused: None,
        )
        servicer = RulesServicer(self.handlers)
        self.registered = method_handlers(servicer, self.config.max_message_bytes, batched)
        missing = sorted(set(self.contract) - set(self.registered))
        if missing:
            raise AssertionError(f"the server registers no handler for {missing}")

    def call(self, method: str, data: bytes, context: Context | None = None) -> Ended:
        """One call of `method` with the request bytes `data`, as grpc makes it."""
        handler = self.registered[method]
        assert handler.request_deserializer is not None and handler.unary_unary is not None
        request = handler.request_deserializer(data)
        behaviour: Any = handler.unary_unary  # given the stand-in for grpc's context
        try:
            body = behaviour(request, context or Context())
        except Aborted as aborted:
            status = aborted.status
            details = dict(status.trailing_metadata or ()).get(errors.DETAILS_KEY, b"")
            return Ended(status.code, status=details if isinstance(details, bytes) else b"")
        return Ended(grpc.StatusCode.OK, body)


def check(
    worker: Worker,
    method: str,
    data: bytes,
    context: Context | None = None,
    *,
    admission: tuple[int, int] = (0, 0),
) -> tuple[Ended | None, list[str]]:
    """Make one call and check its outcome; return it (None: an exception escaped) and what
    breaks the rules ([]: nothing). `admission`: the worker's bound and the other calls it
    holds (a batch's items take units from what is left)."""
    context = context or Context()
    limit, busy = admission
    worker.admission.limit, worker.admission.held = limit, busy + 1  # this call's own unit
    try:
        ended = worker.call(method, data, context)
    except Exception as error:  # nothing may escape a handler: grpc would answer UNKNOWN
        return None, [f"{method} raised {type(error).__name__}: {error}"]
    if worker.admission.held != busy + 1:
        return ended, [f"{method} left {worker.admission.held - busy - 1} admission units held"]
    if ended.code is not grpc.StatusCode.OK:
        return ended, refusal_problems(method, ended, context.deadline)
    if method == BATCH:
        return ended, batch_problems(worker, data, ended.body, context.deadline, limit > 0)
    return ended, answer_problems(worker, method, data, ended.body)


def refusal_problems(method: str, ended: Ended, deadline: bool = False) -> list[str]:
    """What is wrong with a refusal: its code, its status, its ErrorInfo."""
    allowed = ALLOWED_WITH_DEADLINE if deadline else ALLOWED
    if ended.code not in allowed:
        return [f"{method} ended {ended.code.name}"]
    try:
        rich = ended.rich()
    except Exception as error:
        return [f"{method} refusal's status does not parse: {error!r}"]
    infos = []
    for detail in rich.details:
        info = error_details_pb2.ErrorInfo()
        if detail.Unpack(info):
            infos.append(info)
    if _CODES.get(rich.code) is not ended.code:
        return [f"{method} status code {rich.code} for {ended.code.name}"]
    if len(infos) != 1:
        return [f"{method} refusal carries {len(infos)} ErrorInfo"]
    if infos[0].domain != "basra.v1" or infos[0].reason not in KNOWN:
        return [f"{method} refused with {infos[0].domain}/{infos[0].reason}"]
    return []


def reason(ended: Ended) -> str:
    """The ErrorInfo reason of a refusal ("" for an answer)."""
    if ended.code is grpc.StatusCode.OK:
        return ""
    for detail in ended.rich().details:
        info = error_details_pb2.ErrorInfo()
        if detail.Unpack(info):
            return str(info.reason)
    return ""


def acted_state(request: Any) -> pb.State:
    """The state message a request's handler acts on: its plain state or its signed one."""
    if request.HasField("signed_state"):
        return pb.State.FromString(request.signed_state.state)
    state: pb.State = request.state
    return state


def answer_problems(worker: Worker, method: str, data: bytes, answer: bytes) -> list[str]:
    """What is wrong with an OK answer to a unary call."""
    if len(answer) > worker.config.max_message_bytes:
        return [f"{method} answered {len(answer)} bytes, past the service's own bound"]
    request_type, response_type = worker.contract[method]
    try:
        request: Any = request_type.FromString(data)
        response_type.FromString(answer)
    except Exception as error:
        return [f"{method} answer (or its request) does not parse: {error!r}"]
    if "state" in request.DESCRIPTOR.fields_by_name:
        try:
            engine.check_state(reading.state_from_proto(acted_state(request)))
        except Exception as error:
            return [f"{method} answered OK for a state the engine refuses: {error!r}"]
    try:
        wrong = read_back(method, request, answer)
    except Exception as error:
        return [f"{method} answer not read back ({error!r})"]
    return [f"{method} answer reads back another {wrong}"] if wrong else []


def read_back(rpc: str, request: Any, answer: bytes) -> str:
    """What of an answer differs from the engine's own values for the same request ("" for
    nothing)."""
    if rpc not in ("Apply", "LegalMoves", "PlayerView"):
        return ""
    response: Any = methods()[rpc][1].FromString(answer)
    state = reading.state_from_proto(acted_state(request))
    if rpc == "Apply":
        after, events = engine.apply(state, action_from_proto(request.action), check=False)
        shown = [[event_from_proto(e) for e in seat.events] for seat in response.seat_events]
        checks = {
            "state": reading.state_from_proto(acted_state(response)) == after,
            "events": [event_from_proto(e) for e in response.events] == list(events),
            "seat events": shown == [list(engine.seat_events(events, s)) for s in (0, 1)],
            "public events": [event_from_proto(e) for e in response.public_events]
            == list(engine.public_events(events)),
            "moves": _cards(response.legal_moves) == _hand_cards(after),
        }
    elif rpc == "LegalMoves":
        checks = {"moves": _cards(response.legal_moves) == _hand_cards(state)}
    elif request.spectator:
        public = engine.public_view(state)
        checks = {"floor": list(response.public_view.floor) == engine.codes(public.floor)}
    else:
        view = engine.seat_view(state, request.seat)
        checks = {
            "hand": list(response.view.hand) == engine.codes(view.hand),
            "floor": list(response.view.floor) == engine.codes(view.public.floor),
        }
    return ", ".join(name for name, same in checks.items() if not same)


def _cards(moves: pb.LegalMoves) -> list[str]:
    """The cards of a LegalMoves message, in order."""
    return [m.card for m in moves.moves]


def _hand_cards(state: engine.State) -> list[str]:
    """The codes of the hand to move (none once the match is over)."""
    return [] if state.to_move is None else engine.codes(state.hands[state.to_move])


def item_outcome(result: bytes) -> Ended:
    """One ApplyResult of a batch as the outcome of a unary call."""
    item = batch.ResultWire.FromString(result)
    if item.WhichOneof("result") == "response":
        return Ended(grpc.StatusCode.OK, item.response)
    status = item.status
    return Ended(_CODES[status_pb2.Status.FromString(status).code], status=status)


def batch_problems(
    worker: Worker, data: bytes, answer: bytes, deadline: bool, bounded: bool
) -> list[str]:
    """What is wrong with an OK answer to BatchApply (`deadline`: the call had one; `bounded`:
    the worker's admission had a bound)."""
    if len(answer) > receive_limit(worker.config):
        return [f"{BATCH} answered {len(answer)} bytes, past gRPC's own send limit"]
    items = list(batch.RequestWire.FromString(data).requests)
    if len(items) > worker.config.max_batch_items:
        return [f"{BATCH} answered {len(items)} items, past --max-batch-items"]
    try:
        pb.BatchApplyResponse.FromString(answer)
        results = list(batch.ResponseWire.FromString(answer).results)
    except Exception as error:
        return [f"{BATCH} answer does not parse: {error!r}"]
    if len(results) != len(items):
        return [f"{BATCH} answered {len(results)} results for {len(items)} items"]
    problems: list[str] = []
    size = 0
    overloaded = False
    made = ""  # the batch's own refusal (EXPIRED, TOO_LARGE) that every later item run repeats
    for index, (item, result) in enumerate(zip(items, results, strict=True)):
        seen = item_outcome(result)
        unary = worker.call("Apply", item)
        why = reason(seen)
        if seen.code is grpc.StatusCode.OK:
            problems += answer_problems(worker, "Apply", item, seen.body)
        else:
            problems += refusal_problems(f"{BATCH} item {index}", seen, deadline)
        own = why in (OVERLOADED, EXPIRED, TOO_LARGE) and not _same(seen, unary)
        if overloaded and why != OVERLOADED:
            problems.append(f"{BATCH} item {index} ran after an item refused {OVERLOADED}")
        elif why == OVERLOADED:
            overloaded = True
            if not bounded:
                problems.append(f"{BATCH} item {index} refused {OVERLOADED} without a bound")
        elif made and why != made:
            problems.append(f"{BATCH} item {index} ended {why or 'OK'} after a {made}")
        elif own and why == EXPIRED and not deadline:
            problems.append(f"{BATCH} item {index} refused {EXPIRED} without a deadline")
        elif own and why == TOO_LARGE and _fits(worker, size, unary):
            problems.append(f"{BATCH} item {index} refused {TOO_LARGE} though it fits")
        elif not own and not _same(seen, unary):
            problems.append(f"{BATCH} item {index} ended otherwise than its unary Apply")
        if own and why != OVERLOADED:
            made = made or why
        size += len(result)
        if problems:
            return [f"{p}: item {item.hex()[:2000]}" for p in problems]
    return []


def _fits(worker: Worker, size: int, unary: Ended) -> bool:
    """Whether the unary answer of an item fits in a batch's answer after `size` bytes (a
    refusal always does: only answers are held to the bound)."""
    if unary.code is not grpc.StatusCode.OK:
        return True
    result = batch.ResultWire(response=unary.body).SerializeToString()
    return size + len(result) <= worker.max_call_bytes


def _same(seen: Ended, unary: Ended) -> bool:
    """Whether a batch item ended as its unary call."""
    return view(seen) == view(unary)


def view(ended: Ended) -> tuple[Any, ...]:
    """An outcome to compare: the answer's bytes, or the status with its details unpacked (the
    order of an ErrorInfo's metadata entries is the encoder's, and changes between processes)."""
    if ended.code is grpc.StatusCode.OK:
        return (ended.code, ended.body)
    rich = ended.rich()
    details = []
    for detail in rich.details:
        info = error_details_pb2.ErrorInfo()
        details.append((detail.type_url, info if detail.Unpack(info) else detail.value))
    return (ended.code, rich.code, rich.message, details)


def batch_view(answer: bytes) -> list[tuple[Any, ...]]:
    """A BatchApply answer to compare: the view of each item's outcome."""
    return [view(item_outcome(result)) for result in batch.ResponseWire.FromString(answer).results]
