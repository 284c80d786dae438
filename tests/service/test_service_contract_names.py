"""The contract's names (wire/contract.py): read from the generated descriptor, every one
served, and loadable by a client without grpc."""

from __future__ import annotations

import subprocess
import sys

import grpc
from basra.v1 import rules_pb2 as pb

from testkit.calls import REPO, InProcess
from wire import contract


def test_the_names_are_the_protos() -> None:
    """The service's name, its path prefix and every method in the .proto's order, BatchApply
    included, with their request and response types."""
    assert contract.SERVICE_NAME == "basra.v1.RulesService"
    assert contract.PREFIX == "/basra.v1.RulesService/"
    assert contract.path(contract.APPLY) == "/basra.v1.RulesService/Apply"
    assert list(contract.METHODS) == [
        "NewMatch",
        "Apply",
        "LegalMoves",
        "PlayerView",
        "Replay",
        "SuggestMove",
        "BatchApply",
    ]
    assert contract.METHODS[contract.BATCH_APPLY] == (pb.BatchApplyRequest, pb.BatchApplyResponse)
    assert contract.METHODS["SuggestMove"].response is pb.SuggestMoveResponse


def test_the_server_serves_every_method_of_the_contract(sync_server: InProcess) -> None:
    """An empty request of each method is answered or refused by the service, never
    UNIMPLEMENTED (a method the server does not serve)."""
    for name, method in contract.METHODS.items():
        call = sync_server.channel.unary_unary(contract.path(name), None, None)
        try:
            answer = call(method.request().SerializeToString(), timeout=10)
        except grpc.RpcError as error:
            assert error.code() is not grpc.StatusCode.UNIMPLEMENTED, name
        else:
            method.response.FromString(answer)


def test_the_names_load_no_grpc() -> None:
    """wire/ is shared with the clients and stays free of grpc."""
    script = "import sys, wire.contract; print(sorted(m for m in sys.modules if 'grpc' in m))"
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "[]"
