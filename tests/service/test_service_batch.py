"""BatchApply on the sync server: each item answered as the unary Apply of it, item for item."""

from __future__ import annotations

import io
import json
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, fields, replace
from types import SimpleNamespace
from typing import Any

import grpc
import pytest
from basra.v1 import rules_pb2 as pb
from google.protobuf import any_pb2
from google.rpc import error_details_pb2, status_pb2  # type: ignore[import-untyped]
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clients.refusals import error_infos
from service import batch
from service.admission import Admission, AdmissionInterceptor
from service.config import Config
from service.handlers import Handlers
from service.interceptors import CallObserver
from service.logs import make_logger
from service.outcomes import Facts
from service.server import make_handlers
from testkit.calls import InProcess, start_server

KEYS = "k1:" + "QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo0NTY3ODk="
ITEM_BYTES = 4096
CONFIG = Config(signing_keys=KEYS, max_message_bytes=ITEM_BYTES, max_batch_items=8)
APPLY = "/basra.v1.RulesService/Apply"
BATCH = "/basra.v1.RulesService/BatchApply"
PROPERTY = settings(
    max_examples=25, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)


@dataclass(frozen=True, slots=True)
class Seen:
    """How the service answered one request: the response's bytes, or the refusal."""

    code: grpc.StatusCode
    body: bytes = b""
    message: str = ""
    reason: str = ""
    metadata: tuple[tuple[str, str], ...] = ()
    retry: bool = False


def _refused(code: grpc.StatusCode, message: str, details: list[any_pb2.Any]) -> Seen:
    infos, retry = [], False
    for detail in details:
        info = error_details_pb2.ErrorInfo()
        if detail.Unpack(info):
            infos.append(info)
        retry = retry or detail.Is(error_details_pb2.RetryInfo.DESCRIPTOR)
    assert len(infos) == 1, details
    (info,) = infos
    assert info.domain == "basra.v1"
    return Seen(code, b"", message, info.reason, tuple(sorted(info.metadata.items())), retry)


def unary(channel: grpc.Channel, body: bytes) -> Seen:
    """Send one Apply request's bytes as they are."""
    call = channel.unary_unary(APPLY, None, None)
    try:
        return Seen(grpc.StatusCode.OK, call(body, timeout=10))
    except grpc.RpcError as error:
        trailing: Any = error.trailing_metadata() or ()
        for key, value in trailing:
            if key == "grpc-status-details-bin":
                rich = status_pb2.Status.FromString(value)
                return _refused(error.code(), error.details() or "", list(rich.details))
        raise


def batched(channel: grpc.Channel, bodies: list[bytes], timeout: float = 10) -> list[Seen]:
    """Send requests' bytes in one BatchApply; read each result (statuses as google.rpc)."""
    call = channel.unary_unary(BATCH, None, None)
    data = batch.RequestWire(requests=bodies).SerializeToString()
    answer = batch.ResponseWire.FromString(call(data, timeout=timeout))
    typed = pb.BatchApplyResponse.FromString(answer.SerializeToString())
    assert len(answer.results) == len(bodies) == len(typed.results)
    seen = []
    for raw in answer.results:
        result = batch.ResultWire.FromString(raw)
        if result.WhichOneof("result") == "response":
            seen.append(Seen(grpc.StatusCode.OK, result.response))
            continue
        rich = status_pb2.Status.FromString(result.status)
        code = next(c for c in grpc.StatusCode if c.value[0] == rich.code)
        seen.append(_refused(code, rich.message, list(rich.details)))
    return seen


@pytest.fixture(scope="module")
def server() -> Iterator[InProcess]:
    """A signing sync server with small bounds (items of 4 KiB, batches of 8)."""
    served = start_server(CONFIG)
    yield served
    served.close()


def _sample_requests(channel: grpc.Channel) -> list[bytes]:
    """Requests of every kind: valid, stale seq, bad signature, unsigned, illegal, malformed,
    too large, no action."""
    stub_new = channel.unary_unary(
        "/basra.v1.RulesService/NewMatch", None, pb.NewMatchResponse.FromString
    )
    start = stub_new(pb.NewMatchRequest(seed=b"batch-test").SerializeToString(), timeout=10)
    found: list[bytes] = []
    signed, state, moves = start.signed_state, start.state, start.legal_moves
    apply_call = channel.unary_unary(APPLY, None, pb.ApplyResponse.FromString)
    for _ in range(3):  # three successive states of one match
        move = moves.moves[0]
        action = pb.Action(seat=state.to_move, card=move.card)
        if move.plans:
            action.plan_id = move.plans[0].id
        good = pb.ApplyRequest(signed_state=signed, action=action, expected_seq=state.seq)
        forged = pb.SignedState()
        forged.CopyFrom(signed)
        forged.signature = bytes(b ^ 1 for b in signed.signature)
        wrong_seat = pb.Action(seat=1 - state.to_move, card=move.card)
        not_held = pb.Action(seat=state.to_move, card=state.deck[0])
        found += [
            good.SerializeToString(),
            replace_seq(good, state.seq + 1),
            pb.ApplyRequest(signed_state=forged, action=action).SerializeToString(),
            pb.ApplyRequest(state=state, action=action).SerializeToString(),
            pb.ApplyRequest(signed_state=signed, action=wrong_seat).SerializeToString(),
            pb.ApplyRequest(signed_state=signed, action=not_held).SerializeToString(),
            pb.ApplyRequest(signed_state=signed).SerializeToString(),
        ]
        after = apply_call(good.SerializeToString(), timeout=10)
        signed, state, moves = after.signed_state, after.state, after.legal_moves
    found += [b"\xff\xff\xff", b"\x00" * (ITEM_BYTES + 1), b""]
    return found


def replace_seq(request: pb.ApplyRequest, seq: int) -> bytes:
    """The request's bytes with another expected seq."""
    changed = pb.ApplyRequest()
    changed.CopyFrom(request)
    changed.expected_seq = seq
    return changed.SerializeToString()


@pytest.fixture(scope="module")
def samples(server: InProcess) -> list[bytes]:
    """The sample requests, made once."""
    return _sample_requests(server.channel)


def test_the_samples_cover_answers_and_every_kind_of_refusal(
    server: InProcess, samples: list[bytes]
) -> None:
    """The property below compares answers and refusals of many reasons, not OKs alone."""
    reasons = {unary(server.channel, body).reason for body in samples}
    assert {
        "",
        "SEQ_MISMATCH",
        "BAD_SIGNATURE",
        "NOT_YOUR_TURN",
        "CARD_NOT_IN_HAND",
        "INVALID_ACTION",
        "MALFORMED_REQUEST",
        "REQUEST_TOO_LARGE",
    } <= reasons


@PROPERTY
@given(st.lists(st.lists(st.integers(0, 23), max_size=8), min_size=1, max_size=4))
def test_each_item_is_answered_as_the_unary_apply_of_it(
    server: InProcess, samples: list[bytes], batches: list[list[int]]
) -> None:
    """Random sequences of batches, against the same requests one by one: the same bytes, or
    the same code, message, reason and metadata, item for item, in order."""
    for chosen in batches:
        bodies = [samples[index % len(samples)] for index in chosen]
        expected = [unary(server.channel, body) for body in bodies]
        assert batched(server.channel, bodies) == expected


def _one_result(server: InProcess, bodies: list[bytes]) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as refused:
        batched(server.channel, bodies)
    return refused.value


def test_a_batch_past_the_bound_is_refused_whole(server: InProcess, samples: list[bytes]) -> None:
    """Nine requests to a server taking eight: RESOURCE_EXHAUSTED, TOO_MANY_ITEMS, no retry."""
    error = _one_result(server, [samples[0]] * 9)
    assert error.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
    (info,) = error_infos(error.trailing_metadata())
    assert info.reason == "TOO_MANY_ITEMS"
    assert dict(info.metadata) == {"items": "9", "maxItems": "8"}
    trailing: Any = error.trailing_metadata() or ()
    assert ("grpc-retry-pushback-ms", "-1") in trailing


def test_an_empty_batch_has_no_results(server: InProcess) -> None:
    """No requests: an OK call with no results."""
    assert batched(server.channel, []) == []


def test_a_body_that_is_no_batch_is_refused_whole(server: InProcess) -> None:
    """Bytes that are no BatchApplyRequest: INVALID_ARGUMENT, MALFORMED_REQUEST."""
    error = _one_result_raw(server, b"\xff\xff\xff")
    assert error.code() is grpc.StatusCode.INVALID_ARGUMENT
    (info,) = error_infos(error.trailing_metadata())
    assert info.reason == "MALFORMED_REQUEST"
    assert info.metadata["messageType"] == "BatchApplyRequest"


def _one_result_raw(server: InProcess, data: bytes) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as refused:
        server.channel.unary_unary(BATCH, None, None)(data, timeout=10)
    return refused.value


def test_one_log_line_per_batch_with_its_outcome_counts(
    server: InProcess, samples: list[bytes]
) -> None:
    """The call's line names how many items and how each kind ended; no line per item."""
    before = len(server.log_lines())
    batched(server.channel, [samples[0], samples[0], samples[1], samples[2]])
    lines = [line for line in server.log_lines()[before:] if line.get("event") == "rpc"]
    assert [line["method"] for line in lines] == ["basra.v1.RulesService/BatchApply"]
    assert lines[0]["items"] == 4
    assert lines[0]["outcomes"] == {"OK": 2, "SEQ_MISMATCH": 1, "BAD_SIGNATURE": 1}


def test_items_are_counted_under_apply(server: InProcess, samples: list[bytes]) -> None:
    """Each item counts as an Apply call in the per-method series, the batch as one call."""

    def count(method: str, code: str) -> float:
        server.tally.flush()
        value = server.registry.get_sample_value(
            "grpc_server_handled_total",
            {
                "grpc_type": "UNARY",
                "grpc_service": "basra.v1.RulesService",
                "grpc_method": method,
                "grpc_code": code,
                "transport": "grpc",
            },
        )
        return value or 0.0

    before = (count("Apply", "OK"), count("Apply", "ABORTED"), count("BatchApply", "OK"))
    batched(server.channel, [samples[0], samples[0], samples[1]])
    after = (count("Apply", "OK"), count("Apply", "ABORTED"), count("BatchApply", "OK"))
    assert [b - a for a, b in zip(before, after, strict=True)] == [2, 1, 1]


def test_items_past_the_admission_room_are_refused_overloaded(samples: list[bytes]) -> None:
    """With 3 of a bound of 5 held elsewhere, a batch of 4 runs 2 (its own unit and the one
    left) and refuses 2 OVERLOADED with a retry delay, as unary calls arriving then would be;
    its units are all given back."""
    server = start_server(replace(CONFIG, admission_limit=5))
    try:
        admission = server.built.admission.admission
        assert admission.take(3) == 3
        seen = batched(server.channel, [samples[0]] * 4)
        assert [s.code for s in seen[:2]] == [grpc.StatusCode.OK] * 2
        assert [(s.code, s.reason, s.retry) for s in seen[2:]] == [
            (grpc.StatusCode.RESOURCE_EXHAUSTED, "OVERLOADED", True)
        ] * 2
        assert dict(seen[2].metadata) == {"limit": "5"}
        admission.release(3)
        give_up = time.monotonic() + 5  # the call's own unit is given back as its thread ends
        while admission.held and time.monotonic() < give_up:
            time.sleep(0.01)
        assert admission.held == 0
    finally:
        server.close()


def test_items_refused_for_load_are_in_the_shedding_warning(samples: list[bytes]) -> None:
    """A worker that sheds only batch items says so: its "shedding load" warning counts them."""
    server = start_server(replace(CONFIG, admission_limit=5))
    admission = server.built.admission.admission
    try:
        assert admission.take(4) == 4  # room for the batch's own unit alone
        seen = batched(server.channel, [samples[0]] * 4)
        assert [s.reason for s in seen] == ["", "OVERLOADED", "OVERLOADED", "OVERLOADED"]
    finally:
        admission.release(4)
        server.close()
    warnings = [line for line in server.log_lines() if line.get("event") == "shedding load"]
    assert [(line["refused"], line["reason"]) for line in warnings] == [(3, "OVERLOADED")]


def test_items_refused_for_load_are_counted_as_unary_calls_refused_for_load(
    samples: list[bytes],
) -> None:
    """A unary Apply refused at admission, then two batch items refused OVERLOADED: each grows
    the Apply series by one RESOURCE_EXHAUSTED call and one OVERLOADED refusal."""
    server = start_server(replace(CONFIG, admission_limit=5))
    admission = server.built.admission.admission
    try:
        first = _apply_series(server)
        assert admission.take(5) == 5
        assert unary(server.channel, samples[0]).reason == "OVERLOADED"
        admission.release(2)  # room for the batch's own unit and one item: two items left out
        second = _apply_series(server)
        seen = batched(server.channel, [samples[0]] * 4)
        assert [s.reason for s in seen] == ["", "", "OVERLOADED", "OVERLOADED"]
        by_unary, by_batch = _grown(first, second), _grown(second, _apply_series(server))
    finally:
        admission.release(3)
        server.close()
    refused = ("RESOURCE_EXHAUSTED", "OVERLOADED")
    for grown, times in ((by_unary, 1), (by_batch, 2)):
        assert [grown[key] for key in _refused_keys(*refused)] == [times, times]


def _refused_keys(code: str, reason: str) -> list[tuple[str, tuple[tuple[str, str], ...]]]:
    """The Apply series a refusal of this code and reason grows."""
    call = (("grpc_method", "Apply"), ("grpc_service", "basra.v1.RulesService"))
    handled = tuple(
        sorted((*call, ("grpc_type", "UNARY"), ("grpc_code", code), ("transport", "grpc")))
    )
    return [
        ("grpc_server_handled_total", handled),
        ("basra_refusals_total", (("grpc_method", "Apply"), ("reason", reason))),
    ]


class SlowApply(Handlers):
    """Handlers whose Apply takes 20 ms more: a batch of them outlasts a short deadline."""

    @classmethod
    def of(cls, handlers: Handlers) -> SlowApply:
        """The same handlers, slowed."""
        return cls(**{f.name: getattr(handlers, f.name) for f in fields(handlers)})

    def apply(self, request: pb.ApplyRequest, facts: Facts) -> bytes:
        """Wait, then apply."""
        time.sleep(0.02)
        return super().apply(request, facts)


def test_items_that_cannot_finish_before_the_deadline_are_refused_not_lost(
    samples: list[bytes],
) -> None:
    """A deadline shorter than the batch's work: the call still answers OK in time, the items
    it could not start refused DEADLINE_EXPIRED as a unary call past its deadline is, and the
    first ones answered."""
    config = replace(CONFIG, max_batch_items=64, max_message_bytes=Config().max_message_bytes)
    server = start_server(config, handlers=SlowApply.of(make_handlers(config, None)))
    try:
        seen = batched(server.channel, [samples[0]] * 64, timeout=0.4)
        codes = [s.code for s in seen]
        assert codes[0] is grpc.StatusCode.OK
        refused = [s for s in seen if s.code is not grpc.StatusCode.OK]
        assert refused, "64 items of 20 ms each cannot all fit in 400 ms"
        assert {(s.code, s.reason) for s in refused} == {
            (grpc.StatusCode.DEADLINE_EXCEEDED, "DEADLINE_EXPIRED")
        }
        # Once one is refused for time, every later one is too: none starts after.
        first = codes.index(grpc.StatusCode.DEADLINE_EXCEEDED)
        assert all(code is grpc.StatusCode.DEADLINE_EXCEEDED for code in codes[first:])
    finally:
        server.close()


def test_the_batch_answer_is_a_typed_batch_apply_response(
    server: InProcess, samples: list[bytes]
) -> None:
    """Through the generated stub: an answer's response is the unary ApplyResponse, a refusal's
    status decodes as google.rpc.Status."""
    stub = server.channel.unary_unary(
        BATCH,
        request_serializer=pb.BatchApplyRequest.SerializeToString,
        response_deserializer=pb.BatchApplyResponse.FromString,
    )
    requests = [pb.ApplyRequest.FromString(samples[i]) for i in (0, 1)]
    answer = stub(pb.BatchApplyRequest(requests=requests), timeout=10)
    ok, stale = answer.results
    assert ok.response.SerializeToString() == unary(server.channel, samples[0]).body
    rich = status_pb2.Status.FromString(stale.status.SerializeToString())
    assert rich.code == grpc.StatusCode.ABORTED.value[0]
    info = error_details_pb2.ErrorInfo()
    assert rich.details[0].Unpack(info) and info.reason == "SEQ_MISMATCH"
    assert json.loads(json.dumps(dict(info.metadata)))["expectedSeq"]


def test_answers_past_the_call_size_refuse_the_items_from_there_on(samples: list[bytes]) -> None:
    """With items of 4 KiB at most, a call answers 16 KiB at most: 40 answers of several hundred
    bytes each do not all fit, and the items from the first that does not are
    refused RESPONSE_TOO_LARGE (not run), the ones before answered."""
    server = start_server(replace(CONFIG, max_batch_items=40))
    try:
        seen = batched(server.channel, [samples[0]] * 40)
    finally:
        server.close()
    codes = [s.code for s in seen]
    first = codes.index(grpc.StatusCode.RESOURCE_EXHAUSTED)
    assert 0 < first < 40 and set(codes[:first]) == {grpc.StatusCode.OK}
    assert {s.reason for s in seen[first:]} == {"RESPONSE_TOO_LARGE"}
    assert dict(seen[first].metadata)["maxBytes"] == str(4 * ITEM_BYTES)
    assert sum(len(s.body) for s in seen) <= 4 * ITEM_BYTES


# The series a unary Apply updates, by sample name; each is compared, label set by label set.
APPLY_SERIES = (
    "grpc_server_started_total",
    "grpc_server_handled_total",
    "grpc_server_handling_seconds_count",
    "basra_refusals_total",
    "basra_plan_generation_seconds_count",
    "basra_states_received_total",
)


def _apply_series(server: InProcess) -> Counter[tuple[str, tuple[tuple[str, str], ...]]]:
    """Every sample of APPLY_SERIES outside the batch method's own, after a flush."""
    server.tally.flush()
    found: Counter[tuple[str, tuple[tuple[str, str], ...]]] = Counter()
    for family in server.registry.collect():
        for sample in family.samples:
            if sample.name in APPLY_SERIES and sample.labels.get("grpc_method") != "BatchApply":
                found[(sample.name, tuple(sorted(sample.labels.items())))] += int(sample.value)
    return found


def _grown(before: Counter[Any], after: Counter[Any]) -> dict[Any, int]:
    return {key: after[key] - before[key] for key in after if after[key] != before[key]}


def test_items_update_every_series_a_unary_apply_of_them_would(
    server: InProcess, samples: list[bytes]
) -> None:
    """The samples one by one, then in one batch: the same growth of the per-method counters
    by code, the refusals by reason, the plan timings and the seals taken, series by series."""
    first = _apply_series(server)
    for body in samples:
        unary(server.channel, body)
    second = _apply_series(server)
    batched(server.channel, samples[:8])
    batched(server.channel, samples[8:16])
    batched(server.channel, samples[16:])
    by_unary, by_batch = _grown(first, second), _grown(second, _apply_series(server))
    assert by_batch == by_unary
    reasons = {
        dict(labels)["reason"] for name, labels in by_batch if name == "basra_refusals_total"
    }
    assert {"SEQ_MISMATCH", "BAD_SIGNATURE", "MALFORMED_REQUEST", "REQUEST_TOO_LARGE"} <= reasons
    assert by_batch[("basra_plan_generation_seconds_count", ())] > 0


def test_each_batch_is_counted_by_its_items(server: InProcess, samples: list[bytes]) -> None:
    """basra_batch_items: one observation per batch read, refused whole or not, of its item
    count (0, 3, 8, and 9 past the bound of 8)."""

    def histogram() -> dict[str, float]:
        server.tally.flush()
        return {
            f"{s.name}{s.labels.get('le', '')}": s.value
            for family in server.registry.collect()
            if family.name == "basra_batch_items"
            for s in family.samples
            if not s.name.endswith("_created")
        }

    before = histogram()
    batched(server.channel, [])
    batched(server.channel, [samples[0]] * 3)
    batched(server.channel, [samples[0]] * 8)
    _one_result(server, [samples[0]] * 9)
    after = histogram()
    grown = {key: after[key] - before.get(key, 0.0) for key in after}
    assert grown["basra_batch_items_count"] == 4
    assert grown["basra_batch_items_sum"] == 20
    cumulative = {
        le: grown[f"basra_batch_items_bucket{le}"] for le in ("1.0", "4.0", "8.0", "16.0")
    }
    assert cumulative == {"1.0": 1, "4.0": 2, "8.0": 3, "16.0": 4}


def _interceptor(limit: int) -> AdmissionInterceptor:
    """The admission interceptor of a worker with this bound, driven by the test as grpc's
    polling thread would drive it (admit, then submit), with no server around it."""
    observer = CallObserver(None, make_logger("warning", "json", io.StringIO()))
    return AdmissionInterceptor(Admission(limit), observer, 4, lambda seconds: None)


def _arrive(interceptor: AdmissionInterceptor, method: str = APPLY) -> bool:
    """A call arriving: whether the interceptor let it in (a refusal is a streaming handler
    that answers OVERLOADED)."""
    handler = grpc.unary_unary_rpc_method_handler(lambda request, context: b"")
    found = interceptor.intercept_service(
        lambda details: handler if details.method == APPLY else None,
        SimpleNamespace(method=method),
    )
    assert found is not None
    return not found.request_streaming


def test_a_call_let_in_keeps_its_place_from_a_batch_that_takes_room_before_it_enters() -> None:
    """Batch A (8 items, the whole bound of 8) comes in and enters; call B comes in; A's items
    take their room before grpc hands B to the pool. A gets 6 more units, not 7: with B's
    place the worker holds 8, never 9, and the next call is refused."""
    interceptor = _interceptor(8)
    bound, gate = interceptor.admission, threading.Event()
    try:
        assert _arrive(interceptor)
        interceptor.pool.submit(gate.wait, 10)
        assert _arrive(interceptor)
        assert bound.take(7) == 6
        interceptor.pool.submit(gate.wait, 10)
        assert bound.held == 8
        assert not _arrive(interceptor)
    finally:
        gate.set()
        interceptor.pool.shutdown(wait=True)
    bound.release(6)
    assert bound.held == 0


def test_a_batch_of_exactly_the_room_left_passes_whole() -> None:
    """3 of 8 held elsewhere: a batch of 5 comes in and takes 4 more units, all it wants; the
    bound is then full and the next call is refused."""
    interceptor = _interceptor(8)
    bound, gate = interceptor.admission, threading.Event()
    try:
        assert bound.take(3) == 3
        assert _arrive(interceptor)
        interceptor.pool.submit(gate.wait, 10)
        assert bound.take(4) == 4
        assert bound.held == 8 and not _arrive(interceptor)
    finally:
        gate.set()
        interceptor.pool.shutdown(wait=True)
    bound.release(7)
    assert bound.held == 0


def test_a_call_to_no_such_method_keeps_no_place() -> None:
    """A RulesService method the server lacks is let through to grpc's UNIMPLEMENTED and never
    enters: a batch then finds the whole bound free."""
    interceptor = _interceptor(8)
    handler = interceptor.intercept_service(
        lambda details: None, SimpleNamespace(method="/basra.v1.RulesService/Nothing")
    )
    assert handler is None
    assert interceptor.admission.take(8) == 8
    interceptor.pool.shutdown(wait=True)
