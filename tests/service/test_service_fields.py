"""Each field of the contract is stated once, in proto/: no hand-written module names a field
number or a wire type (answers are built by field name with the generated classes of gen/,
protobuf encodes and parses them, and the golden corpus orders map entries by protobuf's
deterministic serialization)."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CHECKED = ("service", "engine", "wire", "clients", "testkit", "tests", "benchmarks", "proto")
# This file names what it looks for.
SCANNER = Path(__file__).resolve()
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
        elif isinstance(node, ast.BinOp) and isinstance(node.right, ast.Constant):
            value = node.right.value
            if isinstance(node.op, ast.LShift | ast.RShift) and value == 3:  # a key's number
                yield node.lineno, ast.unparse(node)
            elif isinstance(node.op, ast.BitAnd | ast.BitOr) and value in (0x7F, 0x80):
                yield node.lineno, ast.unparse(node)  # a varint's groups of 7 bits


@pytest.mark.parametrize(
    "source",
    [
        "def varint(value): ...",
        "key = number << 3 | 2",
        "number, kind = key >> 3, key & 7",
        "out.append(size & 0x7F | 0x80)",
        "more = byte & 0x80",
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
        if path != SCANNER
        for line, what in wire_level(path.read_text(encoding="utf-8"))
    ]
    assert len(list((REPO / "service").rglob("*.py"))) > 10
    assert found == []
