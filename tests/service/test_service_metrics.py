"""The metric series: declared at 0 before anything happens, and exact after a flush."""

from __future__ import annotations

import base64

import grpc
import pytest
from basra.v1 import rules_pb2 as pb
from prometheus_client import CollectorRegistry, Histogram

from service.config import Config
from service.metrics import PLAN_BUCKETS, Metrics, Tally
from testkit.calls import InProcess, start_server

RULES = "basra.v1.RulesService"
UNARY = {"grpc_type": "UNARY", "grpc_service": RULES}
SIGNING_KEYS = f"k1:{base64.b64encode(bytes(range(32))).decode()}"


def test_the_series_alerts_read_exist_at_zero_before_any_call(sync_server: InProcess) -> None:
    """The shedding alert's refusals, the INTERNAL count and the calls started read 0, not
    no data, on a server that has refused nothing yet (Prometheus sees no increase in a series
    that first appears at 1)."""
    sync_server.tally.flush()  # a server that has not been called yet
    sample = sync_server.registry.get_sample_value
    for method in ("NewMatch", "Apply", "SuggestMove", "BatchApply"):
        for reason in ("OVERLOADED", "DEADLINE_EXPIRED", "DEADLINE_TOO_SHORT"):
            labels = {"grpc_method": method, "reason": reason}
            assert sample("basra_refusals_total", labels) == 0.0, labels
        for transport in ("grpc", "http"):  # an HTTP caller's series too (docs/http.md)
            calls = {**UNARY, "grpc_method": method, "transport": transport}
            assert sample("grpc_server_handled_total", {**calls, "grpc_code": "INTERNAL"}) == 0.0
            assert sample("grpc_server_started_total", calls) == 0.0


def test_a_flush_gives_each_histogram_what_observing_each_value_would() -> None:
    """Observations tallied per call reach the histogram through its public observe(): the
    same bucket counts, count and sum as observing every value at once."""
    values = [1e-6, 1e-6, 2e-6, 3e-6, 7e-5, 0.05, 0.1, 0.3]
    registry = CollectorRegistry()
    tally = Tally(Metrics.create(registry))
    for value in values:
        tally.observe_plan(value)
    tally.flush()
    reference_registry = CollectorRegistry()
    reference = Histogram("reference", "", buckets=PLAN_BUCKETS, registry=reference_registry)
    for value in values:
        reference.observe(value)
    name = "basra_plan_generation_seconds"
    for bound in (*(str(b) for b in PLAN_BUCKETS), "+Inf"):
        counted = registry.get_sample_value(f"{name}_bucket", {"le": bound})
        assert counted == reference_registry.get_sample_value("reference_bucket", {"le": bound})
    assert registry.get_sample_value(f"{name}_count") == len(values)
    assert registry.get_sample_value(f"{name}_sum") == pytest.approx(sum(values))
    tally.flush()  # nothing new: nothing added
    assert registry.get_sample_value(f"{name}_count") == len(values)


def test_with_signing_on_an_applys_log_line_names_its_seq_and_seat() -> None:
    """The seq comes from the state the handler read, here out of the signed state."""
    server = start_server(Config(signing_keys=SIGNING_KEYS))
    try:
        channel = server.channel
        new_match = channel.unary_unary(
            f"/{RULES}/NewMatch",
            request_serializer=pb.NewMatchRequest.SerializeToString,
            response_deserializer=pb.NewMatchResponse.FromString,
        )
        apply = channel.unary_unary(
            f"/{RULES}/Apply",
            request_serializer=pb.ApplyRequest.SerializeToString,
            response_deserializer=pb.ApplyResponse.FromString,
        )
        begun = new_match(pb.NewMatchRequest(seed=b"signed facts"), timeout=10)
        assert begun.signed_state.signature  # the requests below send it, and no plain state
        seat = begun.legal_moves.seat
        move = begun.legal_moves.moves[0]
        action = pb.Action(seat=seat, card=move.card)
        if move.plans:
            action.plan_id = move.plans[0].id
        after = apply(pb.ApplyRequest(signed_state=begun.signed_state, action=action), timeout=10)
        stale = pb.ApplyRequest(signed_state=after.signed_state, action=action, expected_seq=7)
        with pytest.raises(grpc.RpcError):
            apply(stale, timeout=10)
    finally:
        server.close()
    lines = [line for line in server.log_lines() if line["method"] == f"{RULES}/Apply"]
    assert [(line["code"], line["seq"], line["seat"]) for line in lines] == [
        ("OK", 0, seat),
        ("ABORTED", 1, seat),
    ]
