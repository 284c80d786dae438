"""The contract's names, read from the generated descriptor of proto/basra/v1/rules.proto (their
one source): the service's full name, its methods in the .proto's order with their request and
response types, and the path prefix of its calls.

A leaf: it imports only the generated module and protobuf, never grpc, so the server, its
clients and the tests all take the names from here.
"""

from __future__ import annotations

from typing import NamedTuple

from basra.v1 import rules_pb2 as pb
from google.protobuf import message_factory
from google.protobuf.message import Message

# The .proto declares one service.
(_SERVICE,) = pb.DESCRIPTOR.services_by_name.values()

SERVICE_NAME: str = _SERVICE.full_name
""""basra.v1.RulesService"."""
PREFIX = f"/{SERVICE_NAME}/"
"""What the path of each of the service's calls begins with ("/basra.v1.RulesService/")."""


class Method(NamedTuple):
    """The request and response types of one method."""

    request: type[Message]
    response: type[Message]


METHODS: dict[str, Method] = {
    method.name: Method(
        message_factory.GetMessageClass(method.input_type),
        message_factory.GetMessageClass(method.output_type),
    )
    for method in _SERVICE.methods
}
"""Every method of the service by name, BatchApply included, in the order of the .proto."""

APPLY = "Apply"
BATCH_APPLY = "BatchApply"
"""Many Apply requests in one call, each answered as Apply answers it."""
for _name in (APPLY, BATCH_APPLY):
    if _name not in METHODS:  # the .proto changed: the server would serve a method not there
        raise ImportError(f"{SERVICE_NAME} has no method {_name}: {sorted(METHODS)}")


def path(method: str) -> str:
    """The path of a method's calls ("/basra.v1.RulesService/Apply")."""
    return PREFIX + method
