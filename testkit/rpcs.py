"""The RPCs of basra.v1.RulesService as the generated descriptor holds them, so that what
iterates over "every RPC" (the fuzzers) follows the contract and cannot leave a new one out."""

from __future__ import annotations

from basra.v1 import rules_pb2 as pb
from google.protobuf import message_factory
from google.protobuf.message import Message

SERVICE = pb.DESCRIPTOR.services_by_name["RulesService"]


def methods() -> dict[str, tuple[type[Message], type[Message]]]:
    """Each RPC's request and response classes, by its name, in the order of the .proto."""
    return {
        method.name: (
            message_factory.GetMessageClass(method.input_type),
            message_factory.GetMessageClass(method.output_type),
        )
        for method in SERVICE.methods
    }
