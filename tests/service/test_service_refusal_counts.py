"""What the server counts for calls that end before any handler runs: the code its client saw.

A message over the size limit is RESOURCE_EXHAUSTED / REQUEST_TOO_LARGE, whether the service
refuses it (up to four times the limit) or gRPC core does (beyond); a call whose deadline
passed is DEADLINE_EXCEEDED / DEADLINE_EXPIRED; one whose client went away is CANCELLED.
"""

from __future__ import annotations

from collections.abc import Iterator
from types import SimpleNamespace

import grpc
import pytest
from basra.v1 import rules_pb2 as pb

from service import admission
from service.config import Config
from service.server import receive_limit
from testkit.calls import InProcess, start_server

NEW_MATCH = "/basra.v1.RulesService/NewMatch"
CONFIG = Config(port=0, metrics_port=0)


@pytest.fixture
def server() -> Iterator[InProcess]:
    """A sync server in this process."""
    running = start_server(CONFIG)
    yield running
    running.close()


def _counted(server: InProcess) -> dict[tuple[str, str], float]:
    """NewMatch's handled calls by code and refusals by reason, as the next flush writes them
    (the series declared at 0 left out)."""
    server.tally.flush()
    counts: dict[tuple[str, str], float] = {}
    for family in server.registry.collect():
        for sample in family.samples:
            if sample.labels.get("grpc_method") != "NewMatch" or sample.name.endswith("_created"):
                continue
            if not sample.value:
                continue
            if sample.name == "grpc_server_handled_total":
                counts[("code", sample.labels["grpc_code"])] = sample.value
            elif sample.name == "basra_refusals_total":
                counts[("reason", sample.labels["reason"])] = sample.value
    return counts


def _send_labels(server: InProcess, size: int, timeout: float | None) -> grpc.RpcError:
    request = pb.NewMatchRequest(labels=["x" * size]).SerializeToString()
    with pytest.raises(grpc.RpcError) as raised:
        server.channel.unary_unary(NEW_MATCH, None, None)(request, timeout=timeout)
    error = raised.value
    assert isinstance(error, grpc.RpcError)
    return error


@pytest.mark.parametrize("timeout", [None, 30.0])
def test_a_message_past_the_limit_is_counted_request_too_large(
    server: InProcess, timeout: float | None
) -> None:
    """3 MiB against a 1 MiB limit: the service's own refusal, counted as its client saw it."""
    error = _send_labels(server, 3 * 1024 * 1024, timeout)
    assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert _counted(server) == {
        ("code", "RESOURCE_EXHAUSTED"): 1,
        ("reason", "REQUEST_TOO_LARGE"): 1,
    }


@pytest.mark.parametrize("timeout", [None, 30.0])
def test_a_message_grpc_itself_refuses_is_never_counted_as_a_deadline(
    server: InProcess, timeout: float | None
) -> None:
    """Past gRPC's own limit core refuses the call; the count never says DEADLINE_EXCEEDED.

    grpc tells the server only that the call ended before its message came, in either of two
    forms (which one is a race in grpc): half-closed, counted REQUEST_TOO_LARGE, or cancelled.
    """
    error = _send_labels(server, receive_limit(CONFIG) + 1024, timeout)
    assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "larger than max" in (error.details() or "")
    counted = _counted(server)
    assert counted in (
        {("code", "RESOURCE_EXHAUSTED"): 1, ("reason", "REQUEST_TOO_LARGE"): 1},
        {("code", "CANCELLED"): 1},
    )


def _submitted(deadline: float, client: str, code: object = None) -> tuple[object, ...]:
    """The arguments grpc's sync server submits for a unary call: behaviour, event, state."""
    event = SimpleNamespace(call_details=SimpleNamespace(deadline=deadline))
    return (None, event, SimpleNamespace(client=client, code=code))


def test_a_call_ended_before_its_handler_is_classified_as_its_client_saw_it() -> None:
    """Deadline passed, message refused (half-closed, no status set), client gone."""
    assert admission.ended_before_start(_submitted(1.0, "cancelled")) == admission.EXPIRED
    assert admission.ended_before_start(_submitted(1.0, "closed")) == admission.EXPIRED
    future = 1e18
    assert admission.ended_before_start(_submitted(future, "closed")) == admission.TOO_LARGE
    assert admission.ended_before_start(_submitted(future, "cancelled")) == admission.CANCELLED
    assert admission.ended_before_start(()) == admission.EXPIRED


def test_every_call_that_arrives_is_counted_as_arrived_and_as_taken_in(server: InProcess) -> None:
    """basra_calls_arrived (gRPC core's count, from channelz) and basra_calls_taken_in (the
    server's): their difference is what core refused before the service saw it; none here.

    channelz counts every server of the process, one in a worker, but here also what earlier
    tests' servers in this test process had started: so the counts are compared across the
    calls."""

    def counts() -> tuple[float, float]:
        server.tally.flush()
        arrived = server.registry.get_sample_value("basra_calls_arrived_total")
        taken_in = server.registry.get_sample_value("basra_calls_taken_in_total")
        assert arrived is not None and taken_in is not None
        return arrived, taken_in

    arrived_before, taken_before = counts()
    request = pb.NewMatchRequest(labels=["a"]).SerializeToString()
    for _ in range(5):
        server.channel.unary_unary(NEW_MATCH, None, None)(request, timeout=30)
    arrived, taken_in = counts()
    assert taken_in - taken_before == 5
    assert arrived - arrived_before == taken_in - taken_before
