"""Capture plans (RULES.md section 3): what a played card may take from the floor.

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
    SEVEN_OF_DIAMONDS,
    Card,
    cards_of,
)
from engine.errors import Reason, RuleError

MAX_PLANS = 12
# Work bound (search steps) for one plan generation. Reachable floors need at most a few
# thousand steps (docs/rules.md gives the argument); crafted floors beyond it are refused.
DEFAULT_WORK_LIMIT = 10_000
# 7D sweep gives a Basra only when the floor held at most this many cards.
SEVEN_D_BASRA_MAX_FLOOR = 10

_QUEEN_KING_MASK = RANK_MASKS[11] | RANK_MASKS[12]
_SWEEP_KIND = 13  # the played 7D; ranks 0..12 are their own kinds


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
_RELEVANT: tuple[int, ...] = (
    *((1 << (4 * r + 4)) - 1 for r in range(JACK_RANK)),
    FULL_MASK,
    RANK_MASKS[11],
    RANK_MASKS[12],
    FULL_MASK,
)


# Chosen groups as an immutable linked list (newest first): pushing a DFS branch is O(1).
_Chain = tuple[int, "_Chain"] | None


def plan_kind(card: Card) -> int:
    """Return the memo kind of a played card: its rank, or a kind of its own for the 7D."""
    return _SWEEP_KIND if card == SEVEN_OF_DIAMONDS else card >> 2


def plans_for(
    card: Card, floor_mask: int, work_limit: int = DEFAULT_WORK_LIMIT
) -> tuple[Plan, ...]:
    """Return the capture plans of `card` on a floor, in offered order; empty means it trails."""
    kind = _SWEEP_KIND if card == SEVEN_OF_DIAMONDS else card >> 2
    relevant = floor_mask & _RELEVANT[kind]
    raw, work = _plans_cached(kind, relevant, relevant != floor_mask, work_limit)
    if raw is None:
        raise RuleError(
            Reason.STATE_TOO_COMPLEX,
            f"The floor is too complex to list capture plans within {work_limit} search steps.",
            work_limit=work_limit,
            work=work,
        )
    return tuple(map(_as_plan, raw)) if raw else ()


def plan_work(card: Card, floor_mask: int, work_limit: int = DEFAULT_WORK_LIMIT) -> int:
    """Return the search steps that plan generation needs (for benchmarks and docs)."""
    kind = plan_kind(card)
    relevant = floor_mask & _RELEVANT[kind]
    return _plans_cached(kind, relevant, relevant != floor_mask, work_limit)[1]


# A plan as the memo keeps it: Plan's fields in a plain tuple. Plain tuples of ints are
# untracked by the cyclic GC, so a full memo adds nothing to its pauses (with Plan objects
# inside, 65,536 entries made each full collection take over 100 ms); plans_for wraps them.
_RawPlan = tuple[
    int, tuple[Card, ...], tuple[Card, ...], tuple[tuple[Card, ...], ...], bool, bool, int
]


# Wraps a memo tuple as a Plan without copying its fields (tuple.__new__ runs in C).
_as_plan: Callable[[_RawPlan], Plan] = partial(tuple.__new__, Plan)


@lru_cache(maxsize=1 << 16)
def _plans_cached(
    kind: int, floor: int, others: bool, limit: int
) -> tuple[tuple[_RawPlan, ...] | None, int]:
    """Plans of a card kind on the relevant part of a floor; `others`: other cards lie there."""
    if not floor:
        return (), 0
    if kind in (JACK_RANK, _SWEEP_KIND):
        everything = cards_of(floor)
        basra = (
            kind == _SWEEP_KIND
            and len(everything) <= SEVEN_D_BASRA_MAX_FLOOR
            and not floor & _QUEEN_KING_MASK
        )
        return ((1, everything, (), (), basra, True, floor),), 0
    same = floor & RANK_MASKS[kind]
    same_cards = cards_of(same)
    if kind > JACK_RANK:
        if not same:
            return (), 0
        return ((1, same_cards, same_cards, (), not others, False, same),), 0
    smaller_mask = floor & ((1 << (4 * kind)) - 1)
    groups, work = _groups_on(kind + 1, smaller_mask, limit) if smaller_mask else ((), 0)
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


# Per byte (two ranks): the same byte with each nibble's cards packed into its low bits.
_PACKED_BYTE: tuple[int, ...] = tuple(
    ((1 << (b & 15).bit_count()) - 1) | (((1 << (b >> 4).bit_count()) - 1) << 4) for b in range(256)
)

_Taken = tuple[tuple[Card, ...], int, tuple[tuple[Card, ...], ...]]


@lru_cache(maxsize=1 << 16)
def _groups_on(value: int, smaller_mask: int, limit: int) -> tuple[tuple[_Taken, ...] | None, int]:
    """Per plan, the smaller cards taken (cards, mask, groups) for a value; None: too complex."""
    shape = 0  # each rank's nibble with its cards moved to the low bits: only counts matter
    shift = 0
    while smaller_mask >> shift:
        shape |= _PACKED_BYTE[(smaller_mask >> shift) & 0xFF] << shift
        shift += 8
    abstract = _abstract_plans(value, shape, limit)
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
# searched for in a live call, not even by a fresh worker. Keyed by shape << 4 | value; each
# record is the _Abstract in the compact form of _encode. A precomputed memo: empty until
# installed, never changed afterwards.
_TABLE: dict[int, bytes] = {}
# A floor of reachable shape holds beyond one card per rank at most this many (docs/rules.md).
REACHABLE_EXTRA_CARDS = 3
_KEY_BYTES = 5  # shape (9 ranks of 4 bits) and value
_LENGTH_BYTES = 2


@lru_cache(maxsize=1 << 14)
def _abstract_plans(value: int, shape: int, limit: int) -> _Abstract:
    """Plans over positions of the smaller cards, sorted by value then copy (= canonical).

    `shape` holds, in the nibble of each smaller rank, as many low bits as cards of it.
    """
    record = _TABLE.get(shape << 4 | value)
    if record is not None:
        return _decode(record, limit)
    return _search(value, shape, limit)


def _search(value: int, shape: int, limit: int) -> _Abstract:
    """_abstract_plans by searching, stopping as soon as the work passes `limit`."""
    values = [r + 1 for r in range(value - 1) for _ in range(((shape >> (4 * r)) & 15).bit_count())]
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
                if size >= 1:
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
    """The compact form of a complete search's result: work (2 bytes), then per plan its
    positions and its groups, each a count followed by that many positions."""
    out = bytearray(abstract.work.to_bytes(2, "little"))
    out.append(len(abstract.plans))
    for taken, groups in abstract.plans:
        out += bytes((len(taken), *taken, len(groups)))
        for group in groups:
            out += bytes((len(group), *group))
    return bytes(out)


def _decode(record: bytes, limit: int) -> _Abstract:
    """The _Abstract a search with `limit` gives, from a complete result in compact form."""
    work = record[0] | record[1] << 8
    if work > limit:
        return _Abstract((), limit + 1)  # where the search stops: one step past the limit
    plans = []
    at = 3
    for _ in range(record[2]):
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
    lies there at most max(1, its count among the 4 first floor cards) times: beyond one card
    per rank, at most REACHABLE_EXTRA_CARDS more (docs/rules.md).
    """
    shapes = [0]  # built rank by rank; each rank adds 0..4 cards within the extra budget
    extra = [0]
    for rank in range(value - 1):
        grown, grown_extra = [], []
        for shape, used in zip(shapes, extra, strict=True):
            for count in range(5):
                more = used + max(count - 1, 0)
                if more <= REACHABLE_EXTRA_CARDS:
                    grown.append(shape | ((1 << count) - 1) << (4 * rank))
                    grown_extra.append(more)
        shapes, extra = grown, grown_extra
    return sorted(shape for shape in shapes if shape)


def plan_table(values: Iterable[int] = range(2, JACK_RANK + 1)) -> bytes:
    """The table of install_plan_table: every reachable shape of `values`, searched fully.

    Deterministic; takes seconds for every value (the service ships it built, see
    service/plan_table.py).
    """
    out = bytearray()
    for value in values:
        for shape in reachable_shapes(value):
            record = _encode(_search(value, shape, 1 << 62))
            out += (shape << 4 | value).to_bytes(_KEY_BYTES, "little")
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
