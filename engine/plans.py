"""Capture plans (docs/rules.md section 3): what a played card may take from the floor.

A numeric card of value v takes R, the floor cards of its rank, plus the cards of an
inclusion-maximal collection of pairwise disjoint groups (2+ other floor cards summing to v).
A collection is maximal exactly when the floor cards it leaves contain no group, so the
search below enumerates captured sets U that split into groups and whose complement holds
no group. Only values matter for that, so the search runs once per (v, count of each
smaller value) and its result is mapped onto the real cards. Plan generation is the
service's hot path and pure, so three levels are memoised: the search per value shape, the
taken cards per (v, smaller floor cards), and the plans per (card kind, relevant floor).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import lru_cache, partial
from typing import NamedTuple

from engine.cards import (
    FULL_MASK,
    JACK_RANK,
    RANK_MASKS,
    RANK_OF,
    RANK_VALUES,
    Card,
    cards_of,
    shows_codes,
)
from engine.errors import Reason, RuleError
from engine.facts import (
    DECK_SIZE,
    FLOOR_CARDS,
    MAX_PLANS,
    MIN_GROUP_CARDS,
    RANKS,
    SEVEN_D_BASRA_BLOCKERS,
    SEVEN_D_BASRA_MAX_FLOOR,
    SEVEN_OF_DIAMONDS,
    SUITS,
)

# Work bound (search steps) for one plan generation. Reachable floors need at most a few
# thousand steps (docs/rules.md gives the argument); crafted floors beyond it are refused.
DEFAULT_WORK_LIMIT = 10_000

# The memo kind of a played card: its rank position, or a kind of its own for the 7D (which
# sweeps when played, while a 7 of another suit captures as a 7).
_SEVEN_D_KIND = len(RANKS)
_KIND_OF: tuple[int, ...] = tuple(
    _SEVEN_D_KIND if card == SEVEN_OF_DIAMONDS else RANK_OF[card] for card in range(DECK_SIZE)
)
_SWEEP_KINDS = (JACK_RANK, _SEVEN_D_KIND)
_SEVEN_D_BLOCKERS_MASK = sum(RANK_MASKS[RANKS.index(rank)] for rank in SEVEN_D_BASRA_BLOCKERS)
# Per rank position: the cards of every smaller rank.
_BELOW: tuple[int, ...] = tuple(sum(RANK_MASKS[:rank]) for rank in range(len(RANKS)))
# Packed memo keys (see _plans_key): a kind or a value in the low bits, then a card mask.
_KIND_BITS = _SEVEN_D_KIND.bit_length()
_KIND_FIELD = (1 << _KIND_BITS) - 1
_MASK_BITS = DECK_SIZE + 1  # a card mask, with room to spare
_FLOOR_BITS = (1 << _MASK_BITS) - 1
_LIMIT_SHIFT = _KIND_BITS + 1 + _MASK_BITS  # above the kind, the `others` bit and the floor


@shows_codes
class Plan(NamedTuple):
    """One way to play a card that captures: the floor cards taken and how they split.

    A NamedTuple rather than a frozen dataclass: plans are built on the hot path and a
    tuple is several times cheaper to create, while staying an immutable value.
    """

    id: int
    cards: tuple[Card, ...]
    """Floor cards taken, in canonical order (the played card joins the pile too)."""
    same_rank: tuple[Card, ...]
    """Floor cards taken because they have the played card's rank."""
    groups: tuple[tuple[Card, ...], ...]
    """Sum groups taken, each in canonical order; one decomposition when several exist."""
    basra: bool
    """Whether carrying out this plan scores a Basra."""
    sweep: bool
    """Whether this is a J or 7D sweep of the whole floor."""
    mask: int
    """Bitmask of `cards`."""


@dataclass(frozen=True, slots=True)
class _Abstract:
    """Plans for one value over abstract positions 0..n-1 of the smaller floor cards."""

    plans: tuple[tuple[tuple[int, ...], tuple[tuple[int, ...], ...]], ...]
    """Per plan: the positions taken, and its groups as positions, all ascending."""
    work: int


# Floor cards that can change the plans of each kind: for a numeric card its rank and the
# smaller ranks (larger values can never join a sum), for Q/K their rank, for J/7D everything.
# Keying the memo on them alone lets floors that differ elsewhere share one result.
_RELEVANT: tuple[int, ...] = tuple(
    FULL_MASK
    if kind in _SWEEP_KINDS
    else _BELOW[kind] | RANK_MASKS[kind]
    if RANK_VALUES[kind]
    else RANK_MASKS[kind]
    for kind in range(_SEVEN_D_KIND + 1)
)


# Chosen groups as an immutable linked list (newest first): pushing a DFS branch is O(1).
_Chain = tuple[int, "_Chain"] | None


def plan_kind(card: Card) -> int:
    """Return the memo kind of a played card: its rank, or a kind of its own for the 7D."""
    return _KIND_OF[card]


def relevant_mask(card: Card) -> int:
    """The floor cards that can change the plans of `card`: on the rest of the floor, only
    whether anything lies there matters (a capture of the whole floor is a Basra)."""
    return _RELEVANT[_KIND_OF[card]]


def plans_for(
    card: Card, floor_mask: int, work_limit: int = DEFAULT_WORK_LIMIT
) -> tuple[Plan, ...]:
    """Return the capture plans of `card` on a floor, in offered order; empty means it trails."""
    kind = _KIND_OF[card]
    relevant = floor_mask & _RELEVANT[kind]
    # _plans_key, written out: this is the hot path of every call.
    key = (relevant << 1 | (relevant != floor_mask)) << _KIND_BITS | kind
    raw, work = _plans_cached(
        key if work_limit == DEFAULT_WORK_LIMIT else key | work_limit << _LIMIT_SHIFT
    )
    if raw is None:
        raise _too_complex(work_limit, work)
    return tuple(map(_as_plan, raw)) if raw else ()


def plans_unmemoised(
    card: Card, floor_mask: int, work_limit: int = DEFAULT_WORK_LIMIT
) -> tuple[Plan, ...]:
    """plans_for without keeping the answer in its memo, for a caller with a memo of its own.

    The bot's search meets hundreds of thousands of floors no match reaches and keeps what
    it needs of their plans itself (engine.bot.moves). Through plans_for, those floors would
    push the floors of real play out of the memo, and each new entry (nested tuples, which
    the collector untracks only a level per collection) would drift into the oldest
    generation, for a full collection to walk: tens of milliseconds inside a call.
    """
    kind = _KIND_OF[card]
    relevant = floor_mask & _RELEVANT[kind]
    key = _plans_key(kind, relevant, relevant != floor_mask, work_limit)
    raw, work = _plans_cached.__wrapped__(key)
    if raw is None:
        raise _too_complex(work_limit, work)
    return tuple(map(_as_plan, raw)) if raw else ()


def _too_complex(work_limit: int, work: int) -> RuleError:
    return RuleError(
        Reason.STATE_TOO_COMPLEX,
        f"The floor is too complex to list capture plans within {work_limit} search steps.",
        work_limit=work_limit,
        work=work,
    )


def plan_work(card: Card, floor_mask: int, work_limit: int = DEFAULT_WORK_LIMIT) -> int:
    """Return the search steps that plan generation needs (for benchmarks and docs)."""
    kind = _KIND_OF[card]
    relevant = floor_mask & _RELEVANT[kind]
    return _plans_cached(_plans_key(kind, relevant, relevant != floor_mask, work_limit))[1]


# A plan as the memo keeps it: Plan's fields in a plain tuple. Plain tuples of ints are
# untracked by the cyclic GC, so a full memo adds nothing to its pauses (with Plan objects
# inside, 65,536 entries made each full collection take over 100 ms); plans_for wraps them.
_RawPlan = tuple[
    int, tuple[Card, ...], tuple[Card, ...], tuple[tuple[Card, ...], ...], bool, bool, int
]


# Wraps a memo tuple as a Plan without copying its fields (tuple.__new__ runs in C).
_as_plan: Callable[[_RawPlan], Plan] = partial(tuple.__new__, Plan)


# The three memos below take one integer argument (the packed key) on purpose: lru_cache
# then keys its dictionary by that integer, which the cyclic garbage collector never tracks.
# With tuple keys, each new entry puts the whole dictionary back under the collector's watch
# (CPython untracks a dict holding only untracked objects and tracks it again when a tracked
# key comes in), and the next collections walk it entry by entry: pauses of milliseconds
# with full memos, in the middle of calls.


def _plans_key(kind: int, floor: int, others: bool, limit: int) -> int:
    """The memo key of `_plans_cached`: every argument packed into one integer (the default
    work limit as 0, which keeps the usual keys small and quick to hash)."""
    key = (floor << 1 | others) << _KIND_BITS | kind
    return key if limit == DEFAULT_WORK_LIMIT else key | limit << _LIMIT_SHIFT


@lru_cache(maxsize=1 << 16)
def _plans_cached(key: int) -> tuple[tuple[_RawPlan, ...] | None, int]:
    """Plans of a card kind on the relevant part of a floor; `others`: other cards lie there.

    `key` packs (kind, floor, others, limit) as `_plans_key` does.
    """
    kind, others = key & _KIND_FIELD, bool(key >> _KIND_BITS & 1)
    floor = key >> _KIND_BITS + 1 & _FLOOR_BITS
    limit = key >> _LIMIT_SHIFT or DEFAULT_WORK_LIMIT
    if not floor:
        return (), 0
    if kind in _SWEEP_KINDS:
        everything = cards_of(floor)
        basra = (
            kind == _SEVEN_D_KIND
            and len(everything) <= SEVEN_D_BASRA_MAX_FLOOR
            and not floor & _SEVEN_D_BLOCKERS_MASK
        )
        return ((1, everything, (), (), basra, True, floor),), 0
    same = floor & RANK_MASKS[kind]
    same_cards = cards_of(same)
    value = RANK_VALUES[kind]
    if not value:  # Q or K: only its rank
        if not same:
            return (), 0
        return ((1, same_cards, same_cards, (), not others, False, same),), 0
    smaller_mask = floor & _BELOW[kind]
    groups, work = _groups_on(_small_key(value, smaller_mask, limit)) if smaller_mask else ((), 0)
    if groups is None:
        return None, work
    if not groups:
        if not same:
            return (), work
        basra = same == floor and not others
        return ((1, same_cards, same_cards, (), basra, False, same),), work
    plans: list[_RawPlan] = []
    for number, (taken, taken_mask, real_groups) in enumerate(groups, start=1):
        # Smaller cards precede the same-rank ones in canonical order, so this is sorted.
        mask = taken_mask | same
        basra = mask == floor and not others
        plans.append((number, taken + same_cards, same_cards, real_groups, basra, False, mask))
    return tuple(plans), work


# A table to pack a card mask a chunk of ranks at a time: per chunk value, the same chunk
# with each rank's cards moved to the low bits of its place, so that only counts remain.
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

_Taken = tuple[tuple[Card, ...], int, tuple[tuple[Card, ...], ...]]


def _small_key(value: int, mask: int, limit: int) -> int:
    """The memo key of `_groups_on` and `_abstract_plans`: (value, a mask, limit) packed."""
    return (limit << _MASK_BITS | mask) << _VALUE_BITS | value


def _unpack_small(key: int) -> tuple[int, int, int]:
    """(value, mask, limit) of a key made by `_small_key`."""
    return key & _VALUE_FIELD, key >> _VALUE_BITS & _FLOOR_BITS, key >> _VALUE_BITS + _MASK_BITS


@lru_cache(maxsize=1 << 16)
def _groups_on(key: int) -> tuple[tuple[_Taken, ...] | None, int]:
    """Per plan, the smaller cards taken (cards, mask, groups) for a value; None: too complex.

    `key` packs (value, the smaller floor cards, limit) as `_small_key` does.
    """
    value, smaller_mask, limit = _unpack_small(key)
    shape = 0  # each rank's place with its cards moved to the low bits: only counts matter
    shift = 0
    while smaller_mask >> shift:
        shape |= _PACKED[(smaller_mask >> shift) & _PACK_CHUNK] << shift
        shift += _PACK_BITS
    abstract = _abstract_plans(_small_key(value, shape, limit))
    if abstract.work > limit:
        return None, abstract.work
    smaller = cards_of(smaller_mask)
    bits = [1 << c for c in smaller]
    out: list[_Taken] = []
    for taken, groups in abstract.plans:
        # List comprehensions rather than generators: a cold miss runs this per plan.
        cards = tuple([smaller[p] for p in taken])
        mask = sum([bits[p] for p in taken])
        out.append((cards, mask, tuple([tuple([smaller[p] for p in g]) for g in groups])))
    return tuple(out), abstract.work


# Abstract plans of every reachable shape, computed ahead of time (plan_table) and installed
# by the service when a worker starts (install_plan_table), so that no reachable floor is
# searched for in a live call, not even by a fresh worker. Keyed by shape << _VALUE_BITS |
# value; each record is the _Abstract in the compact form of _encode. A precomputed memo:
# empty until installed, never changed afterwards.
_TABLE: dict[int, bytes] = {}
# A floor of reachable shape holds beyond one card per rank at most this many: the first
# floor cards less one (docs/rules.md).
REACHABLE_EXTRA_CARDS = FLOOR_CARDS - 1
# Played values whose smaller cards can form groups (every numeric value but the lowest).
GROUP_VALUES: tuple[int, ...] = tuple(sorted({v for v in RANK_VALUES if v}))[1:]
_VALUE_BITS = max(RANK_VALUES).bit_length()
_VALUE_FIELD = (1 << _VALUE_BITS) - 1
# A key: the shape of the cards below the highest value, then the value.
_KEY_BYTES = (_BELOW[RANK_VALUES.index(max(RANK_VALUES))].bit_length() + _VALUE_BITS + 7) // 8
_LENGTH_BYTES = 2
_WORK_BYTES = 2
_UNBOUNDED = 1 << 62  # a work limit no search reaches: plan_table's searches are complete
# The lowest card of each rank: `count` cards of rank r in a shape are ((1 << count) - 1)
# times it.
_RANK_LOW_BIT: tuple[int, ...] = tuple(mask & -mask for mask in RANK_MASKS)


@lru_cache(maxsize=1 << 14)
def _abstract_plans(key: int) -> _Abstract:
    """Plans over positions of the smaller cards, sorted by value then copy (= canonical).

    `key` packs (value, shape, limit) as `_small_key` does; `shape` holds, in the place of
    each smaller rank, as many low bits as cards of it.
    """
    value, shape, limit = _unpack_small(key)
    record = _TABLE.get(shape << _VALUE_BITS | value)
    if record is not None:
        return _decode(record, limit)
    return _search(value, shape, limit)


def _search(value: int, shape: int, limit: int) -> _Abstract:
    """_abstract_plans by searching, stopping as soon as the work passes `limit`."""
    values = [
        RANK_VALUES[rank]
        for rank, rank_mask in enumerate(RANK_MASKS)
        for _ in range((shape & rank_mask).bit_count())
    ]
    n = len(values)
    work = 0

    # Groups: subsets of 2+ positions summing to `value`, found by a DFS in position order.
    groups: list[int] = []
    stack: list[tuple[int, int, int, int]] = [(0, 0, 0, 0)]  # (next pos, mask, sum, size)
    while stack:
        start, mask, total, size = stack.pop()
        work += 1
        if work > limit:
            return _Abstract((), work)
        for pos in range(start, n):
            t = total + values[pos]
            if t > value:
                break  # values ascend, so later positions overshoot too
            if t == value:
                if size + 1 >= MIN_GROUP_CARDS:
                    groups.append(mask | (1 << pos))
            else:
                stack.append((pos + 1, mask | (1 << pos), t, size + 1))
    if not groups:
        return _Abstract((), work)
    groups.sort(key=_positions)

    # For pruning: a group whose highest position is p is fully decided once p is decided.
    by_low: list[list[int]] = [[] for _ in range(n)]
    by_high: list[list[int]] = [[] for _ in range(n)]
    for g in groups:
        by_low[(g & -g).bit_length() - 1].append(g)
        by_high[g.bit_length() - 1].append(g)

    # DFS state: (pos, used, excluded, chosen groups as a linked list). The lowest undecided
    # position either starts a group with undecided partners or stays on the floor; a branch
    # dies as soon as the cards left on the floor contain a whole group (not maximal).
    found: dict[int, _Chain] = {}
    dfs: list[tuple[int, int, int, _Chain]] = [(0, 0, 0, None)]
    pop = dfs.pop
    push = dfs.append
    while dfs:
        pos, used, excluded, chosen = pop()
        work += 1
        if work > limit:
            return _Abstract((), work)
        while pos < n and used >> pos & 1:
            pos += 1
        if pos == n:
            if used not in found:
                found[used] = chosen
            continue
        new_excluded = excluded | (1 << pos)
        for g in by_high[pos]:
            if g & new_excluded == g:
                break
        else:
            push((pos + 1, used, new_excluded, chosen))
        # Pushed in reverse so that groups in canonical order are explored first.
        for g in reversed(by_low[pos]):
            if not g & used:
                push((pos + 1, used | g, excluded, (g, chosen)))
    ordered = sorted(found, key=lambda u: (-u.bit_count(), _positions(u)))[:MAX_PLANS]
    return _Abstract(
        tuple((_positions(u), tuple(_positions(g) for g in _unchain(found[u]))) for u in ordered),
        work,
    )


def _encode(abstract: _Abstract) -> bytes:
    """The compact form of a complete search's result: work (_WORK_BYTES), the number of
    plans, then per plan its positions and its groups, each a count and that many positions."""
    out = bytearray(abstract.work.to_bytes(_WORK_BYTES, "little"))
    out.append(len(abstract.plans))
    for taken, groups in abstract.plans:
        out += bytes((len(taken), *taken, len(groups)))
        for group in groups:
            out += bytes((len(group), *group))
    return bytes(out)


def _decode(record: bytes, limit: int) -> _Abstract:
    """The _Abstract a search with `limit` gives, from a complete result in compact form."""
    work = int.from_bytes(record[:_WORK_BYTES], "little")
    if work > limit:
        return _Abstract((), limit + 1)  # where the search stops: one step past the limit
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
    return _Abstract(tuple(plans), work)


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


def plan_table(values: Iterable[int] = GROUP_VALUES) -> bytes:
    """The table of install_plan_table: every reachable shape of `values`, searched fully.

    Deterministic; takes seconds for every value (the service ships it built, see
    service/plan_table.py).
    """
    out = bytearray()
    for value in values:
        for shape in reachable_shapes(value):
            record = _encode(_search(value, shape, _UNBOUNDED))
            out += (shape << _VALUE_BITS | value).to_bytes(_KEY_BYTES, "little")
            out += len(record).to_bytes(_LENGTH_BYTES, "little") + record
    return bytes(out)


def install_plan_table(table: bytes) -> int:
    """Install a table made by plan_table (replacing any other); return its number of shapes."""
    entries: dict[int, bytes] = {}
    at = 0
    while at < len(table):
        key = int.from_bytes(table[at : at + _KEY_BYTES], "little")
        at += _KEY_BYTES
        size = int.from_bytes(table[at : at + _LENGTH_BYTES], "little")
        at += _LENGTH_BYTES
        entries[key] = table[at : at + size]
        at += size
    _TABLE.clear()
    _TABLE.update(entries)
    _abstract_plans.cache_clear()
    return len(entries)


def _unchain(chain: _Chain) -> tuple[int, ...]:
    out: list[int] = []
    while chain is not None:
        out.append(chain[0])
        chain = chain[1]
    return tuple(reversed(out))


def _positions(mask: int) -> tuple[int, ...]:
    return tuple(i for i in range(mask.bit_length()) if mask >> i & 1)


def clear_caches() -> None:
    """Forget memoised plans (benchmarks use it to measure cold generation; an installed
    plan table stays)."""
    _plans_cached.cache_clear()
    _groups_on.cache_clear()
    _abstract_plans.cache_clear()
