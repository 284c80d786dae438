"""A server-reflection client that asks what ghz and grpcurl ask, and calls what it learns.

ghz and grpcurl resolve a call through jhump/protoreflect's grpcreflect client: one
`file_containing_symbol` for the symbol they were given (a service, a method such as
`basra.v1.RulesService.Apply`, or a message), then `file_by_filename` for every import the
answer did not already carry. `Reflector` does the same over v1 or v1alpha, builds a
descriptor pool of its own from the answers, and calls methods with message classes made from
those descriptors: no generated code of this repository is used, so it can drive an installed
wheel or a container image exactly as a third-party client would.

The two protocols carry the same messages under another package name, so v1alpha's classes
(from grpcio-reflection) encode both; only the method path differs.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import grpc
from google.protobuf import descriptor_pb2, descriptor_pool, json_format, message_factory
from google.protobuf.descriptor import MethodDescriptor
from google.protobuf.message import Message
from grpc_reflection.v1alpha import reflection_pb2 as pb

PATHS = {
    "v1": "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
    "v1alpha": "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
}
RULES_SERVICE = "basra.v1.RulesService"
# Every RPC of the contract; a test compares this with what reflection says the service has.
RULE_RPCS = (
    "NewMatch",
    "LegalMoves",
    "Apply",
    "PlayerView",
    "Replay",
    "SuggestMove",
    "BatchApply",
)
# The items of the one BatchApply that every_rulesservice_call sends: a server counts each as an
# Apply call too, so its per-method counters hold this many calls more than RULE_RPCS.
BATCH_ITEMS = 2
COUNTED_CALLS = len(RULE_RPCS) + BATCH_ITEMS


class ReflectionError(LookupError):
    """The server answered a reflection request with an error."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(f"reflection error {code}: {message}")
        self.code = code


def ask(
    channel: grpc.Channel,
    requests: Sequence[pb.ServerReflectionRequest],
    protocol: str = "v1",
    timeout: float = 10.0,
) -> list[pb.ServerReflectionResponse]:
    """Send the requests on one reflection stream; return the answers in order."""
    stream = channel.stream_stream(
        PATHS[protocol],
        request_serializer=pb.ServerReflectionRequest.SerializeToString,
        response_deserializer=pb.ServerReflectionResponse.FromString,
    )
    return list(stream(iter(requests), timeout=timeout))


def list_request() -> pb.ServerReflectionRequest:
    """The request of `grpcurl list`."""
    return pb.ServerReflectionRequest(list_services="")


def symbol_request(symbol: str) -> pb.ServerReflectionRequest:
    """The request ghz and `grpcurl describe` send for a symbol."""
    return pb.ServerReflectionRequest(file_containing_symbol=symbol)


def filename_request(name: str) -> pb.ServerReflectionRequest:
    """The request grpcreflect sends for an import it lacks."""
    return pb.ServerReflectionRequest(file_by_filename=name)


def files_of(answer: pb.ServerReflectionResponse) -> list[descriptor_pb2.FileDescriptorProto]:
    """The file descriptors of an answer; raise ReflectionError for an error answer."""
    if answer.HasField("error_response"):
        error = answer.error_response
        raise ReflectionError(error.error_code, error.error_message)
    files = []
    for raw in answer.file_descriptor_response.file_descriptor_proto:
        file = descriptor_pb2.FileDescriptorProto()
        file.ParseFromString(raw)
        files.append(file)
    return files


@dataclass
class Reflector:
    """Resolves symbols through one server's reflection into a pool of its own."""

    channel: grpc.Channel
    protocol: str = "v1"
    pool: descriptor_pool.DescriptorPool = field(default_factory=descriptor_pool.DescriptorPool)
    asked: list[pb.ServerReflectionRequest] = field(default_factory=list)
    _known: dict[str, descriptor_pb2.FileDescriptorProto] = field(default_factory=dict)
    _added: set[str] = field(default_factory=set)

    def _ask(self, request: pb.ServerReflectionRequest) -> pb.ServerReflectionResponse:
        self.asked.append(request)
        (answer,) = ask(self.channel, [request], self.protocol)
        return answer

    def services(self) -> list[str]:
        """The services the server lists (`grpcurl list`)."""
        answer = self._ask(list_request())
        return [service.name for service in answer.list_services_response.service]

    def resolve(self, symbol: str) -> str:
        """Load the file defining `symbol` and its imports into the pool; return its name."""
        files = files_of(self._ask(symbol_request(symbol)))
        for file in files:
            self._known.setdefault(file.name, file)
        self._add(files[0].name)
        return files[0].name

    def _add(self, name: str) -> None:
        if name in self._added:
            return
        if name not in self._known:  # an import the answer did not carry: ask for it by name
            for file in files_of(self._ask(filename_request(name))):
                self._known.setdefault(file.name, file)
        file = self._known[name]
        for dependency in file.dependency:
            self._add(dependency)
        self.pool.Add(file)
        self._added.add(name)

    def method(self, call: str) -> MethodDescriptor:
        """Resolve a call as ghz does ("pkg.Service.Method" or "pkg.Service/Method")."""
        symbol = call.replace("/", ".").removeprefix(".")
        self.resolve(symbol)
        service, _, name = symbol.rpartition(".")
        return self.pool.FindServiceByName(service).methods_by_name[name]

    def caller(self, call: str) -> Caller:
        """A unary caller of a method, with message classes made from the reflected types."""
        method = self.method(call)
        return Caller(
            self.channel,
            f"/{method.containing_service.full_name}/{method.name}",
            message_factory.GetMessageClass(method.input_type),
            message_factory.GetMessageClass(method.output_type),
        )


@dataclass(frozen=True)
class Caller:
    """Calls one unary method with requests and answers as protobuf JSON dictionaries."""

    channel: grpc.Channel
    path: str
    request_class: type[Message]
    response_class: type[Message]

    def __call__(self, request: Mapping[str, Any], timeout: float = 10.0) -> dict[str, Any]:
        """Send one request (protobuf JSON); return the answer as protobuf JSON."""
        call = self.channel.unary_unary(
            self.path,
            request_serializer=lambda message: message.SerializeToString(),
            response_deserializer=self.response_class.FromString,
        )
        message = json_format.ParseDict(dict(request), self.request_class())
        answer = call(message, timeout=timeout)
        return json_format.MessageToDict(
            answer, preserving_proto_field_name=True, always_print_fields_with_no_presence=True
        )


def every_rulesservice_call(reflector: Reflector, seed: bytes = b"reflection") -> dict[str, Any]:
    """Call each RulesService RPC once, chained as a lobby would; return the answers by name.

    Each answer is checked against the others as it comes (the action applied is one the
    server listed as legal, the replay of it reaches the applied state, the suggestion is for
    the seat to move), so a server that answers but answers wrong fails here.
    """
    rpc = {name: reflector.caller(f"{RULES_SERVICE}.{name}") for name in RULE_RPCS}
    seed_text = base64.b64encode(seed).decode()
    answers: dict[str, Any] = {}
    started = rpc["NewMatch"]({"seed": seed_text, "labels": ["ann", "bob"]})
    state = started["state"]
    seat = state["to_move"]
    answers["NewMatch"] = started
    legal = rpc["LegalMoves"]({"state": state})["legal_moves"]
    assert legal["seat"] == seat and legal["moves"], legal
    answers["LegalMoves"] = legal
    action = {"seat": seat, "card": legal["moves"][0]["card"]}
    applied = rpc["Apply"]({"state": state, "action": action, "expected_seq": state["seq"]})
    assert applied["state"]["seq"] == state["seq"] + 1, applied["state"]
    answers["Apply"] = applied
    view = rpc["PlayerView"]({"state": applied["state"], "seat": 0})["view"]
    assert view["seat"] == 0 and view["seq"] == applied["state"]["seq"], view
    answers["PlayerView"] = view
    replayed = rpc["Replay"]({"seed": seed_text, "actions": [action], "labels": ["ann", "bob"]})
    assert replayed["state"] == applied["state"], "Replay did not reach the applied state"
    answers["Replay"] = replayed
    mover = applied["state"]["to_move"]
    suggested = rpc["SuggestMove"](
        {"state": applied["state"], "seat": mover, "level": "BOT_LEVEL_GREEDY"}
    )
    assert suggested["action"]["seat"] == mover, suggested
    answers["SuggestMove"] = suggested
    request = {"state": state, "action": action, "expected_seq": state["seq"]}
    batched = rpc["BatchApply"]({"requests": [request] * BATCH_ITEMS})
    assert batched["results"] == [{"response": applied}] * BATCH_ITEMS, "BatchApply is not Apply"
    answers["BatchApply"] = batched
    return answers


def method_names(reflector: Reflector, service: str) -> list[str]:
    """The methods of a service as its reflected descriptor lists them."""
    reflector.resolve(service)
    return [m.name for m in reflector.pool.FindServiceByName(service).methods]


def message_names(files: Iterable[descriptor_pb2.FileDescriptorProto]) -> list[str]:
    """Every message (nested ones too) defined by the files, by full name."""
    names: list[str] = []

    def walk(prefix: str, messages: Iterable[descriptor_pb2.DescriptorProto]) -> None:
        for message in messages:
            name = f"{prefix}.{message.name}" if prefix else message.name
            names.append(name)
            walk(name, message.nested_type)

    for file in files:
        walk(file.package, file.message_type)
    return names
