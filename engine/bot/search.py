"""Alpha-beta over one sampled deal, where both hands are known (docs/bot.md, "Search").

Negamax with fail-soft alpha-beta and a transposition table, on bitmask positions. Within
the current round both hands are known in a sampled deal, so nothing else needs sampling:
the search stops at the end of the round (new cards would come from the deck, whose order
is unknown), or at a depth limit, and scores what it reaches with engine.bot.evaluation. In
the last round of a hand, with the deck empty, the search runs to the end of the hand and
scores it exactly: leftovers to the last capturer, the majority, and whether the hand ends
the match.

A search value is for the seat to move, in thousandths of a point, and counts only what
happens from the searched position on; each play adds the points it takes (special cards
and Basras).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from engine.bot.evaluation import (
    EXPOSURE,
    FLOOR_CARD,
    FLOOR_POINTS,
    MAJORITY_SHARE,
)
from engine.bot.moves import (
    EQUIVALENCE,
    MILLI,
    ONE_STEP,
    Effect,
    clearers,
    distinct_cards,
    plays,
    points_of,
    steps_on,
)
from engine.cards import CARD_BITS, Card, card_points, mask_of
from engine.facts import DECK_SIZE, HAND_CARDS, MAJORITY_CARDS, TARGET
from engine.plans import RELEVANT

INFINITY = 1 << 50
WIN_VALUE = 1000 * MILLI
"""What ending the match as its winner is worth to the exact solver, beyond the points."""
_TARGET = TARGET * MILLI
# Move ordering: bigger gains first, counting a card taken as this many thousandths.
_ORDER_CARD = 300
# The position key's fields: both hands and the floor (card masks), this seat's pile count.
_MASK_BITS = DECK_SIZE
_COUNT_BITS = DECK_SIZE.bit_length()

Hand = tuple[Card, ...]
Child = tuple[int, int, int, int, int]
"""A node's move: its order key, the floor after it, the points gained, the cards taken, and
the mover's hand left (a mask)."""


class OutOfNodes(Exception):  # noqa: N818 (a budget running out, not an error)
    """The node budget of a deal ran out before its search finished."""


def root_values(
    moves: Sequence[tuple[Card, Effect]], hand: Hand, value_of: Callable[[Effect, Hand], int]
) -> list[int]:
    """Values of the root moves; cards that play alike with the same play share one search."""
    done: dict[tuple[int, Effect], int] = {}
    out: list[int] = []
    for card, play in moves:
        key = (EQUIVALENCE[card], play)
        if key not in done:
            i = hand.index(card)
            done[key] = value_of(play, hand[:i] + hand[i + 1 :])
        out.append(done[key])
    return out


class _Counted:
    """A search within a node budget."""

    __slots__ = ("_left", "_limit")

    def __init__(self, node_limit: int) -> None:
        self._limit = self._left = node_limit

    @property
    def nodes(self) -> int:
        """Nodes visited so far."""
        return self._limit - self._left

    def count(self, nodes: int) -> None:
        """Count `nodes` more nodes; OutOfNodes, the whole budget spent, if they do not fit."""
        left = self._left - nodes
        if left < 0:
            self._left = 0
            raise OutOfNodes
        self._left = left


def moves(mover: int, floor: int) -> list[Child]:
    """A node's moves: each way to play each card worth trying, biggest gain first."""
    children: list[Child] = []
    for card in distinct_cards(mover):
        rest = mover ^ 1 << card
        # plays(card, floor), written out as in RoundSearch.negamax.
        relevant = floor & RELEVANT[card]
        steps = steps_on((relevant << 1 | (relevant != floor)) << CARD_BITS | card)
        for moved, gain, taken in (steps,) if len(steps) == ONE_STEP else plays(card, floor):
            children.append((gain + _ORDER_CARD * taken, floor ^ moved, gain, taken, rest))
    children.sort(reverse=True)
    return children


class RoundSearch(_Counted):
    """Search of the rest of the current round in one sampled deal, `depth` plies at most.

    A node is a position searched or a play that ends the round. The search stops at the
    round's end; a subclass that knows what follows may search on past it by lowering
    `past_end` and overriding `round_over`.
    """

    __slots__ = ("_deck", "_exposure", "_majority", "_table", "depth", "past_end")

    def __init__(self, majority_points: int, deck_mask: int, node_limit: int, depth: int) -> None:
        """`deck_mask`: the deal's deck, from which the next round's hands come."""
        super().__init__(node_limit)
        self.depth = depth
        self.past_end = INFINITY
        """The round's last play is searched on, not evaluated, with more plies left than
        this."""
        self._majority = majority_points
        self._deck = deck_mask
        self._exposure = EXPOSURE[HAND_CARDS][deck_mask.bit_count()]
        self._table: dict[int, tuple[int, int]] = {}

    def values(
        self,
        moves: Sequence[tuple[Card, Effect]],
        hand: Hand,
        other: Hand,
        counts: tuple[int, int],
    ) -> list[int]:
        """Value of each root move for the seat holding `hand` (its pile, the other's)."""
        theirs = mask_of(other)
        mine, their_count = counts
        depth = self.depth - 1

        def value(play: Effect, rest: Hand) -> int:
            after, gain, taken = play
            return gain - self.negamax(
                theirs, mask_of(rest), after, their_count, mine + taken, depth, -INFINITY, INFINITY
            )

        return root_values(moves, hand, value)

    def negamax(  # noqa: PLR0917 (positional: the hottest call of the service)
        self,
        mover: int,
        other: int,
        floor: int,
        mine: int,
        theirs: int,
        depth: int,
        alpha: int,
        beta: int,
    ) -> int:
        """Value for the seat holding `mover` (a mask; `mine` its pile count), `depth` plies
        left, fail-soft within (alpha, beta)."""
        if not mover:
            return self.round_over(floor, mine, theirs, depth, alpha, beta)
        # The node count, and for a node with one card left (half the nodes, no transpositions
        # worth a table entry) its ways, the round's last play, the leaf and the cut-off, are
        # written out here: such a node does little work, so a Python call per piece would cost
        # more than the work itself.
        left = self._left
        if not left:
            raise OutOfNodes
        self._left = left - 1
        if not mover & (mover - 1):
            card = mover.bit_length() - 1
            relevant = floor & RELEVANT[card]
            steps = steps_on((relevant << 1 | (relevant != floor)) << CARD_BITS | card)
            ways = (steps,) if len(steps) == ONE_STEP else plays(card, floor)
            best = -INFINITY
            if not other and depth <= self.past_end:
                left = self._left - len(ways)
                if left < 0:
                    self._left = 0
                    raise OutOfNodes
                self._left = left
                for moved, gain, taken in ways:
                    value = gain - self.evaluate(floor ^ moved, theirs, mine + taken)
                    if value > best:  # noqa: PLR1730 (a comparison is cheaper than a call)
                        best = value
                return best
            if depth <= 1:
                left = self._left - len(ways)
                if left < 0:
                    self._left = 0
                    raise OutOfNodes
                self._left = left
                majority, share = self._majority, MAJORITY_SHARE[theirs]
                for _moved, gain, taken in ways:
                    value = gain - majority * share[mine + taken]
                    if value > best:  # noqa: PLR1730 (a comparison is cheaper than a call)
                        best = value
                return best
            for moved, gain, taken in ways:
                value = gain - self.negamax(
                    other,
                    0,
                    floor ^ moved,
                    theirs,
                    mine + taken,
                    depth - 1,
                    gain - beta,
                    gain - alpha,
                )
                if value > best:
                    best = value
                    if value > alpha:
                        alpha = value
                        if alpha >= beta:
                            break
            return best
        # The position as one integer: both hands, the floor and this seat's pile count
        # (the other's follows from them); the depth left follows from the hands.
        key = (((mover << _MASK_BITS | other) << _MASK_BITS | floor) << _COUNT_BITS) | mine
        bounds = self._table.get(key)
        if bounds is not None:
            low, high = bounds
            if low >= beta:
                return low
            if high <= alpha or low == high:
                return high
            alpha = max(alpha, low)
            beta = min(beta, high)
        else:
            low, high = -INFINITY, INFINITY
        children = moves(mover, floor)
        if depth <= 1:
            best = self.leaf(children, mine, theirs)
        else:
            best = self.cut_off(children, other, mine, theirs, depth, alpha, beta)
        if best <= alpha:
            high = best
        elif best >= beta:
            low = best
        else:
            low = high = best
        self._table[key] = (low, high)
        return best

    def cut_off(  # noqa: PLR0917
        self,
        children: list[Child],
        other: int,
        mine: int,
        theirs: int,
        depth: int,
        alpha: int,
        beta: int,
    ) -> int:
        """The best child's value, searched in order until one reaches `beta` (the cut-off)."""
        best = -INFINITY
        for _, after, gain, taken, rest in children:
            value = gain - self.negamax(
                other, rest, after, theirs, mine + taken, depth - 1, gain - beta, gain - alpha
            )
            if value > best:
                best = value
                if value > alpha:
                    alpha = value
                    if alpha >= beta:
                        break
        return best

    def leaf(self, children: list[Child], mine: int, theirs: int) -> int:
        """The depth limit: the best child by its gain and the majority term, a node each."""
        self.count(len(children))
        majority, share = self._majority, MAJORITY_SHARE[theirs]
        best = -INFINITY
        for _, _after, gain, taken, _rest in children:
            value = gain - majority * share[mine + taken]
            if value > best:  # noqa: PLR1730 (a comparison is cheaper than a call)
                best = value
        return best

    def round_over(  # noqa: PLR0917 (as negamax, whose position it is)
        self, floor: int, mine: int, theirs: int, depth: int, alpha: int, beta: int
    ) -> int:
        """A position with no card left: the round is over. Evaluated, a node; `depth`, `alpha`
        and `beta` are for a search that goes on past the round's end."""
        self.count(1)
        return self.evaluate(floor, mine, theirs)

    def evaluate(self, floor: int, mine: int, theirs: int) -> int:
        """The round is over: value for the seat that plays first in the next one."""
        value = self._majority * MAJORITY_SHARE[mine][theirs]
        if not floor:
            return value
        chance = self._exposure[(clearers(floor) & self._deck).bit_count()]
        return value + chance + FLOOR_CARD * floor.bit_count() + FLOOR_POINTS * card_points(floor)


class EndgameSolver(_Counted):
    """Exact search of the last round of a hand (deck empty: both hands known), to its end."""

    __slots__ = ("_first_total", "_majority", "_second_total")

    def __init__(self, majority_points: int, totals: tuple[int, int], node_limit: int) -> None:
        """`totals`: match totals of the non-dealer (who moves when the hand ends), then of
        the dealer."""
        super().__init__(node_limit)
        self._majority = majority_points * MILLI
        self._first_total, self._second_total = totals[0] * MILLI, totals[1] * MILLI

    def values(
        self,
        moves: Sequence[tuple[Card, Effect]],
        hand: Hand,
        other: Hand,
        counts: tuple[int, int],
        *,
        points: tuple[int, int],
        last: int,
    ) -> list[int]:
        """Exact value of each root move for the seat holding `hand`.

        `points` are both seats' points of this hand so far (special cards and Basras, in
        thousandths), `last` is 1 when this seat captured last, -1 the other, 0 nobody.
        """
        solve = self.solve

        def value(play: Effect, rest: Hand) -> int:
            after, gain, taken = play
            if taken:
                return -solve(
                    other, rest, after, counts[1], counts[0] + taken, points[1],
                    points[0] + gain, -1, -INFINITY, INFINITY,
                )  # fmt: skip
            return -solve(
                other, rest, after, counts[1], counts[0], points[1], points[0], -last,
                -INFINITY, INFINITY,
            )  # fmt: skip

        return root_values(moves, hand, value)

    def end(self, floor: int, mine: int, theirs: int, pm: int, pt: int, last: int) -> int:  # noqa: PLR0917
        """The hand is over: its value for the seat to move then (the non-dealer)."""
        if floor and last:
            if last > 0:
                mine += floor.bit_count()
                pm += points_of(floor)
            else:
                theirs += floor.bit_count()
                pt += points_of(floor)
        if mine >= MAJORITY_CARDS:
            pm += self._majority
        elif theirs >= MAJORITY_CARDS:
            pt += self._majority
        value = pm - pt
        a, b = self._first_total + pm, self._second_total + pt
        if (a >= _TARGET or b >= _TARGET) and a != b:
            value += WIN_VALUE if a > b else -WIN_VALUE
        return value

    def solve(  # noqa: PLR0917 (positional: the hottest call of the solver)
        self,
        mover: Hand,
        other: Hand,
        floor: int,
        mine: int,
        theirs: int,
        pm: int,
        pt: int,
        last: int,
        alpha: int,
        beta: int,
    ) -> int:
        """Exact value for the seat holding `mover` (`pm` its points, `pt` the other's),
        fail-soft within (alpha, beta)."""
        self.count(1)
        if not mover:
            return self.end(floor, mine, theirs, pm, pt, last)
        best = -INFINITY
        if len(mover) == 1 and not other:
            # The hand's last play: each way ends the hand (a node each).
            ways = plays(mover[0], floor)
            self.count(len(ways))
            for moved, gain, taken in ways:
                if taken:
                    value = -self.end(floor ^ moved, theirs, mine + taken, pt, pm + gain, -1)
                else:
                    value = -self.end(floor ^ moved, theirs, mine, pt, pm, -last)
                if value > best:  # noqa: PLR1730 (a comparison is cheaper than a call)
                    best = value
            return best
        for card in distinct_cards(mask_of(mover)):  # hands in canonical order, as given
            i = mover.index(card)
            rest = mover[:i] + mover[i + 1 :]
            for moved, gain, taken in plays(card, floor):
                after = floor ^ moved
                if taken:
                    value = -self.solve(
                        other, rest, after, theirs, mine + taken, pt, pm + gain, -1, -beta, -alpha
                    )
                else:
                    value = -self.solve(
                        other, rest, after, theirs, mine, pt, pm, -last, -beta, -alpha
                    )
                if value > best:
                    best = value
                    if value > alpha:
                        alpha = value
                        if alpha >= beta:
                            return best
        return best
