"""What a hand's outcome is worth for the match, when the hand may end it (docs/bot.md).

The search values a line by the hand's expected point margin. Near 121, or with a large
carry, points are not what counts: a seat that is sure to pass 121 with the higher total
wins whatever the margin, and one that needs the majority must play for it. In a hand that
may end the match, each sampled deal's expected margin is turned into the chance of winning
the match: the rest of the hand's points are spread around that margin (a binomial of fixed
width, exact integers) and shared out from the points still to be scored; where a seat then
passes 121, the higher total wins; where nobody does, the match goes on and the chance grows
with the lead. The value is the margin plus WIN_VALUE times (P(win) - P(loss)), as the exact
solver of the last round counts a won match.
"""

from __future__ import annotations

from math import comb, isqrt

from engine.bot.moves import MILLI
from engine.facts import BASRA_POINTS, ITEM_POINTS, TARGET

WIN_VALUE = 1000 * MILLI
"""What winning the match is worth beyond the points (as engine.bot.search counts it)."""
_STEPS = 4
# The spread of the rest of the hand's margin: binomial weights over 2 * _STEPS + 1 points,
# one point every SPREAD_UNIT standard deviations (a binomial of 2 * _STEPS draws has a
# standard deviation of sqrt(_STEPS / 2)).
_WEIGHTS = tuple(comb(2 * _STEPS, j) for j in range(2 * _STEPS + 1))
_TOTAL = sum(_WEIGHTS)
SPREAD_PER_PLAY = 25
"""Variance of the rest of the hand's point margin per play left, in points squared (a
fresh hand: about 35 points of standard deviation, the majority being most of it)."""
BASRAS_PER_PLAY = 300
"""Basra points a play scores on average, in thousandths (about one and a half Basras a
hand)."""
LATER_LEAD = 40
"""Points of lead, at the end of a hand that does not end the match, that make the rest of
the match a sure thing (the chance grows linearly up to it)."""


class Stakes:
    """The match value of a hand's expected margin at one decision of a seat."""

    __slots__ = ("_mine", "_spread", "_still", "_theirs")

    def __init__(self, mine: int, theirs: int, still: int, plays_left: int) -> None:
        """`mine`, `theirs`: each seat's match total plus its points of this hand so far;
        `still`: points still to be scored in the hand as expected (all in thousandths)."""
        self._mine, self._theirs, self._still = mine, theirs, still
        # One grid step in thousandths: sd / sqrt(_STEPS / 2), sd = sqrt(SPREAD * plays).
        self._spread = isqrt(SPREAD_PER_PLAY * plays_left * MILLI * MILLI * 2 // _STEPS)

    def value(self, margin: int) -> int:
        """The match value of an expected margin of the rest of the hand (thousandths)."""
        wins = 0
        target = TARGET * MILLI
        lead = LATER_LEAD * MILLI
        for j, weight in enumerate(_WEIGHTS):
            rest = margin + (j - _STEPS) * self._spread
            mine = self._mine + (self._still + rest) // 2
            theirs = self._theirs + (self._still - rest) // 2
            if mine >= target or theirs >= target:
                outcome = 2 * lead if mine > theirs else 0 if mine < theirs else lead
            else:
                outcome = min(2 * lead, max(0, lead + mine - theirs))
            wins += weight * outcome
        # (P(win) - P(loss)) = 2 P(win) - 1, with P(win) = wins / (_TOTAL * 2 * lead).
        return margin + WIN_VALUE * (wins - _TOTAL * lead) // (_TOTAL * lead)


def stakes(
    totals: tuple[int, int],
    points: tuple[int, int],
    taken_items: int,
    majority: int,
    plays_left: int,
) -> Stakes | None:
    """The match value of this hand for the seat whose totals come first, or None when the
    hand cannot end the match (nobody can reach 121 with what is left to score).

    `points`: both seats' points of the hand so far, `taken_items` the special cards' points
    already in the piles (thousandths); `majority`: its points (30 plus the carry).
    """
    still = MILLI * (ITEM_POINTS + majority) - taken_items + BASRAS_PER_PLAY * plays_left
    best = max(MILLI * totals[0] + points[0], MILLI * totals[1] + points[1])
    # Leave room for a few more Basras than the average before calling the hand safe.
    if best + still + 3 * MILLI * BASRA_POINTS < TARGET * MILLI:
        return None
    return Stakes(MILLI * totals[0] + points[0], MILLI * totals[1] + points[1], still, plays_left)
