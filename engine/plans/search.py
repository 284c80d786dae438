"""The search behind capture plans: the maximal collections of groups of one value.

A numeric card of value v takes, beside the floor cards of its rank, the cards of an
inclusion-maximal collection of pairwise disjoint groups (2+ smaller floor cards summing to
v). A collection is maximal exactly when the cards it leaves contain no group, so the search
enumerates the taken sets that split into groups and whose complement holds no group. Only
values matter for that, so the search runs on a shape: in each smaller rank's place of a card
mask, as many low bits as cards of that rank lie there; the cards become positions 0..n-1 in
canonical order (engine.plans.memo maps a result back onto the real cards).
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.cards import RANK_MASKS, RANK_VALUES, Card
from engine.facts import MAX_PLANS, MIN_GROUP_CARDS


@dataclass(frozen=True, slots=True)
class ShapePlans:
    """Plans for one value over abstract positions 0..n-1 of the smaller floor cards."""

    plans: tuple[tuple[tuple[int, ...], tuple[tuple[int, ...], ...]], ...]
    """Per plan: the positions taken, and its groups as positions, all ascending."""
    work: int
    """Search steps taken; past the limit, the search stopped there and `plans` is empty."""


Taken = tuple[tuple[Card, ...], int, tuple[tuple[Card, ...], ...]]
"""The smaller cards one plan takes: the cards, their mask, its groups."""

# Chosen groups as an immutable linked list (newest first): pushing a DFS branch is O(1).
_Chain = tuple[int, "_Chain"] | None


def search_shape(value: int, shape: int, limit: int) -> ShapePlans:
    """Plans over positions of the smaller cards, sorted by value then copy (= canonical),
    stopping as soon as the work passes `limit`."""
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
            return ShapePlans((), work)
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
        return ShapePlans((), work)
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
            return ShapePlans((), work)
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
    return ShapePlans(
        tuple((_positions(u), tuple(_positions(g) for g in _unchain(found[u]))) for u in ordered),
        work,
    )


def _unchain(chain: _Chain) -> tuple[int, ...]:
    out: list[int] = []
    while chain is not None:
        out.append(chain[0])
        chain = chain[1]
    return tuple(reversed(out))


def _positions(mask: int) -> tuple[int, ...]:
    return tuple(i for i in range(mask.bit_length()) if mask >> i & 1)
