"""The plan table's format: the search's complete result for every reachable shape, as bytes.

`build` searches every shape a reachable floor can show, once, ahead of time; the service
ships the result (service/plan_table.py reads and writes the file) and every worker installs
it at start (engine.plans.memo.install_plan_table, with `parse`), so that no reachable floor
is searched for in a live call, not even by a fresh worker. Pure: bytes in, bytes out.

A table is a run of entries, each: the key (KEY_BYTES, little-endian: shape << VALUE_BITS |
value), the record's length (_LENGTH_BYTES, little-endian), the record. A record: the work
(_WORK_BYTES, little-endian), the number of plans, then per plan its positions and its
groups, each a count and that many positions.
"""

from __future__ import annotations

from collections.abc import Iterable

from engine.cards import LOWER_RANKS_MASKS, RANK_MASKS, RANK_VALUES, VALUE_BITS
from engine.facts import FLOOR_CARDS, SUITS
from engine.plans.search import ShapePlans, search_shape

REACHABLE_EXTRA_CARDS = FLOOR_CARDS - 1
"""A floor of reachable shape holds beyond one card per rank at most this many: the first
floor cards less one (docs/rules.md)."""
GROUP_VALUES: tuple[int, ...] = tuple(sorted({v for v in RANK_VALUES if v}))[1:]
"""Played values whose smaller cards can form groups (every numeric value but the lowest)."""
# A key: the shape of the cards below the highest value, then the value.
KEY_BYTES = (
    LOWER_RANKS_MASKS[RANK_VALUES.index(max(RANK_VALUES))].bit_length() + VALUE_BITS + 7
) // 8
_LENGTH_BYTES = 2
_WORK_BYTES = 2
_UNBOUNDED = 1 << 62  # a work limit no search reaches: the table's searches are complete
# The lowest card of each rank: `count` cards of rank r in a shape are ((1 << count) - 1)
# times it.
_RANK_LOW_BIT: tuple[int, ...] = tuple(mask & -mask for mask in RANK_MASKS)


def entry_key(value: int, shape: int) -> int:
    """The table's key of a played value and the shape of the smaller floor cards."""
    return shape << VALUE_BITS | value


def reachable_shapes(value: int) -> list[int]:
    """Every shape of the cards smaller than `value` that a reachable floor can show.

    A numeric card of rank r trails only when no rank-r card lies on the floor, so each rank
    lies there at most max(1, its count among the first floor cards) times: beyond one card
    per rank, at most REACHABLE_EXTRA_CARDS more (docs/rules.md).
    """
    shapes = [0]  # built rank by rank; each rank adds 0..4 cards within the extra budget
    extra = [0]
    for rank in (r for r, rank_value in enumerate(RANK_VALUES) if 0 < rank_value < value):
        grown, grown_extra = [], []
        for shape, used in zip(shapes, extra, strict=True):
            for count in range(len(SUITS) + 1):
                more = used + max(count - 1, 0)
                if more <= REACHABLE_EXTRA_CARDS:
                    grown.append(shape | ((1 << count) - 1) * _RANK_LOW_BIT[rank])
                    grown_extra.append(more)
        shapes, extra = grown, grown_extra
    return sorted(shape for shape in shapes if shape)


def build(values: Iterable[int] = GROUP_VALUES) -> bytes:
    """The table of every reachable shape of `values`, each searched fully; deterministic."""
    out = bytearray()
    for value in values:
        for shape in reachable_shapes(value):
            record = encode(search_shape(value, shape, _UNBOUNDED))
            out += entry_key(value, shape).to_bytes(KEY_BYTES, "little")
            out += len(record).to_bytes(_LENGTH_BYTES, "little") + record
    return bytes(out)


def parse(table: bytes) -> dict[int, bytes]:
    """The records of a table made by `build`, by key."""
    entries: dict[int, bytes] = {}
    at = 0
    while at < len(table):
        entry = int.from_bytes(table[at : at + KEY_BYTES], "little")
        at += KEY_BYTES
        size = int.from_bytes(table[at : at + _LENGTH_BYTES], "little")
        at += _LENGTH_BYTES
        entries[entry] = table[at : at + size]
        at += size
    return entries


def encode(found: ShapePlans) -> bytes:
    """The record of a complete search's result."""
    out = bytearray(found.work.to_bytes(_WORK_BYTES, "little"))
    out.append(len(found.plans))
    for taken, groups in found.plans:
        out += bytes((len(taken), *taken, len(groups)))
        for group in groups:
            out += bytes((len(group), *group))
    return bytes(out)


def decode(record: bytes, limit: int) -> ShapePlans:
    """What a search with `limit` gives, from the record of the complete result."""
    work = int.from_bytes(record[:_WORK_BYTES], "little")
    if work > limit:
        return ShapePlans((), limit + 1)  # where the search stops: one step past the limit
    plans = []
    at = _WORK_BYTES + 1
    for _ in range(record[_WORK_BYTES]):
        size = record[at]
        taken = tuple(record[at + 1 : at + 1 + size])
        at += 1 + size
        groups = []
        for _ in range(record[at]):
            size = record[at + 1]
            groups.append(tuple(record[at + 2 : at + 2 + size]))
            at += 1 + size
        at += 1
        plans.append((taken, tuple(groups)))
    return ShapePlans(tuple(plans), work)
