"""The golden corpus over the wire: raw request bytes to a real server, raw answers compared.

One thread-pool server per corpus profile (signing on and off, tight limits), built the way
`basra-rules serve` builds it, on a loopback port 0 read back after binding. Requests go out
as the recorded bytes and answers come back as bytes (identity serializers), so nothing of
the client side re-encodes either of them.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from contextlib import ExitStack

import grpc
import pytest

from service.interceptors import CallObserver
from service.logs import make_logger
from service.server import build_server
from service.servicer import SERVICE_NAME
from testkit.golden import OK, Outcome, Runner, load_cases, load_profiles, same

TIMEOUT = 10.0


def _wire_runner(channel: grpc.Channel) -> Runner:
    """Send request bytes to RulesService over a channel; the outcome as the client sees it."""

    def run(rpc: str, data: bytes) -> Outcome:
        # No serializers: the request goes out as these bytes and the answer comes back as bytes.
        call = channel.unary_unary(
            f"/{SERVICE_NAME}/{rpc}", request_serializer=None, response_deserializer=None
        )
        try:
            body = call(data, timeout=TIMEOUT)
        except grpc.RpcError as error:
            failed: grpc.Call = error  # type: ignore[assignment]
            return Outcome.refused(
                failed.code(), failed.details() or "", failed.trailing_metadata()
            )
        assert isinstance(body, bytes)
        return Outcome(OK, body)

    return run


@pytest.fixture(scope="module")
def runners() -> Iterator[dict[str, Runner]]:
    """A served runner for every profile of the corpus."""
    observer = CallObserver(None, make_logger("warning", "json", io.StringIO()))
    with ExitStack() as stack:
        made: dict[str, Runner] = {}
        for name, profile in load_profiles().items():
            server = build_server(profile.config, observer, 0, profile.handlers())
            server.start()
            stack.callback(server.stop, 0)
            assert server.port > 0
            channel = grpc.insecure_channel(f"127.0.0.1:{server.port}")
            stack.callback(channel.close)
            made[name] = _wire_runner(channel)
        yield made


@pytest.mark.parametrize("signed", [False, True], ids=["unsigned", "signed"])
def test_every_request_gets_the_recorded_answer_over_the_wire(
    runners: dict[str, Runner], signed: bool
) -> None:
    """Raw bytes over loopback: the same response bytes, or the same code, details, ErrorInfo."""
    cases = [c for c in load_cases() if c.profile.startswith("signed") == signed]
    assert cases
    differing = []
    for case in cases:
        actual = runners[case.profile](case.rpc, case.request)
        if not same(case.rpc, case.expected, actual):
            differing.append((case.id, actual))
    assert differing == []
