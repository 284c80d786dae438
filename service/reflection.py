"""gRPC server reflection, v1 and v1alpha, answering for methods as real clients ask.

grpcio-reflection serves v1alpha only, and its `file_containing_symbol` finds services and
messages but not methods: ghz and `grpcurl describe` ask for `basra.v1.RulesService.Apply`
and got NOT_FOUND. Here the one answering function serves both protocols, whose messages are
the same fields under another package name (v1 is v1alpha promoted), so each stream decodes
and encodes with grpcio-reflection's v1alpha classes. The v1 descriptor itself, which a client
may ask for like any other, is derived from v1alpha's by renaming its package: nothing is
copied in from the protocol's .proto.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import grpc
from google.protobuf import descriptor_pb2, descriptor_pool
from google.protobuf.descriptor import FileDescriptor
from grpc_reflection.v1alpha import reflection_pb2 as pb

V1ALPHA_PACKAGE = "grpc.reflection.v1alpha"
V1_PACKAGE = "grpc.reflection.v1"
V1ALPHA_SERVICE = f"{V1ALPHA_PACKAGE}.ServerReflection"
V1_SERVICE = f"{V1_PACKAGE}.ServerReflection"
# Newer clients (grpcurl 1.9+, buf curl, grpc-java tooling) ask v1 first; ghz asks v1alpha.
SERVICE_NAMES = (V1_SERVICE, V1ALPHA_SERVICE)
METHOD = "ServerReflectionInfo"
V1_FILE = "grpc/reflection/v1/reflection.proto"


def v1_file_proto() -> descriptor_pb2.FileDescriptorProto:
    """Return the v1 reflection protocol's descriptor: v1alpha's under the v1 package."""
    proto = descriptor_pb2.FileDescriptorProto()
    pb.DESCRIPTOR.CopyToProto(proto)
    proto.name = V1_FILE
    proto.package = V1_PACKAGE
    proto.ClearField("options")  # v1alpha's say "deprecated" and name v1alpha's packages
    old, new = f".{V1ALPHA_PACKAGE}.", f".{V1_PACKAGE}."
    for message in proto.message_type:
        for field in message.field:
            if field.HasField("type_name"):
                field.type_name = field.type_name.replace(old, new)
    for service in proto.service:
        for method in service.method:
            method.input_type = method.input_type.replace(old, new)
            method.output_type = method.output_type.replace(old, new)
    return proto


def _v1_pool() -> descriptor_pool.DescriptorPool:
    """A pool of its own for the v1 file, so the default pool never holds a hand-made file."""
    pool = descriptor_pool.DescriptorPool()
    pool.Add(v1_file_proto())
    return pool


def _error(
    request: pb.ServerReflectionRequest, code: grpc.StatusCode
) -> pb.ServerReflectionResponse:
    return pb.ServerReflectionResponse(
        error_response=pb.ErrorResponse(error_code=code.value[0], error_message=code.value[1]),
        original_request=request,
    )


def _with_dependencies(file: FileDescriptor) -> list[FileDescriptor]:
    """The file first, then every file it imports, directly or not, each once."""
    found = [file]
    names = {file.name}
    for current in found:  # grows while it is walked: a breadth-first walk
        for dependency in current.dependencies:
            if dependency.name not in names:
                names.add(dependency.name)
                found.append(dependency)
    return found


class Reflection:
    """Answers reflection requests about the given services from the descriptor pools."""

    def __init__(self, service_names: Iterable[str]) -> None:
        self._services = tuple(sorted(set(service_names)))
        self._pools = (descriptor_pool.Default(), _v1_pool())

    def answer(self, request: pb.ServerReflectionRequest) -> pb.ServerReflectionResponse:
        """Return the answer to one request of a reflection stream."""
        kind = request.WhichOneof("message_request")
        if kind == "list_services":
            return pb.ServerReflectionResponse(
                list_services_response=pb.ListServiceResponse(
                    service=[pb.ServiceResponse(name=name) for name in self._services]
                ),
                original_request=request,
            )
        if kind == "file_by_filename":
            return self._files(request, self._file_named(request.file_by_filename))
        if kind == "file_containing_symbol":
            return self._files(request, self._file_holding(request.file_containing_symbol))
        if kind == "file_containing_extension":
            extension = request.file_containing_extension
            found = self._extension_file(extension.containing_type, extension.extension_number)
            return self._files(request, found)
        if kind == "all_extension_numbers_of_type":
            return self._extension_numbers(request, request.all_extension_numbers_of_type)
        return _error(request, grpc.StatusCode.INVALID_ARGUMENT)

    def _files(
        self, request: pb.ServerReflectionRequest, file: FileDescriptor | None
    ) -> pb.ServerReflectionResponse:
        if file is None:
            return _error(request, grpc.StatusCode.NOT_FOUND)
        return pb.ServerReflectionResponse(
            file_descriptor_response=pb.FileDescriptorResponse(
                file_descriptor_proto=[f.serialized_pb for f in _with_dependencies(file)]
            ),
            original_request=request,
        )

    def _file_named(self, name: str) -> FileDescriptor | None:
        for pool in self._pools:
            try:
                return pool.FindFileByName(name)
            except KeyError:
                continue
        return None

    def _file_holding(self, symbol: str) -> FileDescriptor | None:
        """The file that defines a message, enum, field, service or method of that full name."""
        symbol = symbol.removeprefix(".")
        for pool in self._pools:
            try:
                return pool.FindFileContainingSymbol(symbol)
            except KeyError:
                pass
            # The pool resolves services but not their methods: look the method up in its service.
            service_name, _, method = symbol.rpartition(".")
            try:
                service = pool.FindServiceByName(service_name)
            except KeyError:
                continue
            if method in service.methods_by_name:
                return service.file
        return None

    def _extension_file(self, containing_type: str, number: int) -> FileDescriptor | None:
        for pool in self._pools:
            try:
                message = pool.FindMessageTypeByName(containing_type)
                extension = pool.FindExtensionByNumber(message, number)
                return pool.FindFileContainingSymbol(extension.full_name)
            except KeyError:
                continue
        return None

    def _extension_numbers(
        self, request: pb.ServerReflectionRequest, type_name: str
    ) -> pb.ServerReflectionResponse:
        for pool in self._pools:
            try:
                message = pool.FindMessageTypeByName(type_name)
            except KeyError:
                continue
            numbers = sorted(extension.number for extension in pool.FindAllExtensions(message))
            return pb.ServerReflectionResponse(
                all_extension_numbers_response=pb.ExtensionNumberResponse(
                    base_type_name=message.full_name, extension_number=numbers
                ),
                original_request=request,
            )
        return _error(request, grpc.StatusCode.NOT_FOUND)

    def stream(
        self, requests: Iterator[pb.ServerReflectionRequest], context: Any
    ) -> Iterator[pb.ServerReflectionResponse]:
        """The ServerReflectionInfo stream: one answer per request."""
        for request in requests:
            yield self.answer(request)


def add_to_server(server: grpc.Server, service_names: Iterable[str]) -> None:
    """Serve reflection v1 and v1alpha on `server`, listing `service_names` and themselves."""
    reflection = Reflection([*service_names, *SERVICE_NAMES])
    handler = grpc.stream_stream_rpc_method_handler(
        reflection.stream,
        request_deserializer=pb.ServerReflectionRequest.FromString,
        response_serializer=pb.ServerReflectionResponse.SerializeToString,
    )
    server.add_generic_rpc_handlers(
        [grpc.method_handlers_generic_handler(name, {METHOD: handler}) for name in SERVICE_NAMES]
    )
