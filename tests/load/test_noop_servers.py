"""The two no-op servers the load benchmark compares answer alike, and ghz can load both.

benchmarks.load_bench --defaults --grpc-go sets the service beside a bare grpcio server and a
grpc-go one (benchmarks/go_noop), both answering the health Check. The comparison is fair only
if both get the same request bytes and send the same reply bytes, which is checked here on the
wire, with the Go server built as the benchmark builds it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from benchmarks import ghz_tool, servers
from benchmarks.servers import HEALTH_PATH, Server


@pytest.fixture(scope="module")
def noops() -> Iterator[dict[str, Server]]:
    """The bare grpcio server and the grpc-go one, running."""
    with servers.bare_server() as bare, servers.go_server() as go:
        yield {"grpcio": bare, "grpc-go": go}


def _raw_check(address: str, service: bytes) -> bytes:
    with grpc.insecure_channel(address) as channel:
        call = channel.unary_unary(HEALTH_PATH, None, None)
        # A HealthCheckRequest with this service name, encoded by hand: field 1, bytes.
        request = b"\x0a" + bytes([len(service)]) + service if service else b""
        reply = call(request, timeout=10)
        assert isinstance(reply, bytes)
        return reply


@pytest.mark.parametrize("service", [b"", b"basra.v1.RulesService"], ids=["all", "rules"])
def test_both_noops_answer_the_same_bytes(noops: dict[str, Server], service: bytes) -> None:
    replies = {name: _raw_check(server.address, service) for name, server in noops.items()}
    assert replies["grpcio"] == replies["grpc-go"] == b"\x08\x01"  # status: SERVING


def test_ghz_loads_both_noops_with_every_call_ok(noops: dict[str, Server], tmp_path: Path) -> None:
    """The benchmark's ghz path: a protoset for servers without reflection, binary requests."""
    if not ghz_tool.GHZ.is_file():
        if os.environ.get("CI") == "true":
            pytest.fail(ghz_tool.MISSING)
        pytest.skip(ghz_tool.MISSING)
    for server in noops.values():
        run = servers.measure(
            server,
            "Check",
            [b""],
            calls=200,
            concurrency=4,
            connections=2,
            path=HEALTH_PATH,
            ghz_scratch=tmp_path,
        )
        assert (run.calls, run.errors) == (200, 0)
        assert run.generator_cpu_seconds > 0
