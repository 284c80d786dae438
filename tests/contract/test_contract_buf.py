"""The contract's checks: buf's breaking-change check against the released image, and its lint.

Each check runs the buf that the set-up installs (.ci/tools/) on a copy of proto/ with one
change, so a test shows that the check refuses that change (or accepts it), not just that the
current contract passes.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from basra.v1 import rules_pb2 as pb
from google.protobuf import descriptor_pb2, json_format
from google.protobuf.message import Message

from service.handlers import Handlers
from service.outcomes import Facts

REPO = Path(__file__).resolve().parents[2]
BUF = REPO / ".ci" / "tools" / "node_modules" / ".bin" / "buf"
RELEASED = REPO / "proto" / "released.binpb"
CONTRACT = Path("proto") / "basra" / "v1" / "rules.proto"


@pytest.fixture(scope="module")
def buf() -> Path:
    """The buf binary of .ci/tools/; its absence is a broken set-up, never a reason to skip."""
    if not BUF.exists():
        pytest.fail(f"buf is missing at {BUF.relative_to(REPO)}: run `bash .ci/setup dev`")
    return BUF


def _workspace(tmp_path: Path, *edits: tuple[str, str]) -> Path:
    """A copy of buf.yaml and proto/ in tmp_path, each (old, new) edit made once in the contract."""
    shutil.copy(REPO / "buf.yaml", tmp_path / "buf.yaml")
    shutil.copytree(REPO / "proto", tmp_path / "proto", ignore=shutil.ignore_patterns("*.py"))
    contract = tmp_path / CONTRACT
    text = contract.read_text(encoding="utf-8")
    for old, new in edits:
        assert text.count(old) == 1, f"the edit must apply exactly once: {old!r}"
        text = text.replace(old, new)
    contract.write_text(text, encoding="utf-8")
    return tmp_path


def _run(buf: Path, workspace: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(buf), *args], cwd=workspace, capture_output=True, text=True, timeout=120, check=False
    )


def _breaking(buf: Path, workspace: Path) -> subprocess.CompletedProcess[str]:
    return _run(buf, workspace, "breaking", "--against", str(RELEASED))


# Each change (its edits, then buf's complaint) breaks a client of the released contract.
BREAKING_CHANGES: dict[str, tuple[list[tuple[str, str]], str]] = {
    "renumbered_field": (
        [
            (
                "(0 for a new match).\n  uint32 seq = 1;\n",
                "(0 for a new match).\n  uint32 seq = 21;\n",
            )
        ],
        r'field "1" with name "seq" on message "State" was deleted',
    ),
    "removed_field": (
        [("  string key_id = 2;\n", "")],
        r'field "2" with name "key_id" on message "SignedState" was deleted',
    ),
    "changed_field_type": ([("  uint32 carry = 7;\n", "  uint64 carry = 7;\n")], r'"carry".*type'),
    "renamed_field": (
        [("  bytes seed = 11;\n", "  bytes match_seed = 11;\n")],
        r'changed name from "seed" to "match_seed"',
    ),
    "renamed_enum_value": (
        [("  STATUS_OVER = 2;\n", "  STATUS_ENDED = 2;\n")],
        r'changed name from "STATUS_OVER" to "STATUS_ENDED"',
    ),
    "renamed_message": (
        [
            ("message Refusal {", "message Rejection {"),
            ("  Refusal refusal = 5;", "  Rejection refusal = 5;"),
        ],
        r'"Refusal" was deleted',
    ),
    "removed_rpc": (
        [("  rpc Replay(ReplayRequest) returns (ReplayResponse);\n", "")],
        r'RPC "Replay" on service "RulesService" was deleted',
    ),
}


@pytest.mark.parametrize("change", sorted(BREAKING_CHANGES))
def test_breaking_check_refuses_a_change_that_breaks_released_clients(
    change: str, buf: Path, tmp_path: Path
) -> None:
    """buf breaking against proto/released.binpb fails, naming the change."""
    edits, complaint = BREAKING_CHANGES[change]
    result = _breaking(buf, _workspace(tmp_path, *edits))
    assert result.returncode != 0, result.stdout + result.stderr
    assert re.search(complaint, result.stdout), result.stdout + result.stderr


def test_breaking_check_accepts_an_added_field(buf: Path, tmp_path: Path) -> None:
    """A new field under a new number is compatible, so the check passes on it."""
    edit = (
        "  repeated string unclaimed = 13;\n",
        "  repeated string unclaimed = 13;\n  uint32 deals = 14;\n",
    )
    result = _breaking(buf, _workspace(tmp_path, edit))
    assert result.returncode == 0, result.stdout + result.stderr


def test_lint_refuses_one_response_for_two_rpcs(buf: Path, tmp_path: Path) -> None:
    """The STANDARD rules apply without exception: a shared response type fails buf lint."""
    edit = (
        "rpc Apply(ApplyRequest) returns (ApplyResponse);",
        "rpc Apply(ApplyRequest) returns (NewMatchResponse);",
    )
    result = _run(buf, _workspace(tmp_path, edit), "lint")
    assert result.returncode != 0, result.stdout + result.stderr
    assert "used as the request or response type for multiple RPCs" in result.stdout


def _shape(message: type[Message]) -> descriptor_pb2.DescriptorProto:
    """A message's definition without its name: fields, numbers, types, reserved numbers."""
    definition = descriptor_pb2.DescriptorProto()
    message.DESCRIPTOR.CopyToProto(definition)
    definition.ClearField("name")
    return definition


def test_new_match_and_apply_responses_have_one_wire_shape() -> None:
    """NewMatchResponse and ApplyResponse differ only in their names."""
    shape = _shape(pb.NewMatchResponse)
    assert shape == _shape(pb.ApplyResponse)
    assert [f.name for f in shape.field][:2] == ["state", "events"]
    assert list(shape.reserved_name) == ["state_signature", "state_key_id"]


def test_an_apply_response_reads_as_a_new_match_response_byte_for_byte() -> None:
    """A gateway may handle both answers alike: each one's bytes read fully as the other."""
    handlers = Handlers()
    first = pb.NewMatchResponse.FromString(
        handlers.new_match(pb.NewMatchRequest(seed=b"one wire shape", labels=["a", "b"]), Facts())
    )
    move = first.legal_moves.moves[0]
    action = pb.Action(seat=first.legal_moves.seat, card=move.card)
    if move.plans:
        action.plan_id = 1
    after = pb.ApplyResponse.FromString(
        handlers.apply(pb.ApplyRequest(state=first.state, action=action), Facts())
    )
    for message, other in ((first, pb.ApplyResponse), (after, pb.NewMatchResponse)):
        data = message.SerializeToString()
        read = other.FromString(data)
        assert json_format.MessageToDict(read) == json_format.MessageToDict(message)
        assert read.SerializeToString() == data
    assert len(after.events) > 0 and after.state.seq == 1
