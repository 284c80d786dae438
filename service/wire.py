"""Protobuf wire format, written directly: the few encodings basra.v1's answers are made of.

Answers are the service's hot path. Building them as protobuf messages field by field costs
more than the rules themselves (with the upb backend every child message handed to a parent
is copied by a full encode and decode), so service.writing writes their bytes with these
helpers instead. Every helper writes a field exactly as protobuf's own encoder does: fields
in field-number order, proto3 scalars left out when they hold their default, optional ones
written whenever set, repeated scalars of numbers packed. The golden wire corpus
(tests/golden) holds the result to the bytes protobuf itself wrote.
"""

from __future__ import annotations

from collections.abc import Iterable

VARINT = 0
LENGTH_DELIMITED = 2
_UINT64 = (1 << 64) - 1
# Varints of the small numbers that fill answers (seats, counts, lengths of parts).
_SMALL = 1 << 14


def _encode_varint(value: int) -> bytes:
    if value < 0:
        value &= _UINT64  # int32 and int64 negatives take ten bytes, as in protobuf
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


_VARINTS: tuple[bytes, ...] = tuple(_encode_varint(n) for n in range(_SMALL))
# Whole integer fields of the small values, per field number below 16 (one-byte keys); the
# value 0 of a proto3 field is the empty encoding.
_SMALL_FIELDS = 1 << 10
_INTEGER_FIELDS: tuple[tuple[bytes, ...], ...] = tuple(
    (b"", *(bytes([n << 3]) + _VARINTS[v] for v in range(1, _SMALL_FIELDS))) for n in range(16)
)


def varint(value: int) -> bytes:
    """The varint encoding of an integer (negatives as 64-bit two's complement)."""
    if 0 <= value < _SMALL:
        return _VARINTS[value]
    return _encode_varint(value)


def key(number: int, wire_type: int) -> bytes:
    """The key of a field: its number and wire type."""
    return varint(number << 3 | wire_type)


def integer(number: int, value: int) -> bytes:
    """A proto3 integer field (uint32, int32, enum): left out when 0."""
    if 0 <= value < _SMALL_FIELDS and number < 16:
        return _INTEGER_FIELDS[number][value]
    if not value:
        return b""
    return key(number, VARINT) + varint(value)


def optional_int(number: int, value: int | None) -> bytes:
    """An `optional` integer field: written whenever set, 0 included."""
    if value is None:
        return b""
    if 0 < value < _SMALL_FIELDS and number < 16:
        return _INTEGER_FIELDS[number][value]
    return key(number, VARINT) + varint(value)


def boolean(number: int, value: bool) -> bytes:
    """A proto3 bool field: left out when false."""
    return key(number, VARINT) + b"\x01" if value else b""


def data(number: int, value: bytes) -> bytes:
    """A proto3 bytes field: left out when empty."""
    if not value:
        return b""
    return key(number, LENGTH_DELIMITED) + varint(len(value)) + value


def optional_data(number: int, value: bytes | None) -> bytes:
    """An `optional` bytes field: written whenever set, empty included."""
    if value is None:
        return b""
    return key(number, LENGTH_DELIMITED) + varint(len(value)) + value


def text(number: int, value: str) -> bytes:
    """A proto3 string field (UTF-8): left out when empty."""
    return data(number, value.encode()) if value else b""


def message(number: int, body: bytes) -> bytes:
    """A message field that is set (written even when its own fields are all default)."""
    size = len(body)
    if number < 16 and size < _SMALL:
        return _MESSAGE_KEYS[number] + _VARINTS[size] + body
    return key(number, LENGTH_DELIMITED) + varint(size) + body


_MESSAGE_KEYS = tuple(bytes([n << 3 | LENGTH_DELIMITED]) for n in range(16))


def packed(number: int, values: Iterable[int]) -> bytes:
    """A repeated integer field, packed (proto3's default); left out when empty."""
    body = b"".join(map(varint, values))
    return message(number, body) if body else b""


def strings(number: int, values: Iterable[str]) -> tuple[bytes, ...]:
    """Per value, the whole field of one element of a repeated string field."""
    return tuple(key(number, LENGTH_DELIMITED) + data_of(v) for v in values)


def data_of(value: str) -> bytes:
    """A string's length-prefixed UTF-8 payload."""
    encoded = value.encode()
    return varint(len(encoded)) + encoded
