"""Helpers shared by the trust tests: an in-process server on a free loopback port, refusals."""

from __future__ import annotations

import io
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

import grpc
from basra.v1 import rules_pb2_grpc

from clients import channels
from clients.refusals import error_infos
from service.config import Config
from service.interceptors import CallObserver
from service.logs import make_logger
from service.server import build_server

TIMEOUT = 10.0


@contextmanager
def served_port(config: Config) -> Iterator[int]:
    """A thread-pool server with this configuration on a free loopback port; its port."""
    observer = CallObserver(None, make_logger("warning", "json", io.StringIO()))
    server = build_server(replace(config, host="127.0.0.1"), observer, 0)
    server.start()
    try:
        yield server.port
    finally:
        server.stop(0)


@contextmanager
def serving(config: Config) -> Iterator[Any]:
    """A thread-pool server with this configuration on a free loopback port, and a stub."""
    with (
        served_port(config) as port,
        channels.channel(f"127.0.0.1:{port}") as channel,
    ):
        yield rules_pb2_grpc.RulesServiceStub(channel)  # type: ignore[no-untyped-call]


def refusal(error: grpc.RpcError) -> tuple[grpc.StatusCode, str, dict[str, str]]:
    """The code, ErrorInfo reason and metadata of a refused call."""
    trailing: Any = error.trailing_metadata()
    infos = error_infos(trailing)
    assert infos, f"no ErrorInfo on {error}"
    return error.code(), infos[0].reason, dict(infos[0].metadata)
