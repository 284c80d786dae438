"""The memos of plan generation, and the plan table installed beneath them.

Two levels: the plans of a card kind per relevant part of the floor (the rule's, in
engine.plans.rule), and below it the search per (value, shape of the smaller floor cards),
which reads the installed plan table before searching; taken_cards maps a shape's result
onto the real cards. Two and no more: the plans memo answers most calls and the shape memo
spares a miss its table record or search, while a memo between them would answer only on a
plans-memo miss and hold nested tuples.

Every memo here, and the bot's (engine.bot.moves), takes one packed integer and holds plain
tuples of ints, which the cyclic garbage collector does not track, so full memos add nothing
to its pauses. Nested values are untracked only a level per collection, so callers that meet
many floors no match reaches (the bot's search) compute through unkept_plans instead.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from typing import TYPE_CHECKING, Any, TypeVar

from engine.cards import RANK_MASKS, VALUE_BITS, cards_of
from engine.facts import DECK_SIZE, DEFAULT_WORK_LIMIT, RANKS, SUITS
from engine.plans.search import ShapePlans, Taken, search_shape
from engine.plans.table import decode, entry_key, parse

if TYPE_CHECKING:
    from functools import _lru_cache_wrapper

_T = TypeVar("_T")

# The key of the plans memo, low bits first: a card kind (engine.plans.rule: a rank position,
# or len(RANKS) for the 7D) in KIND_BITS, whether other cards lie on the floor, the relevant
# floor cards, and from LIMIT_SHIFT on the work limit (the default as 0, which keeps the
# usual keys small and quick to hash). The rule packs it (engine.plans.rule's _key).
KIND_BITS = len(RANKS).bit_length()
_KIND_FIELD = (1 << KIND_BITS) - 1
_MASK_BITS = DECK_SIZE + 1  # a card mask, with room to spare
_MASK_FIELD = (1 << _MASK_BITS) - 1
LIMIT_SHIFT = KIND_BITS + 1 + _MASK_BITS  # above the kind, the `others` bit and the floor
_VALUE_FIELD = (1 << VALUE_BITS) - 1

# A table to turn a card mask into its shape a chunk of ranks at a time: per chunk value, the
# same chunk with each rank's cards moved to the low bits of its place, so that only counts
# remain.
_PACK_RANKS = 2
_PACK_BITS = _PACK_RANKS * len(SUITS)
_PACK_CHUNK = (1 << _PACK_BITS) - 1
_PACKED: tuple[int, ...] = tuple(
    sum(
        ((1 << (chunk & rank_mask).bit_count()) - 1) << (rank_mask & -rank_mask).bit_length() - 1
        for rank_mask in RANK_MASKS[:_PACK_RANKS]
    )
    for chunk in range(_PACK_CHUNK + 1)
)

# The records of the installed plan table (engine.plans.table), by entry key: empty until a
# table is installed, and changed only by another install.
_TABLE: dict[int, bytes] = {}
_RULE_MEMOS: list[_lru_cache_wrapper[Any]] = []  # memoised_plans' memos


# A rule of plans: kind, relevant floor, whether others lie there, work limit.
_Rule = Callable[[int, int, bool, int], _T]


def _fields(key: int) -> tuple[int, int, bool, int]:
    """The kind, relevant floor, `others` bit and work limit packed in a plans key."""
    return (
        key & _KIND_FIELD,
        key >> KIND_BITS + 1 & _MASK_FIELD,
        bool(key >> KIND_BITS & 1),
        key >> LIMIT_SHIFT or DEFAULT_WORK_LIMIT,
    )


def memoised_plans(rule: _Rule[_T]) -> _lru_cache_wrapper[_T]:
    """`rule` (the plans of a kind on the relevant floor, whether others lie there, within a
    work limit) memoised by the plans key."""

    @lru_cache(maxsize=1 << 16)
    def plans(key: int) -> _T:
        return rule(*_fields(key))

    _RULE_MEMOS.append(plans)
    return plans


def unkept_plans(rule: _Rule[_T]) -> Callable[[int], _T]:
    """`rule` by the plans key, keeping nothing in the plans memo (the shapes' memo stays:
    its keys are suit-blind, so few floors make new entries there)."""

    def plans(key: int) -> _T:
        return rule(*_fields(key))

    return plans


def install_plan_table(table: bytes) -> int:
    """Install a table made by engine.plans.table.build (replacing any other; b"": none) and
    return its number of shapes."""
    entries = parse(table)
    _TABLE.clear()
    _TABLE.update(entries)
    _shape_plans.cache_clear()
    return len(entries)


def clear_caches() -> None:
    """Forget memoised plans (benchmarks use it to measure cold generation; an installed plan
    table stays)."""
    for memo in (*_RULE_MEMOS, _shape_plans):
        memo.cache_clear()


def _shape_key(value: int, shape: int, limit: int) -> int:
    """The key of `_shape_plans`: a value, a shape, a limit."""
    return (limit << _MASK_BITS | shape) << VALUE_BITS | value


def taken_cards(value: int, smaller: int, limit: int) -> tuple[tuple[Taken, ...] | None, int]:
    """Per plan of a played value, what it takes of the smaller floor cards (a bitmask), and
    the search's work; None instead of the plans when the work passes the limit."""
    shape = 0  # each rank's place with its cards moved to the low bits: only counts matter
    shift = 0
    while smaller >> shift:
        shape |= _PACKED[(smaller >> shift) & _PACK_CHUNK] << shift
        shift += _PACK_BITS
    found = _shape_plans(_shape_key(value, shape, limit))
    if found.work > limit:
        return None, found.work
    cards = cards_of(smaller)
    bits = [1 << c for c in cards]
    out: list[Taken] = []
    for taken, groups in found.plans:
        # List comprehensions rather than generators: a cold miss runs this per plan.
        out.append(
            (
                tuple([cards[p] for p in taken]),
                sum([bits[p] for p in taken]),
                tuple([tuple([cards[p] for p in g]) for g in groups]),
            )
        )
    return tuple(out), found.work


@lru_cache(maxsize=1 << 14)
def _shape_plans(key: int) -> ShapePlans:
    """The search on a shape (by _shape_key): from the installed table, or searched."""
    value = key & _VALUE_FIELD
    shape = key >> VALUE_BITS & _MASK_FIELD
    limit = key >> VALUE_BITS + _MASK_BITS
    record = _TABLE.get(entry_key(value, shape))
    if record is not None:
        return decode(record, limit)
    return search_shape(value, shape, limit)
