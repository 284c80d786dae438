"""The golden wire corpus: where it lives, how a case is run through the server, how it is compared.

A case is one request of one RPC, sent to a server of one profile (signing on or off, limits),
with the outcome recorded from the service: the exact response bytes, or the refusal's status
code, details message and google.rpc.ErrorInfo. Requests and responses are stored twice: as
base64 of the exact bytes (what is compared) and as readable JSON (what a person checks).

This module uses only the server's own modules, so that it keeps working however the rest of
the tree is arranged, and runs a request exactly the way grpc does in the server: the
registered request reader, the servicer's `respond` and the registered response serializer
(the handlers answer with the encoded response, which grpc sends as it is).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path
from typing import Any

import grpc
from basra.v1 import rules_pb2 as pb
from google.protobuf import json_format
from google.protobuf.message import DecodeError, Message
from google.rpc import error_details_pb2, status_pb2  # type: ignore[import-untyped]

from service import errors
from service.config import Config
from service.handlers import Handlers
from service.outcomes import Facts
from service.server import make_handlers
from service.servicer import METHODS, RulesServicer, respond
from testkit.registered import method_handlers, request_reader

CORPUS_DIR = Path(__file__).resolve().parents[1] / "tests" / "data" / "golden"
MANIFEST = CORPUS_DIR / "manifest.json"
FORMAT = 1
RECORD_COMMAND = ".venv/bin/python -m tests.golden.record_corpus"

# The handler of each RPC, by the RPC's name in the .proto.
HANDLER_NAMES: Mapping[str, str] = {
    "NewMatch": "new_match",
    "Apply": "apply",
    "LegalMoves": "legal_moves",
    "PlayerView": "player_view",
    "Replay": "replay",
    "SuggestMove": "suggest_move",
}
OK = "OK"
# A message type's descriptor (protobuf's pure-Python and upb descriptors read the same way).
Descriptor = Any


def to_json(message: Message) -> dict[str, Any]:
    """The readable form of a message: proto field names, every field shown, enums by name."""
    data = json_format.MessageToDict(
        message, preserving_proto_field_name=True, always_print_fields_with_no_presence=True
    )
    _sort_maps(message.DESCRIPTOR, data)
    return data


def _sort_maps(descriptor: Descriptor, data: dict[str, Any]) -> None:
    """Put the keys of every map in sorted order, so that a re-recording writes the same text."""
    for field in descriptor.fields:
        inner = field.message_type
        if inner is None or field.name not in data:
            continue
        if inner.GetOptions().map_entry:
            data[field.name] = dict(sorted(data[field.name].items()))
            continue
        if not _holds_map(inner):
            continue
        values = data[field.name]
        for value in values if isinstance(values, list) else [values]:
            _sort_maps(inner, value)


def b64(data: bytes) -> str:
    """Base64 text of bytes."""
    return base64.b64encode(data).decode("ascii")


def unb64(text: str) -> bytes:
    """Bytes of base64 text, refusing anything that is not strict base64."""
    return base64.b64decode(text, validate=True)


@dataclass(frozen=True, slots=True)
class Profile:
    """The configuration of the server a case is sent to."""

    name: str
    config: Config
    drawn_seed: bytes
    """What the server's seed source gives NewMatch when the request carries no seed."""

    def handlers(self) -> Handlers:
        """The handlers the server builds from this configuration, with the fixed seed source."""
        seed = self.drawn_seed
        return replace(make_handlers(self.config, None), draw_seed=lambda: seed)


# Config fields a profile may set; everything else stays at the server's default.
PROFILE_FIELDS = ("signing_keys", "max_message_bytes", "max_replay_actions", "plan_work_limit")


def profile_from_json(name: str, data: Mapping[str, Any]) -> Profile:
    """A profile from its manifest entry."""
    settings = {k: data[k] for k in PROFILE_FIELDS if k in data}
    config = Config(host="127.0.0.1", port=0, reflection=False, **settings)
    return Profile(name, config, unb64(data["drawn_seed"]))


@dataclass(frozen=True, slots=True)
class Outcome:
    """How a call ended: OK with its response bytes, or a refusal's code, details and ErrorInfo."""

    code: str
    body: bytes = b""
    details: str = ""
    reason: str = ""
    domain: str = ""
    metadata: tuple[tuple[str, str], ...] = ()

    @staticmethod
    def refused(code: grpc.StatusCode, details: str, trailing: Any) -> Outcome:
        """The outcome of a refusal from its status code, details and trailing metadata."""
        infos = []
        for key, value in trailing or ():
            if key != errors.DETAILS_KEY:
                continue
            rich = status_pb2.Status.FromString(value)
            # The rich status repeats the code and message; they must agree with the call's.
            assert rich.code == code.value[0] and rich.message == details, rich
            for detail in rich.details:
                info = error_details_pb2.ErrorInfo()
                assert detail.Unpack(info), f"a detail that is not an ErrorInfo: {detail}"
                infos.append(info)
        assert len(infos) == 1, f"a refusal carries exactly one ErrorInfo, not {len(infos)}"
        (info,) = infos
        metadata = tuple(sorted(info.metadata.items()))
        return Outcome(code.name, b"", details, info.reason, info.domain, metadata)

    def to_json(self, rpc: str) -> dict[str, Any]:
        """The stored form: bytes and readable JSON for OK, the refusal's parts otherwise."""
        if self.code == OK:
            kind = METHODS[rpc][1]
            body = canonical(kind, self.body)
            return {"code": OK, "bytes": b64(body), "json": to_json(kind.FromString(body))}
        return {
            "code": self.code,
            "details": self.details,
            "error_info": {
                "reason": self.reason,
                "domain": self.domain,
                "metadata": dict(self.metadata),
            },
        }

    @staticmethod
    def from_json(data: Mapping[str, Any]) -> Outcome:
        """The outcome a stored case expects."""
        if data["code"] == OK:
            return Outcome(OK, unb64(data["bytes"]))
        info = data["error_info"]
        metadata = tuple(sorted(info["metadata"].items()))
        return Outcome(data["code"], b"", data["details"], info["reason"], info["domain"], metadata)


@dataclass(frozen=True, slots=True)
class Case:
    """One stored request and the outcome the service gave it."""

    id: str
    profile: str
    rpc: str
    request: bytes
    expected: Outcome
    data: Mapping[str, Any]
    """The case as stored (readable request and response included)."""


Runner = Callable[[str, bytes], Outcome]


def in_process_runners() -> dict[str, Runner]:
    """A runner for every profile of the corpus."""
    return {name: in_process(profile) for name, profile in load_profiles().items()}


def in_process(profile: Profile, handlers: Handlers | None = None) -> Runner:
    """Run request bytes the way the server does: its reader and `respond`."""
    chosen = handlers or profile.handlers()
    limit = profile.config.max_message_bytes
    registered = method_handlers(RulesServicer(chosen), limit)
    readers = {rpc: request_reader(handler) for rpc, handler in registered.items()}
    methods = {rpc: getattr(chosen, name) for rpc, name in HANDLER_NAMES.items()}

    def run(rpc: str, data: bytes) -> Outcome:
        outcome = respond(methods[rpc], readers[rpc](data), Facts())
        if isinstance(outcome, bytes):  # the handlers answer encoded
            return Outcome(OK, outcome)
        status = outcome.status()
        return Outcome.refused(status.code, status.details, status.trailing_metadata)

    return run


@cache
def _holds_map(descriptor: Descriptor) -> bool:
    """Whether a message type has a map field, itself or in a message field below it."""
    for field in descriptor.fields:
        if field.message_type is None:
            continue
        if field.message_type.GetOptions().map_entry:
            return True
        if field.message_type is not descriptor and _holds_map(field.message_type):
            return True
    return False


def canonical(kind: type[Message], data: bytes) -> bytes:
    """The encoding of a message holding a map, re-encoded deterministically; any other as is.

    Protobuf leaves the order of map entries to the encoder, and the upb encoder's order
    changes from process to process (a Replay refusal's metadata); deterministic serialization
    writes them sorted by key. The service writes every answer with protobuf (service/writing),
    so only that order may differ between two encodings that count as the same bytes.
    """
    if not _holds_map(kind.DESCRIPTOR):
        return data
    encoded: bytes = kind.FromString(data).SerializeToString(deterministic=True)
    return encoded


def same(rpc: str, expected: Outcome, actual: Outcome) -> bool:
    """Whether an outcome is the recorded one: same bytes (map entries in any order) or refusal."""
    if expected.code != actual.code:
        return False
    if expected.code != OK:
        return expected == actual
    kind = METHODS[rpc][1]
    try:
        return canonical(kind, expected.body) == canonical(kind, actual.body)
    except DecodeError:  # an answer that is no encoding of its type
        return False


def load_manifest() -> dict[str, Any]:
    """The corpus manifest: format, profiles, case files."""
    manifest: dict[str, Any] = json.loads(MANIFEST.read_text(encoding="utf-8"))
    assert manifest["format"] == FORMAT, f"corpus format {manifest['format']}, expected {FORMAT}"
    return manifest


def load_profiles() -> dict[str, Profile]:
    """Every profile of the corpus, by name."""
    profiles = load_manifest()["profiles"]
    return {name: profile_from_json(name, data) for name, data in profiles.items()}


def case_from_json(data: Mapping[str, Any]) -> Case:
    """A case from its stored form."""
    request = unb64(data["request"]["bytes"])
    expected = Outcome.from_json(data["expect"])
    return Case(data["id"], data["profile"], data["rpc"], request, expected, data)


@cache
def load_cases() -> tuple[Case, ...]:
    """Every case of the corpus, in file order (read once per process)."""
    cases: list[Case] = []
    for name in load_manifest()["files"]:
        stored = json.loads((CORPUS_DIR / name).read_text(encoding="utf-8"))
        cases.extend(case_from_json(c) for c in stored)
    return tuple(cases)


def mismatches(
    cases: Iterable[Case], runners: Mapping[str, Runner], stop_at_first: bool = False
) -> list[str]:
    """The ids of the cases whose outcome differs from the recorded one."""
    found: list[str] = []
    for case in cases:
        if not same(case.rpc, case.expected, runners[case.profile](case.rpc, case.request)):
            found.append(case.id)
            if stop_at_first:
                break
    return found


def match_response(rpc: str, body: bytes) -> pb.NewMatchResponse | pb.ApplyResponse:
    """Parse the answer of NewMatch or Apply (the two carry the same fields)."""
    if rpc == "NewMatch":
        return pb.NewMatchResponse.FromString(body)
    return pb.ApplyResponse.FromString(body)
