"""The method handlers the service registers on a server, caught without a server.

service.servicer.add_to_server registers each RPC's handler (its never-raising request reader
and its behaviour) on a grpc server. Handing it this stand-in instead gives tests and
benchmarks those very handlers, to call in process exactly as a worker's server would.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import grpc

from service.servicer import RulesServicer, add_to_server


class _Recorder:
    """Keeps the handlers registered on it by method name; a server's other duties are absent."""

    def __init__(self) -> None:
        self.handlers: dict[str, grpc.RpcMethodHandler[Any, Any]] = {}

    def add_generic_rpc_handlers(self, generic: Sequence[Any]) -> None:
        """Ignored: the registered method handlers below are the same ones."""

    def add_registered_method_handlers(
        self, service: str, handlers: dict[str, grpc.RpcMethodHandler[Any, Any]]
    ) -> None:
        """Keep the handlers by method name."""
        self.handlers.update(handlers)


def method_handlers(
    servicer: RulesServicer,
    max_request_bytes: int | None = None,
    more: Mapping[str, grpc.RpcMethodHandler[Any, Any]] | None = None,
) -> dict[str, grpc.RpcMethodHandler[Any, Any]]:
    """Each RPC's handler as add_to_server registers it, by method name ("Apply", ...), with
    `more` handlers of the same service (BatchApply's, from service.batch.served)."""
    recorder = _Recorder()
    add_to_server(servicer, recorder, max_request_bytes, more)
    return recorder.handlers


def request_reader(handler: grpc.RpcMethodHandler[Any, Any]) -> Callable[[bytes], Any]:
    """The request deserializer of a registered handler (the service registers one for each)."""
    reader = handler.request_deserializer
    assert reader is not None
    return reader
