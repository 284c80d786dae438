"""Each field of the contract is stated once, in proto/: no hand-written module of service/,
engine/, clients/ or testkit/ names a field number or a wire type (answers are built by field
name with the generated classes of gen/, and protobuf encodes them)."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CHECKED = ("service", "engine", "clients", "testkit")
# The golden corpus compares answers as bytes, with the entries of map fields sorted on the
# wire: the one order protobuf leaves to the encoder. It reads encodings; it builds none.
READS_THE_WIRE = ("testkit/golden.py",)
# What only code that encodes by number would name: wire types, varints, generated numbers.
WIRE_NAME = re.compile(r"wire_?type|varint|_FIELD_NUMBER$|fields_by_number", re.IGNORECASE)
WIRE_MODULES = ("google.protobuf.internal",)


def wire_level(source: str) -> Iterator[tuple[int, str]]:
    """Where a source works at the wire level: (line, what)."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Name | ast.Attribute | ast.FunctionDef | ast.arg):
            name = str(
                next(getattr(node, a) for a in ("id", "attr", "name", "arg") if hasattr(node, a))
            )
            if WIRE_NAME.search(name):
                yield node.lineno, name
        elif isinstance(node, ast.Import | ast.ImportFrom):
            modules = [a.name for a in node.names]
            if isinstance(node, ast.ImportFrom):
                modules = [node.module or "", *(f"{node.module}.{m}" for m in modules)]
            for module in modules:
                if module.startswith(WIRE_MODULES):
                    yield node.lineno, f"import {module}"
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.LShift):
            shift = node.right
            if isinstance(shift, ast.Constant) and shift.value == 3:  # number << 3: a key
                yield node.lineno, ast.unparse(node)


@pytest.mark.parametrize(
    "source",
    [
        "def varint(value): ...",
        "key = number << 3 | 2",
        "from google.protobuf.internal import encoder",
        "import google.protobuf.internal.wire_format",
        "n = pb.State.SEQ_FIELD_NUMBER",
        "n = descriptor.fields_by_number[5]",
        "def key(number, wire_type): ...",
    ],
)
def test_the_scan_finds_each_way_of_writing_by_number(source: str) -> None:
    """The check below can fail: each way a module could encode by number is seen."""
    assert list(wire_level(source))


def test_the_scan_passes_building_by_name() -> None:
    """Building and serializing a message by field name is not at the wire level."""
    source = "pb.State(seq=1, floor=['AC']).SerializeToString()\nx = y << n"
    assert [what for _, what in wire_level(source)] == []


def test_no_hand_written_module_names_a_field_number_or_a_wire_type() -> None:
    """Field numbers and wire types live in proto/ and in the generated code alone."""
    found = [
        f"{path.relative_to(REPO)}:{line}: {what}"
        for folder in CHECKED
        for path in sorted((REPO / folder).rglob("*.py"))
        if path.relative_to(REPO).as_posix() not in READS_THE_WIRE
        for line, what in wire_level(path.read_text(encoding="utf-8"))
    ]
    assert len(list((REPO / "service").rglob("*.py"))) > 10
    assert found == []


def test_the_one_module_that_reads_the_wire_is_seen_to() -> None:
    """The exception is needed: the scan finds the golden corpus's wire reading."""
    (name,) = READS_THE_WIRE
    assert list(wire_level((REPO / name).read_text(encoding="utf-8")))
