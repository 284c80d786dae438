"""The rule of capture plans (docs/rules.md section 3): what a played card may take.

A J or the 7D sweeps the whole floor; a Q or K takes the cards of its rank; a numeric card
takes the cards of its rank plus, for each way to do it, an inclusion-maximal collection of
disjoint groups of smaller cards summing to its value (engine.plans.search). A plan that
leaves the floor empty is a Basra, but for a J, and for the 7D only under its own condition.

The rule is memoised (engine.plans.memo): plans_for serves every call from the memo;
plans_unmemoised computes without keeping, for a caller with a memo of its own.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import NamedTuple

from engine.cards import (
    FULL_MASK,
    JACK_RANK,
    LOWER_RANKS_MASKS,
    RANK_MASKS,
    RANK_OF,
    RANK_VALUES,
    Card,
    cards_of,
    seven_d_basra,
    shows_codes,
)
from engine.errors import Reason, RuleError
from engine.facts import DECK_SIZE, DEFAULT_WORK_LIMIT, RANKS, SEVEN_OF_DIAMONDS
from engine.plans.memo import KIND_BITS, LIMIT_SHIFT, memoised_plans, taken_cards, unkept_plans


@shows_codes
class Plan(NamedTuple):
    """One way to play a card that captures: the floor cards taken and how they split.

    A NamedTuple rather than a frozen dataclass: plans are built on the hot path, and a
    tuple is cheaper to create while staying an immutable value.
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


# A plan as the memo keeps it: Plan's fields in a plain tuple (engine.plans.memo says why);
# plans_for wraps them, without copying (tuple.__new__ runs in C).
_RawPlan = tuple[
    int, tuple[Card, ...], tuple[Card, ...], tuple[tuple[Card, ...], ...], bool, bool, int
]
_as_plan: Callable[[_RawPlan], Plan] = partial(tuple.__new__, Plan)
# The plans of a kind on a floor, None when the search passes the work limit; the work.
_Memoised = tuple[tuple[_RawPlan, ...] | None, int]

# The kind of a played card: its rank position, or a kind of its own for the 7D (which
# sweeps when played, while a 7 of another suit captures as a 7). Cards of one kind have the
# same plans on every floor, and share them in the memo.
_SEVEN_D_KIND = len(RANKS)
_KIND_OF: tuple[int, ...] = tuple(
    _SEVEN_D_KIND if card == SEVEN_OF_DIAMONDS else RANK_OF[card] for card in range(DECK_SIZE)
)
_SWEEP_KINDS = (JACK_RANK, _SEVEN_D_KIND)

RELEVANT: tuple[int, ...] = tuple(
    FULL_MASK
    if _KIND_OF[card] in _SWEEP_KINDS
    else LOWER_RANKS_MASKS[RANK_OF[card]] | RANK_MASKS[RANK_OF[card]]
    if RANK_VALUES[RANK_OF[card]]
    else RANK_MASKS[RANK_OF[card]]
    for card in range(DECK_SIZE)
)
"""Per card, the floor cards that can change its plans: for a numeric card its rank and the
smaller ranks (larger values never join a sum), for a Q or K its rank, for a J or the 7D
everything. Of the rest of the floor, only whether anything lies there matters (a capture of
the whole floor is a Basra); keying memos on these alone lets floors that differ elsewhere
share one result."""


def _kind_plans(kind: int, floor: int, others: bool, limit: int) -> _Memoised:
    """The plans of a card kind on the floor cards it looks at; `others`: more lie there."""
    if not floor:
        return (), 0
    if kind in _SWEEP_KINDS:
        basra = kind == _SEVEN_D_KIND and seven_d_basra(floor)
        return ((1, cards_of(floor), (), (), basra, True, floor),), 0
    same = floor & RANK_MASKS[kind]
    same_cards = cards_of(same)
    value = RANK_VALUES[kind]
    if not value:  # Q or K: only its rank
        if not same:
            return (), 0
        return ((1, same_cards, same_cards, (), not others, False, same),), 0
    smaller = floor & LOWER_RANKS_MASKS[kind]
    groups, work = taken_cards(value, smaller, limit) if smaller else ((), 0)
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


_plans_cached = memoised_plans(_kind_plans)
_plans_unkept = unkept_plans(_kind_plans)


def _key(card: Card, floor_mask: int, work_limit: int) -> int:
    """The memo key of a card on a floor: its kind, the floor cards it looks at, whether more
    lie there, and the work limit when it is not the default."""
    relevant = floor_mask & RELEVANT[card]
    key = (relevant << 1 | (relevant != floor_mask)) << KIND_BITS | _KIND_OF[card]
    return key if work_limit == DEFAULT_WORK_LIMIT else key | work_limit << LIMIT_SHIFT


def _plans(memoised: _Memoised, work_limit: int) -> tuple[Plan, ...]:
    """The plans a memo gave, as Plan values; refused when the search passed the limit."""
    raw, work = memoised
    if raw is None:
        raise RuleError(
            Reason.STATE_TOO_COMPLEX,
            f"The floor is too complex to list capture plans within {work_limit} search steps.",
            work_limit=work_limit,
            work=work,
        )
    return tuple(map(_as_plan, raw)) if raw else ()


def plans_for(
    card: Card, floor_mask: int, work_limit: int = DEFAULT_WORK_LIMIT
) -> tuple[Plan, ...]:
    """Return the capture plans of `card` on a floor, in offered order; empty means it trails."""
    return _plans(_plans_cached(_key(card, floor_mask, work_limit)), work_limit)


def plans_unmemoised(
    card: Card, floor_mask: int, work_limit: int = DEFAULT_WORK_LIMIT
) -> tuple[Plan, ...]:
    """plans_for without keeping anything in its memos, for a caller with a memo of its own.

    The bot's search meets many floors no match reaches and keeps what it needs of their
    plans itself (engine.bot.moves). Through plans_for, those floors would push the floors of
    real play out of the memo, and its new entries would make full collections long.
    """
    return _plans(_plans_unkept(_key(card, floor_mask, work_limit)), work_limit)


def plan_work(card: Card, floor_mask: int, work_limit: int = DEFAULT_WORK_LIMIT) -> int:
    """Return the search steps that plan generation needs (for benchmarks and docs)."""
    return _plans_cached(_key(card, floor_mask, work_limit))[1]
