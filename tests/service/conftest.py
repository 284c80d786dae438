"""Fixtures of the service tests: the service reached two ways, and a served process."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest

from service.config import Config
from service.server import make_handlers
from testkit import harness
from testkit.calls import (
    Caller,
    InProcess,
    MakeCaller,
    channel_caller,
    grpc_testing_caller,
    start_server,
)

TRANSPORTS = ("grpc_testing", "sync_server")


@contextmanager
def _servers() -> Iterator[Callable[[Config, str], Caller]]:
    running: list[InProcess] = []

    def make(config: Config, transport: str) -> Caller:
        if transport == "grpc_testing":
            handlers = make_handlers(config, None)
            return grpc_testing_caller(handlers)
        server = start_server(config)
        running.append(server)
        return channel_caller(server.channel)

    try:
        yield make
    finally:
        for server in running:
            server.close()


@pytest.fixture(scope="module", params=TRANSPORTS)
def transport(request: pytest.FixtureRequest) -> str:
    """Which way the service is reached: grpc_testing or a real server."""
    return str(request.param)


@pytest.fixture(scope="module")
def call(transport: str) -> Iterator[Caller]:
    """Call the service, with the default configuration, the `transport` way."""
    with _servers() as make:
        yield make(Config(), transport)


@pytest.fixture
def call_with(transport: str) -> Iterator[MakeCaller]:
    """Make a caller for a given configuration (limits), the `transport` way."""
    with _servers() as make:
        yield lambda config: make(config, transport)


@pytest.fixture
def sync_server() -> Iterator[InProcess]:
    """A real thread-pool server in this process, with its own registry and log buffer."""
    server = start_server(Config())
    yield server
    server.close()


@pytest.fixture(scope="module")
def served() -> Iterator[harness.ServedProcess]:
    """`basra-rules serve` with two workers and metrics on, shared by a test module."""
    server = harness.start(["--workers", "2"], metrics=True)
    yield server
    server.stop()
