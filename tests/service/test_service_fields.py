"""Field numbers by name: service/fields.py against the .proto, and no number written by hand.

The .proto is read as text here (not through the generated code), so these tests also fail
when gen/ is out of date with proto/.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from service import fields

REPO = Path(__file__).resolve().parents[2]
PROTO = REPO / "proto" / "basra" / "v1" / "rules.proto"
FIELD = re.compile(r"^\s*(?:optional\s+|repeated\s+)?[\w.]+(?:<[\w\s,]+>)?\s+(\w+)\s*=\s*(\d+)\s*;")
# service/wire.py's helpers that take a field number first.
WIRE_WRITERS = {
    "integer",
    "optional_int",
    "boolean",
    "data",
    "optional_data",
    "text",
    "message",
    "packed",
    "strings",
    "key",
}
SKIPPED_DIRS = {".git", ".venv", "gen", "node_modules", "build"}


def proto_fields(text: str) -> dict[str, dict[str, int]]:
    """Each message of a .proto text, with its fields' numbers by name (oneofs included)."""
    messages: dict[str, dict[str, int]] = {}
    current: str | None = None
    depth = 0
    for raw in text.splitlines():
        line = raw.split("//", 1)[0]
        opened = re.match(r"^\s*message\s+(\w+)\s*\{", line)
        if opened and depth == 0:
            current = opened.group(1)
            messages[current] = {}
        elif current is not None and depth >= 1 and (found := FIELD.match(line)):
            messages[current][found.group(1)] = int(found.group(2))
        depth += line.count("{") - line.count("}")
        if depth == 0:
            current = None
    return messages


def test_the_proto_reader_reads_what_it_must() -> None:
    """The check below can fail: a known message is read with its oneof and map fields."""
    messages = proto_fields(PROTO.read_text(encoding="utf-8"))
    assert messages["State"]["unclaimed"] == 13
    assert messages["Event"]["hidden_deal"] == 12  # inside `oneof kind`
    assert messages["Refusal"]["metadata"] == 3  # a map field
    assert "state_signature" not in messages["ApplyResponse"]  # reserved names are not fields


def test_every_name_is_the_number_of_its_field_in_the_proto() -> None:
    """STATE_TO_MOVE is the number of State.to_move in proto/basra/v1/rules.proto, and so on."""
    messages = proto_fields(PROTO.read_text(encoding="utf-8"))
    by_name = {
        fields.constant_name(message, field): number
        for message, numbers in messages.items()
        for field, number in numbers.items()
    }
    assert len(fields.DECLARED) >= 100
    for name in fields.DECLARED:
        assert getattr(fields, name) == by_name[name], name


def test_every_field_of_a_written_message_is_named() -> None:
    """A field added to a message the service writes cannot be forgotten by the writer."""
    messages = proto_fields(PROTO.read_text(encoding="utf-8"))
    written = {m for m in messages if any(n.startswith(_prefix(m)) for n in fields.DECLARED)}
    assert {"State", "PlayerView", "ApplyResponse", "ReplayResponse", "Event"} <= written
    for message in written:
        for field in messages[message]:
            assert fields.constant_name(message, field) in fields.DECLARED, (message, field)


def _prefix(message: str) -> str:
    return fields.constant_name(message, "")


def numbered_fields(source: str) -> Iterator[tuple[int, str]]:
    """Where a source names a wire field by a literal number: (line, what)."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and node.args:
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            first = node.args[0]
            literal = isinstance(first, ast.Constant) and type(first.value) is int
            if name in WIRE_WRITERS and literal:
                yield node.lineno, f"{name}({ast.unparse(first)}, ...)"
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
            target = node.value
            name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
            if name.endswith("_FIELDS") or name == "fields_by_number":
                yield node.lineno, f"{name}[{node.slice.value!r}]"


@pytest.mark.parametrize(
    "source",
    [
        "integer(3, basras)",
        "wire.message(10, body)",
        "_CARD_FIELDS[1]",
        "descriptor.fields_by_number[5]",
    ],
)
def test_the_scan_finds_a_number_written_by_hand(source: str) -> None:
    """The check below can fail: each way a number could be written is seen."""
    assert list(numbered_fields(source))


def test_no_file_outside_gen_names_a_wire_field_by_number() -> None:
    """Every field number the code writes comes from service/fields.py, by name."""
    found = []
    for path in sorted(REPO.rglob("*.py")):
        if SKIPPED_DIRS & set(path.relative_to(REPO).parts):
            continue
        for line, what in numbered_fields(path.read_text(encoding="utf-8")):
            found.append(f"{path.relative_to(REPO)}:{line}: {what}")
    assert found == []
