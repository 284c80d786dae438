"""Experiment: the round searched over all sampled deals at once, free of strategy fusion.

PIMC searches each deal alone, so this seat's later plays in a deal are chosen knowing the
opponent's cards there. Here this seat's play at a node is one play for every deal that
agrees with what it has seen (the opponent's plays are public), chosen by the sum of the
deals' values; the opponent, as in PIMC, plays each deal's best. A node with one deal left
is that deal's ordinary search.
"""

from __future__ import annotations

from collections.abc import Sequence

from engine.bot.moves import (
    EQUIVALENCE,
    ONE_STEP,
    Effect,
    Step,
    distinct_cards,
    each_step,
    steps_on,
)
from engine.bot.search import INFINITY, RoundSearch
from engine.cards import CARD_BITS, Card, mask_of
from engine.plans import RELEVANT

Hand = tuple[Card, ...]


def _ways(card: int, floor: int) -> tuple[Step, ...]:
    """Each way to play `card` on `floor`: (cards moved, points, cards taken)."""
    relevant = floor & RELEVANT[card]
    steps = steps_on((relevant << 1 | (relevant != floor)) << CARD_BITS | card)
    return (steps,) if len(steps) == ONE_STEP else each_step(steps)  # type: ignore[return-value]


def fused_values(  # noqa: PLR0917 (an experiment's one call)
    majority: int,
    unseen: int,
    moves: Sequence[tuple[Card, Effect]],
    hand: Hand,
    worlds: Sequence[Hand],
    counts: tuple[int, int],
) -> list[list[int]]:
    """Each root move's value in each deal, this seat's later plays shared across deals."""
    searches = [RoundSearch(majority, unseen & ~mask_of(w), 1 << 60, 8) for w in worlds]
    negamaxes = [s._negamax for s in searches]
    ends = [s._round_over for s in searches]

    def ours(  # noqa: PLR0917
        mine_hand: int, group: list[tuple[int, int]], floor: int, mine: int, theirs: int, depth: int
    ) -> list[int]:
        """This seat to move: one play for the whole group; values for this seat."""
        if len(group) == 1:
            w, opp = group[0]
            return [negamaxes[w](mine_hand, opp, floor, mine, theirs, depth, -INFINITY, INFINITY)]
        best: list[int] | None = None
        best_sum = -INFINITY
        for card in distinct_cards(mine_hand):
            rest = mine_hand ^ 1 << card
            for moved, gain, taken in _ways(card, floor):
                child = theirs_turn(rest, group, floor ^ moved, mine + taken, theirs, depth - 1)
                values = [gain - v for v in child]
                total = sum(values)
                if total > best_sum:
                    best_sum, best = total, values
        assert best is not None
        return best

    def theirs_turn(  # noqa: PLR0917
        mine_hand: int, group: list[tuple[int, int]], floor: int, mine: int, theirs: int, depth: int
    ) -> list[int]:
        """The opponent to move (its pile `theirs`); values for the opponent, deal by deal."""
        if not group[0][1]:
            # This seat made the round's last play: the opponent plays first in the next one.
            return [ends[w](floor, theirs, mine, 0) for w, _ in group]
        if len(group) == 1:
            w, opp = group[0]
            return [negamaxes[w](opp, mine_hand, floor, theirs, mine, depth, -INFINITY, INFINITY)]
        out = [-INFINITY] * len(group)
        classes: dict[int, list[int]] = {}
        for i, (_w, opp) in enumerate(group):
            for card in distinct_cards(opp):
                classes.setdefault(card, []).append(i)
        # Cards that play alike are one public play for grouping: their futures are the same.
        merged: dict[int, tuple[int, list[int]]] = {}
        for card, members in classes.items():
            merged.setdefault(EQUIVALENCE[card], (card, []))[1].extend(members)
        for card, members in merged.values():
            for moved, gain, taken in _ways(card, floor):
                sub = []
                for i in members:
                    w, opp = group[i]
                    sub.append((w, opp ^ 1 << _same(card, opp)))
                if not mine_hand:
                    child = [ends[w](floor ^ moved, mine, theirs + taken, 0) for w, _ in sub]
                else:
                    child = ours(mine_hand, sub, floor ^ moved, mine, theirs + taken, depth - 1)
                for i, v in zip(members, child, strict=True):
                    value = gain - v
                    out[i] = max(out[i], value)
        return out

    group0 = list(enumerate(mask_of(w) for w in worlds))
    me = mask_of(hand)
    out: list[list[int]] = []
    done: dict[tuple[int, Effect], list[int]] = {}
    for card, play in moves:
        key = (card, play)
        if key not in done:
            after, gain, taken = play
            rest = me ^ 1 << card
            child = theirs_turn(rest, group0, after, counts[0] + taken, counts[1], 7)
            done[key] = [gain - v for v in child]
        out.append(done[key])
    for s in searches:
        s._forget()
    return out


def _same(card: int, hand: int) -> int:
    """The card of `hand` that plays like `card` (the first of its kind in canonical order)."""
    if hand >> card & 1:
        return card
    kind = EQUIVALENCE[card]
    return next(c for c in distinct_cards(hand) if EQUIVALENCE[c] == kind)
