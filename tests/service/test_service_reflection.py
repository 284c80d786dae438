"""Server reflection as real clients use it: what ghz and grpcurl ask, over v1 and v1alpha.

ghz resolves `call` with one `file_containing_symbol` for the method's full name
(`basra.v1.RulesService.Apply`); grpcurl asks `list` (list_services), `describe X`
(file_containing_symbol of X: a service, method or message) and, for a call, the service;
both then ask `file_by_filename` for any import the answer lacked. Every such question must be
answered, identically over both protocols, by the server; and grpcurl itself (a Go client
nobody here wrote) must list, describe and call.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from google.protobuf import descriptor_pb2
from grpc_reflection.v1alpha import reflection_pb2 as pb

from service.config import Config
from testkit import reflection as reflect
from testkit.calls import InProcess, start_server

RULES_FILE = "basra/v1/rules.proto"
HEALTH = "grpc.health.v1.Health"
V1 = "grpc.reflection.v1.ServerReflection"
V1ALPHA = "grpc.reflection.v1alpha.ServerReflection"
GRPCURL = Path(sys.executable).parent / "grpcurl"
NOT_FOUND = grpc.StatusCode.NOT_FOUND.value[0]


@pytest.fixture(scope="module")
def server() -> Iterator[InProcess]:
    """A server with the default configuration (reflection on)."""
    started = start_server(Config())
    yield started
    started.close()


def _both(server: InProcess, requests: list[pb.ServerReflectionRequest]) -> list[bytes]:
    """Ask over v1 and v1alpha on one stream each; the answers must be the same bytes."""
    v1 = reflect.ask(server.channel, requests, "v1")
    v1alpha = reflect.ask(server.channel, requests, "v1alpha")
    assert len(v1) == len(requests)
    for request, answer in zip(requests, v1, strict=True):
        assert answer.original_request == request
    encoded = [a.SerializeToString() for a in v1]
    assert encoded == [a.SerializeToString() for a in v1alpha]
    return encoded


def _rules_files(server: InProcess) -> list[descriptor_pb2.FileDescriptorProto]:
    (answer,) = reflect.ask(server.channel, [reflect.filename_request(RULES_FILE)])
    return reflect.files_of(answer)


def _defines(file: descriptor_pb2.FileDescriptorProto, symbol: str) -> bool:
    """Whether a file defines the service, method or message of that full name."""
    services = {f"{file.package}.{s.name}": {m.name for m in s.method} for s in file.service}
    service, _, method = symbol.rpartition(".")
    return (
        symbol in services
        or method in services.get(service, set())
        or symbol in reflect.message_names([file])
    )


def test_both_protocols_list_the_same_services_and_themselves(server: InProcess) -> None:
    """`grpcurl list`: the rules service, health, and reflection v1 and v1alpha."""
    (encoded,) = _both(server, [reflect.list_request()])
    answer = pb.ServerReflectionResponse.FromString(encoded)
    names = [s.name for s in answer.list_services_response.service]
    assert names == sorted([reflect.RULES_SERVICE, HEALTH, V1, V1ALPHA])


def test_every_symbol_ghz_and_grpcurl_ask_for_is_answered(server: InProcess) -> None:
    """file_containing_symbol of each service, each method (ghz's question), each message,
    for the rules, health and reflection services; each answer starts with the file that
    defines the symbol, then carries its imports."""
    rules = _rules_files(server)[0]
    symbols = [reflect.RULES_SERVICE]
    symbols += [f"{reflect.RULES_SERVICE}.{m.name}" for m in rules.service[0].method]
    symbols += reflect.message_names([rules])
    symbols += [f"{HEALTH}.Check", f"{HEALTH}.Watch", "grpc.health.v1.HealthCheckRequest"]
    for service in (V1, V1ALPHA):
        symbols += [service, f"{service}.ServerReflectionInfo"]
        symbols += [f"{service.rpartition('.')[0]}.ServerReflectionRequest"]
    assert len(symbols) > 40
    answers = _both(server, [reflect.symbol_request(s) for s in symbols])
    for symbol, encoded in zip(symbols, answers, strict=True):
        files = reflect.files_of(pb.ServerReflectionResponse.FromString(encoded))
        assert _defines(files[0], symbol), (symbol, files[0].name)
        names = [f.name for f in files]
        assert len(set(names)) == len(names)
        assert set(files[0].dependency) <= set(names[1:])


def test_a_method_is_answered_with_its_services_file(server: InProcess) -> None:
    """The question grpcio-reflection answered NOT_FOUND (grpc/grpc#34743, bojand/ghz#419)."""
    answers = _both(
        server,
        [
            reflect.symbol_request(f"{reflect.RULES_SERVICE}.Apply"),
            reflect.symbol_request(reflect.RULES_SERVICE),
            reflect.filename_request(RULES_FILE),
        ],
    )
    assert answers[0][-40:] == answers[1][-40:]  # the same file, echoing another request
    by_method = pb.ServerReflectionResponse.FromString(answers[0])
    by_name = pb.ServerReflectionResponse.FromString(answers[2])
    assert (
        by_method.file_descriptor_response.file_descriptor_proto
        == by_name.file_descriptor_response.file_descriptor_proto
    )
    assert reflect.files_of(by_method)[0].name == RULES_FILE


@pytest.mark.parametrize(
    "request_",
    [
        reflect.symbol_request(f"{reflect.RULES_SERVICE}.Shuffle"),
        reflect.symbol_request("basra.v1.Nothing"),
        reflect.symbol_request("basra.v9.RulesService.Apply"),
        reflect.symbol_request(""),
        reflect.filename_request("basra/v1/none.proto"),
        pb.ServerReflectionRequest(all_extension_numbers_of_type="basra.v1.Nothing"),
        pb.ServerReflectionRequest(
            file_containing_extension=pb.ExtensionRequest(
                containing_type="basra.v1.State", extension_number=100
            )
        ),
    ],
    ids=lambda r: str(r).strip().replace("\n", " "),
)
def test_unknown_names_are_not_found(
    server: InProcess, request_: pb.ServerReflectionRequest
) -> None:
    """An error answer on the stream (NOT_FOUND), which then goes on answering."""
    encoded, after = _both(server, [request_, reflect.list_request()])
    answer = pb.ServerReflectionResponse.FromString(encoded)
    assert answer.error_response.error_code == NOT_FOUND
    assert pb.ServerReflectionResponse.FromString(after).list_services_response.service


def test_a_request_asking_nothing_is_invalid(server: InProcess) -> None:
    (encoded,) = _both(server, [pb.ServerReflectionRequest(host="x")])
    answer = pb.ServerReflectionResponse.FromString(encoded)
    assert answer.error_response.error_code == grpc.StatusCode.INVALID_ARGUMENT.value[0]


def test_extension_numbers_of_a_message_without_extensions(server: InProcess) -> None:
    """grpcurl asks this of the types it formats; proto3 messages have none."""
    request = pb.ServerReflectionRequest(all_extension_numbers_of_type="basra.v1.ApplyRequest")
    (encoded,) = _both(server, [request])
    answer = pb.ServerReflectionResponse.FromString(encoded).all_extension_numbers_response
    assert answer.base_type_name == "basra.v1.ApplyRequest"
    assert list(answer.extension_number) == []


def _shape(file: descriptor_pb2.FileDescriptorProto) -> object:
    """A file's messages and service with the package left out of every type name."""
    short = file.package + "."
    messages = {
        m.name: [
            (f.name, f.number, f.type, f.label, f.type_name.replace(short, ""), f.oneof_index)
            for f in m.field
        ]
        for m in file.message_type
    }
    methods = [
        (
            m.name,
            m.input_type.replace(short, ""),
            m.output_type.replace(short, ""),
            m.client_streaming,
            m.server_streaming,
        )
        for s in file.service
        for m in s.method
    ]
    oneofs = {m.name: [o.name for o in m.oneof_decl] for m in file.message_type}
    return messages, methods, oneofs


def test_v1_is_v1alpha_under_another_package(server: InProcess) -> None:
    """The v1 descriptor the server gives (and decodes v1 streams by) has v1alpha's messages,
    fields, numbers and types: the wire is the same, so one answer serves both."""
    v1, v1alpha = reflect.ask(
        server.channel, [reflect.symbol_request(V1), reflect.symbol_request(V1ALPHA)]
    )
    (v1_file,) = reflect.files_of(v1)
    (v1alpha_file,) = reflect.files_of(v1alpha)
    assert (v1_file.package, v1alpha_file.package) == (
        "grpc.reflection.v1",
        "grpc.reflection.v1alpha",
    )
    assert v1_file.name == "grpc/reflection/v1/reflection.proto"
    assert _shape(v1_file) == _shape(v1alpha_file)
    assert len(v1_file.message_type) >= 8


def test_one_stream_answers_each_request_in_order(server: InProcess) -> None:
    requests = [
        reflect.list_request(),
        reflect.symbol_request(f"{reflect.RULES_SERVICE}.SuggestMove"),
        reflect.filename_request("nowhere.proto"),
        reflect.symbol_request("basra.v1.State"),
    ]
    answers = [pb.ServerReflectionResponse.FromString(a) for a in _both(server, requests)]
    kinds = [a.WhichOneof("message_response") for a in answers]
    assert kinds == [
        "list_services_response",
        "file_descriptor_response",
        "error_response",
        "file_descriptor_response",
    ]


def test_no_reflection_turns_both_protocols_off() -> None:
    off = start_server(Config(reflection=False))
    try:
        for protocol in ("v1", "v1alpha"):
            with pytest.raises(grpc.RpcError) as raised:
                reflect.ask(off.channel, [reflect.list_request()], protocol)
            assert raised.value.code() is grpc.StatusCode.UNIMPLEMENTED
    finally:
        off.close()


def _grpcurl(server: InProcess, *args: str, flags: tuple[str, ...] = ()) -> str:
    """grpcurl [flags] ADDRESS args..., as its usage line has it."""
    done = subprocess.run(
        [str(GRPCURL), "-plaintext", *flags, f"127.0.0.1:{server.port}", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_grpcurl_lists_describes_and_calls(server: InProcess) -> None:
    """grpcurl (a Go client) by reflection alone: list, describe a method, call by name."""
    assert _grpcurl(server, "list").split() == sorted([reflect.RULES_SERVICE, HEALTH, V1, V1ALPHA])
    described = _grpcurl(server, "describe", f"{reflect.RULES_SERVICE}.Apply")
    assert described.splitlines() == [
        f"{reflect.RULES_SERVICE}.Apply is a method:",
        "rpc Apply ( .basra.v1.ApplyRequest ) returns ( .basra.v1.ApplyResponse );",
    ]
    health = _grpcurl(server, "describe", f"{HEALTH}.Check")
    assert health.startswith(f"{HEALTH}.Check is a method:")
    methods = _grpcurl(server, "list", reflect.RULES_SERVICE).split()
    assert methods == [f"{reflect.RULES_SERVICE}.{m}" for m in sorted(reflect.RULE_RPCS)]
    for name in (f"{reflect.RULES_SERVICE}.NewMatch", f"{reflect.RULES_SERVICE}/NewMatch"):
        answer = json.loads(_grpcurl(server, name, flags=("-d", '{"seed": "AQ=="}')))
        assert answer["state"]["seats"] and answer["legal_moves"]["moves"], answer


def test_grpcurl_prints_a_batch_item_refusal_with_its_error_info() -> None:
    """A BatchApply item's status holds google.protobuf.Any details: grpcurl resolves their
    type (google.rpc.ErrorInfo) through reflection and prints the reason and metadata."""
    server = start_server(Config())
    try:
        start = json.loads(
            _grpcurl(server, f"{reflect.RULES_SERVICE}.NewMatch", flags=("-d", "{}"))
        )
        state = start["state"]
        action = {"seat": state["to_move"], "card": start["legal_moves"]["moves"][0]["card"]}
        stale = {"state": state, "action": action, "expected_seq": state.get("seq", 0) + 1}
        request = json.dumps({"requests": [stale]})
        answer = json.loads(
            _grpcurl(server, f"{reflect.RULES_SERVICE}.BatchApply", flags=("-d", request))
        )
    finally:
        server.close()
    (result,) = answer["results"]
    assert result["status"]["code"] == grpc.StatusCode.ABORTED.value[0]
    (detail,) = result["status"]["details"]
    assert detail["@type"] == "type.googleapis.com/google.rpc.ErrorInfo"
    assert detail["reason"] == "SEQ_MISMATCH"
    assert detail["metadata"] == {"seq": "0", "expectedSeq": "1"}
