"""The memos of plan generation, and the plan table installed beneath them.

Plan generation is pure and on the service's hot path, so it is memoised at three levels:
the plans of a card kind per relevant part of the floor (the rule of engine.plans), the
smaller cards each plan takes per (value, smaller floor cards), and the search per (value,
shape of those cards), which reads the installed plan table before searching.

Every memo here, and the bot's (engine.bot.moves), takes one integer argument, its
arguments packed: lru_cache then keys its dictionary by that integer, which the cyclic
garbage collector never tracks. With tuple keys, each new entry would put the whole
dictionary back under the collector's watch (CPython untracks a dict holding only untracked
objects and tracks it again when a tracked key comes in), and the next collections would
walk it entry by entry: pauses of milliseconds with full memos, in the middle of calls. The
values are plain tuples of ints for the same reason: the collector untracks those, so a full
memo adds nothing to its pauses (with Plan objects inside, 65,536 entries made each full
collection take over 100 ms).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from typing import TYPE_CHECKING, Any, TypeVar

from engine.cards import VALUE_BITS
from engine.facts import DECK_SIZE, DEFAULT_WORK_LIMIT, RANKS
from engine.plan_search import ShapePlans, Taken, on_cards, search, shape_of
from engine.plan_table import decode, entry_key, parse

if TYPE_CHECKING:
    from functools import _lru_cache_wrapper

T = TypeVar("T")

# The plans key (plans_key): a card kind (engine.plans: a rank position, or len(RANKS) for
# the 7D), whether other cards lie on the floor, the relevant floor cards, the work limit.
_KIND_BITS = len(RANKS).bit_length()
_KIND_FIELD = (1 << _KIND_BITS) - 1
_MASK_BITS = DECK_SIZE + 1  # a card mask, with room to spare
_MASK_FIELD = (1 << _MASK_BITS) - 1
_LIMIT_SHIFT = _KIND_BITS + 1 + _MASK_BITS  # above the kind, the `others` bit and the floor
_VALUE_FIELD = (1 << VALUE_BITS) - 1

# Abstract results of the installed plan table (engine.plan_table), by entry key: empty
# until installed, never changed afterwards but by another install.
_TABLE: dict[int, bytes] = {}
_RULE_MEMOS: list[_lru_cache_wrapper[Any]] = []  # memoised_plans' memos


def plans_key(kind: int, relevant: int, floor: int, limit: int) -> int:
    """The memo key of a card kind on `floor`: the floor cards it looks at (`relevant`),
    whether others lie there, and the work limit (the default as 0, which keeps the usual
    keys small and quick to hash)."""
    seen = floor & relevant
    key = (seen << 1 | (seen != floor)) << _KIND_BITS | kind
    return key if limit == DEFAULT_WORK_LIMIT else key | limit << _LIMIT_SHIFT


def memoised_plans(rule: Callable[[int, int, bool, int], T]) -> _lru_cache_wrapper[T]:
    """`rule` (the plans of a kind on the relevant floor, whether others lie there, within a
    work limit) memoised by plans_key; its `__wrapped__` computes without keeping."""

    @lru_cache(maxsize=1 << 16)
    def plans(key: int) -> T:
        return rule(
            key & _KIND_FIELD,
            key >> _KIND_BITS + 1 & _MASK_FIELD,
            bool(key >> _KIND_BITS & 1),
            key >> _LIMIT_SHIFT or DEFAULT_WORK_LIMIT,
        )

    _RULE_MEMOS.append(plans)
    return plans


def taken_cards(value: int, smaller: int, limit: int) -> tuple[tuple[Taken, ...] | None, int]:
    """Per plan of a played value, what it takes of the smaller floor cards (a bitmask), and
    the search's work; None instead of the plans when the work passes `limit`."""
    return _taken(_small_key(value, smaller, limit))


def install_plan_table(table: bytes) -> int:
    """Install a table made by engine.plan_table.build (replacing any other; b"": none) and
    return its number of shapes."""
    entries = parse(table)
    _TABLE.clear()
    _TABLE.update(entries)
    _shape_plans.cache_clear()
    return len(entries)


def clear_caches() -> None:
    """Forget memoised plans (benchmarks use it to measure cold generation; an installed plan
    table stays)."""
    for memo in (*_RULE_MEMOS, _taken, _shape_plans):
        memo.cache_clear()


def _small_key(value: int, mask: int, limit: int) -> int:
    """The key of `_taken` and `_shape_plans`: a value, a mask (cards or shape), a limit."""
    return (limit << _MASK_BITS | mask) << VALUE_BITS | value


def _unpack_small(key: int) -> tuple[int, int, int]:
    """(value, mask, limit) of a key made by `_small_key`."""
    return key & _VALUE_FIELD, key >> VALUE_BITS & _MASK_FIELD, key >> VALUE_BITS + _MASK_BITS


@lru_cache(maxsize=1 << 16)
def _taken(key: int) -> tuple[tuple[Taken, ...] | None, int]:
    """taken_cards, by `_small_key`."""
    value, smaller, limit = _unpack_small(key)
    found = _shape_plans(_small_key(value, shape_of(smaller), limit))
    if found.work > limit:
        return None, found.work
    return on_cards(found, smaller), found.work


@lru_cache(maxsize=1 << 14)
def _shape_plans(key: int) -> ShapePlans:
    """The search on a shape (by `_small_key`): from the installed table, or searched."""
    value, shape, limit = _unpack_small(key)
    record = _TABLE.get(entry_key(value, shape))
    if record is not None:
        return decode(record, limit)
    return search(value, shape, limit)
