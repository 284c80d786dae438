"""Health, reflection, raw bytes, unexpected failures, logs and metrics of an in-process server."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import grpc
import pytest
from basra.v1 import rules_pb2 as pb
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

import engine
from clients.refusals import error_infos
from service.config import Config
from testkit.calls import (
    InProcess,
    channel_caller,
    start_server,
)

SEED = b"operations"


@pytest.fixture(scope="module")
def server() -> Iterator[InProcess]:
    """A real in-process server with the default configuration."""
    running = start_server(Config())
    yield running
    running.close()


def _health(channel: grpc.Channel, service: str) -> int:
    stub = health_pb2_grpc.HealthStub(channel)
    response = stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=5)
    return int(response.status)


def test_health_is_serving_for_the_server_and_the_rules_service(server: InProcess) -> None:
    """Health answers SERVING for "" and basra.v1.RulesService, NOT_FOUND for other names."""
    assert _health(server.channel, "") == health_pb2.HealthCheckResponse.SERVING
    serving = _health(server.channel, "basra.v1.RulesService")
    assert serving == health_pb2.HealthCheckResponse.SERVING
    with pytest.raises(grpc.RpcError) as raised:
        _health(server.channel, "no.such.Service")
    assert raised.value.code() is grpc.StatusCode.NOT_FOUND


def _reflect(channel: grpc.Channel, request: reflection_pb2.ServerReflectionRequest) -> object:
    stub = reflection_pb2_grpc.ServerReflectionStub(channel)
    return next(iter(stub.ServerReflectionInfo(iter([request]), timeout=5)))


def test_reflection_lists_the_service_and_serves_its_descriptor(server: InProcess) -> None:
    """Reflection lists RulesService and returns the file that defines it."""
    listed = _reflect(server.channel, reflection_pb2.ServerReflectionRequest(list_services=""))
    names = {s.name for s in listed.list_services_response.service}  # type: ignore[attr-defined]
    assert {"basra.v1.RulesService", "grpc.health.v1.Health"} <= names
    found = _reflect(
        server.channel,
        reflection_pb2.ServerReflectionRequest(file_containing_symbol="basra.v1.RulesService"),
    )
    files = found.file_descriptor_response.file_descriptor_proto  # type: ignore[attr-defined]
    assert any(b"basra/v1/rules.proto" in f for f in files)


def test_reflection_can_be_switched_off() -> None:
    """With reflection off, the reflection service is not there."""
    off = start_server(Config(reflection=False))
    try:
        with pytest.raises(grpc.RpcError) as raised:
            _reflect(off.channel, reflection_pb2.ServerReflectionRequest(list_services=""))
        assert raised.value.code() is grpc.StatusCode.UNIMPLEMENTED
    finally:
        off.close()


def test_unreadable_bodies_are_refused_not_internal(server: InProcess) -> None:
    """Bytes that are not a request message: INVALID_ARGUMENT, MALFORMED_REQUEST (not INTERNAL)."""
    raw = server.channel.unary_unary("/basra.v1.RulesService/Apply", None, None)
    bad_utf8 = b"\x12\x03\x12\x01\xff"  # action { card: "\xff" }: a string that is not UTF-8
    for body in (b"\xff\xff\xff\xff", b"\x0a\x80", bad_utf8):
        with pytest.raises(grpc.RpcError) as raised:
            raw(body, timeout=5)
        error = raised.value
        assert error.code() is grpc.StatusCode.INVALID_ARGUMENT
        (info,) = error_infos(error.trailing_metadata())
        assert info.reason == "MALFORMED_REQUEST" and info.domain == "basra.v1"
        assert info.metadata["messageType"] == "ApplyRequest"


def test_one_log_line_per_call_without_seed_or_hidden_cards(sync_server: InProcess) -> None:
    """Each call logs one JSON line: method, code, reason, duration, seq, seat, x-request-id."""
    stub_call = channel_caller(sync_server.channel)
    rules = pb.DESCRIPTOR.services_by_name["RulesService"]
    assert rules.full_name == "basra.v1.RulesService"
    new = sync_server.channel.unary_unary(
        "/basra.v1.RulesService/NewMatch",
        request_serializer=pb.NewMatchRequest.SerializeToString,
        response_deserializer=pb.NewMatchResponse.FromString,
    )
    result = new(pb.NewMatchRequest(seed=SEED), metadata=(("x-request-id", "req-1"),), timeout=5)
    state = result.state
    seat = state.to_move
    apply = sync_server.channel.unary_unary(
        "/basra.v1.RulesService/Apply",
        request_serializer=pb.ApplyRequest.SerializeToString,
        response_deserializer=pb.ApplyResponse.FromString,
    )
    stale = pb.ApplyRequest(
        state=state, action=pb.Action(seat=seat, card=state.seats[seat].hand[0]), expected_seq=9
    )
    with pytest.raises(grpc.RpcError):
        apply(stale, metadata=(("x-request-id", "req-2"),), timeout=5)
    stub_call("PlayerView", pb.PlayerViewRequest(state=state, seat=1))
    _health(sync_server.channel, "")
    lines = sync_server.log_lines()
    rpcs = [line for line in lines if line["event"] == "rpc"]
    assert [line["method"] for line in rpcs] == [
        "basra.v1.RulesService/NewMatch",
        "basra.v1.RulesService/Apply",
        "basra.v1.RulesService/PlayerView",
        "grpc.health.v1.Health/Check",
    ]
    first, second, third, health = rpcs
    assert first["code"] == "OK" and first["request_id"] == "req-1" and first["seq"] == 0
    assert first["reason"] is None and first["level"] == "info"
    assert second["code"] == "ABORTED" and second["reason"] == "SEQ_MISMATCH"
    assert second["request_id"] == "req-2" and second["seat"] == seat and second["seq"] == 0
    assert third["request_id"] is None and third["seat"] == 1
    assert health["level"] == "debug"
    for line in rpcs:
        assert isinstance(line["duration_ms"], float) and line["duration_ms"] >= 0
    text = sync_server.log.getvalue()
    assert SEED.decode() not in text and SEED.hex() not in text
    every_card = set(engine.codes(range(52)))
    for line in lines:
        for value in line.values():
            assert not (isinstance(value, str) and value in every_card), line
    assert json.dumps(rpcs)  # the lines are plain JSON values


def _sample(server: InProcess, name: str, **labels: str) -> float:
    server.tally.flush()  # what a worker does every FLUSH_SECONDS and when it stops
    value = server.registry.get_sample_value(name, labels)
    return 0.0 if value is None else float(value)


def test_metrics_count_calls_plans_and_refusals(sync_server: InProcess) -> None:
    """grpc_server_* series, one plan-timing observation per card, refusals by reason."""
    call = channel_caller(sync_server.channel)
    result = call("NewMatch", pb.NewMatchRequest(seed=SEED)).response
    unary = {"grpc_type": "UNARY", "grpc_service": "basra.v1.RulesService", "transport": "grpc"}
    plans = "basra_plan_generation_seconds_count"
    assert _sample(sync_server, plans) == len(result.legal_moves.moves) == 4
    call("LegalMoves", pb.LegalMovesRequest(state=result.state))
    assert _sample(sync_server, plans) == 8
    other = 1 - result.state.to_move
    call("PlayerView", pb.PlayerViewRequest(state=result.state, seat=other))
    assert _sample(sync_server, plans) == 8  # not this seat's turn: no plans generated
    call("LegalMoves", pb.LegalMovesRequest())
    assert _sample(sync_server, "grpc_server_started_total", grpc_method="NewMatch", **unary) == 1
    assert _sample(sync_server, "grpc_server_started_total", grpc_method="LegalMoves", **unary) == 2
    handled = "grpc_server_handled_total"
    ok = _sample(sync_server, handled, grpc_method="LegalMoves", grpc_code="OK", **unary)
    bad = _sample(
        sync_server, handled, grpc_method="LegalMoves", grpc_code="INVALID_ARGUMENT", **unary
    )
    assert (ok, bad) == (1, 1)
    timed = "grpc_server_handling_seconds_count"
    assert _sample(sync_server, timed, grpc_method="LegalMoves", **unary) == 2
    refused = "basra_refusals_total"
    assert _sample(sync_server, refused, grpc_method="LegalMoves", reason="INVALID_STATE") == 1
    bucket = "basra_plan_generation_seconds_bucket"
    assert _sample(sync_server, bucket, le="1e-06") <= _sample(sync_server, bucket, le="0.1")
    assert _sample(sync_server, bucket, le="+Inf") == 8


def test_stop_reports_not_serving_before_the_server_goes() -> None:
    """On stop, a health Watch open at the stop (its GOAWAY sent first) is told NOT_SERVING
    while the server still answers it."""
    running = start_server(Config())
    stub = health_pb2_grpc.HealthStub(running.channel)
    watch = stub.Watch(health_pb2.HealthCheckRequest(service="basra.v1.RulesService"), timeout=20)
    seen = [next(watch).status]
    stopper = threading.Thread(target=running.stop, args=(10.0,))
    stopper.start()
    seen.append(next(watch).status)
    watch.cancel()  # the watcher leaves, so the graceful stop need not wait for it
    stopper.join(20)
    running.channel.close()
    assert not stopper.is_alive()
    serving = health_pb2.HealthCheckResponse
    assert seen == [serving.SERVING, serving.NOT_SERVING]


class _Told:
    """Stands for an object, noting in `order` each call of the methods named in `noted`."""

    def __init__(self, inner: Any, noted: tuple[str, ...], order: list[str]) -> None:
        self._inner, self._noted, self._order = inner, noted, order

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._inner, name)
        if name not in self._noted:
            return value

        def noting(*args: Any, **kwargs: Any) -> Any:
            self._order.append(name)
            return value(*args, **kwargs)

        return noting


def _told(inner: Any, method: str, order: list[str]) -> Any:
    """`inner`, each call of its `method` noted in `order`."""
    return _Told(inner, (method,), order)


def test_stop_sends_the_goaway_before_it_reports_not_serving() -> None:
    """grpc's stop (the GOAWAY on every connection) comes first, then NOT_SERVING: a client
    with health checking and one connection (a ClusterIP's caller) that read NOT_SERVING first
    would fail its calls at once until it reconnected (RELIABILITY.md, "A rollout at 300 calls
    a second")."""
    running = start_server(Config())
    order: list[str] = []
    built = running.built
    told = replace(
        built,
        server=_told(built.server, "stop", order),
        health=_told(built.health, "enter_graceful_shutdown", order),
    )
    running.stop = told.stop
    running.close()
    assert order == ["stop", "enter_graceful_shutdown"]
