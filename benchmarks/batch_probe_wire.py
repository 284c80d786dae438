"""The batch probe's own messages and the real Apply work each of its items does.

The probe (benchmarks.batch_probe) needs wrapping messages for a batch and a stream without a
change to proto/, so they are built here at import from a descriptor, as raw bytes: a batch is
`repeated bytes items` (each an encoded basra.v1.ApplyRequest), a result carries the encoded
ApplyResponse or an encoded google.rpc.Status. On the wire that is what `repeated
ApplyRequest` and `oneof {ApplyResponse; google.rpc.Status}` would be, so the figures hold
for the messages a real batch method would declare. `protoset` writes the same descriptor for
ghz.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from basra.v1 import rules_pb2 as pb
from google.protobuf import any_pb2, descriptor_pb2, descriptor_pool, message_factory
from google.rpc import code_pb2, status_pb2  # type: ignore[import-untyped]

from service.errors import Refusal
from service.handlers import Handlers
from service.outcomes import Facts
from service.servicer import reader as _reader
from service.servicer import respond

PACKAGE = "basra.probe.v1"
SERVICE = f"{PACKAGE}.Probe"
NOOP = f"/{SERVICE}/Noop"
APPLY = f"/{SERVICE}/Apply"
BATCH = f"/{SERVICE}/BatchApply"
STREAM = f"/{SERVICE}/StreamApply"
STREAM_NOOP = f"/{SERVICE}/StreamNoop"
WHO = f"/{SERVICE}/Who"
COUNT = f"/{SERVICE}/Count"

_BYTES = descriptor_pb2.FieldDescriptorProto.TYPE_BYTES
_MESSAGE = descriptor_pb2.FieldDescriptorProto.TYPE_MESSAGE
_UINT64 = descriptor_pb2.FieldDescriptorProto.TYPE_UINT64
_REPEATED = descriptor_pb2.FieldDescriptorProto.LABEL_REPEATED
_OPTIONAL = descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL

# name -> its fields (name, number, type, label)
_MESSAGES: dict[str, list[tuple[str, int, int, int]]] = {
    "Items": [("items", 1, _BYTES, _REPEATED)],
    "Result": [("response", 1, _BYTES, _OPTIONAL), ("status", 2, _BYTES, _OPTIONAL)],
    "Results": [("results", 1, _MESSAGE, _REPEATED)],
    "StreamItem": [("id", 1, _UINT64, _OPTIONAL), ("item", 2, _BYTES, _OPTIONAL)],
    "StreamResult": [
        ("id", 1, _UINT64, _OPTIONAL),
        ("response", 2, _BYTES, _OPTIONAL),
        ("status", 3, _BYTES, _OPTIONAL),
    ],
    "Raw": [("data", 1, _BYTES, _OPTIONAL)],
}
# method -> (request, response, client streams, server streams)
_METHODS = {
    "Noop": ("Raw", "Raw", False, False),
    "Apply": (".basra.v1.ApplyRequest", ".basra.v1.ApplyResponse", False, False),
    "BatchApply": ("Items", "Results", False, False),
    "StreamApply": ("StreamItem", "StreamResult", True, True),
    "StreamNoop": ("StreamItem", "StreamResult", True, True),
}


def _file() -> descriptor_pb2.FileDescriptorProto:
    proto = descriptor_pb2.FileDescriptorProto(
        name="basra/probe/v1/probe.proto",
        package=PACKAGE,
        syntax="proto3",
        dependency=[pb.DESCRIPTOR.name],
    )
    for name, fields in _MESSAGES.items():
        message = proto.message_type.add(name=name)
        for field, number, kind, label in fields:
            added = message.field.add(name=field, number=number, type=kind, label=label)
            if kind == _MESSAGE:
                added.type_name = f".{PACKAGE}.Result"
    service = proto.service.add(name="Probe")
    for name, (request, response, client, server) in _METHODS.items():
        service.method.add(
            name=name,
            input_type=_qualified(request),
            output_type=_qualified(response),
            client_streaming=client,
            server_streaming=server,
        )
    return proto


def _qualified(name: str) -> str:
    return name if name.startswith(".") else f".{PACKAGE}.{name}"


# The default pool already holds basra/v1/rules.proto, which the probe's Apply names.
_POOL = descriptor_pool.Default()
_POOL.Add(_file())


def _class(name: str) -> Any:
    return message_factory.GetMessageClass(_POOL.FindMessageTypeByName(f"{PACKAGE}.{name}"))


Items = _class("Items")
Result = _class("Result")
Results = _class("Results")
Raw = _class("Raw")
StreamItem = _class("StreamItem")
StreamResult = _class("StreamResult")


def protoset(path: Path) -> Path:
    """Write the probe's descriptor and its imports as a FileDescriptorSet (ghz --protoset)."""
    files: list[descriptor_pb2.FileDescriptorProto] = []

    def add(file: Any) -> None:
        for dependency in file.dependencies:
            add(dependency)
        if all(f.name != file.name for f in files):
            files.append(descriptor_pb2.FileDescriptorProto())
            file.CopyToProto(files[-1])

    add(pb.DESCRIPTOR)
    files.append(_file())
    path.write_bytes(descriptor_pb2.FileDescriptorSet(file=files).SerializeToString())
    return path


def status_bytes(refusal: Refusal) -> bytes:
    """The google.rpc.Status a unary call refused this way carries (code, message, ErrorInfo)."""
    detail = any_pb2.Any()
    detail.Pack(refusal.error_info())
    code = getattr(code_pb2, refusal.code.name)
    return bytes(
        status_pb2.Status(code=code, message=refusal.message, details=[detail]).SerializeToString()
    )


class ItemWork:
    """One Apply item's work, as the unary servicer does it: read, check, apply, encode."""

    def __init__(self, handlers: Handlers) -> None:
        self._apply: Any = handlers.apply
        self._read = _reader(pb.ApplyRequest)

    def run(self, item: bytes) -> tuple[bytes, bytes]:
        """Return (response, b"") or (b"", status) for one encoded ApplyRequest."""
        outcome = respond(self._apply, self._read(item), Facts())
        if isinstance(outcome, bytes):
            return outcome, b""
        assert isinstance(outcome, Refusal), outcome
        return b"", status_bytes(outcome)
