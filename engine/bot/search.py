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
and Basras). The functions are closures over one deal's constants: a node is the hottest
code of the service, and local names are the cheapest lookups CPython has.
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
    each_step,
    points_of,
    steps_on,
)
from engine.cards import CARD_BITS, Card, card_points, mask_of
from engine.facts import DECK_SIZE, HAND_CARDS, MAJORITY_CARDS, TARGET
from engine.plans import RELEVANT

INFINITY = 1 << 50
WIN_VALUE = 1000 * MILLI
"""What ending the match as its winner is worth to the exact solver, beyond the points."""
# Move ordering: bigger gains first, counting a card taken as this many thousandths.
_ORDER_CARD = 300

Hand = tuple[Card, ...]


class OutOfNodes(Exception):  # noqa: N818 (a budget running out, not an error)
    """The node budget of a deal ran out before its search finished."""


def _first(item: tuple[int, int, int, int, Hand]) -> int:
    return item[0]


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


class RoundSearch:
    """Search of the rest of the current round in one sampled deal, `depth` plies at most."""

    __slots__ = ("_forget", "_negamax", "_nodes", "_round_over", "depth")

    def __init__(
        self,
        majority_points: int,
        deck_mask: int,
        node_limit: int,
        depth: int,
        next_deal: tuple[int, int] | None = None,
    ) -> None:
        """`next_deal`: the next round's hands (the non-dealer's, the dealer's) as masks, when
        the deal fixes them: the search then goes on past the round's end while its depth lasts.
        """
        self.depth = depth
        self._negamax, self._round_over, self._nodes, self._forget = _round_search(
            majority_points, deck_mask, node_limit, next_deal
        )

    @property
    def nodes(self) -> int:
        """Nodes visited so far."""
        return self._nodes()

    def values(
        self,
        moves: Sequence[tuple[Card, Effect]],
        hand: Hand,
        other: Hand,
        counts: tuple[int, int],
    ) -> list[int]:
        """Value of each root move for the seat holding `hand` (its pile, the other's)."""
        negamax, round_over, depth = self._negamax, self._round_over, self.depth
        theirs = mask_of(other)

        def value(play: Effect, rest: Hand) -> int:
            after, gain, taken = play
            if not other and not rest:
                # The round's last play: no search below it (one node of work), or the next
                # round's when the deal fixes it.
                return gain - round_over(after, counts[1], counts[0] + taken, depth - 1)
            return gain - negamax(
                theirs,
                mask_of(rest),
                after,
                counts[1],
                counts[0] + taken,
                depth - 1,
                -INFINITY,
                INFINITY,
            )

        try:
            return root_values(moves, hand, value)
        finally:
            self._forget()


def _round_search(
    majority: int, deck_mask: int, node_limit: int, next_deal: tuple[int, int] | None
) -> tuple[
    Callable[[int, int, int, int, int, int, int, int], int],
    Callable[[int, int, int, int], int],
    Callable[[], int],
    Callable[[], None],
]:
    """The negamax of one deal, its round-end evaluation, its node counter and what lets the
    deal's search be freed once done."""
    exposure = EXPOSURE[HAND_CARDS][deck_mask.bit_count()]
    share = MAJORITY_SHARE
    relevant_of = RELEVANT
    # Names bound here, read as fast as literals in the loops below: a step's key is
    # moves.step_key written out (a call per step would cost more than the step).
    card_bits, mask_bits, count_bits = CARD_BITS, DECK_SIZE, DECK_SIZE.bit_length()
    one_step = ONE_STEP
    table: dict[int, tuple[int, int]] = {}
    nodes = 0
    # With the next deal fixed, the search may cross the current round's end (once): that end
    # is where the piles and the floor hold every card but the deck's (`boundary`).
    first_hand, second_hand = next_deal or (0, 0)
    boundary = DECK_SIZE - deck_mask.bit_count()
    later_deck = deck_mask & ~(first_hand | second_hand)
    later_exposure = EXPOSURE[HAND_CARDS][later_deck.bit_count()]

    def evaluate(floor: int, mine: int, theirs: int) -> int:
        """The round is over: value for the seat that plays first in the next one."""
        if next_deal and floor.bit_count() + mine + theirs != boundary:
            chance = later_exposure[(clearers(floor) & later_deck).bit_count()] if floor else 0
        else:
            chance = exposure[(clearers(floor) & deck_mask).bit_count()] if floor else 0
        value = majority * share[mine][theirs]
        if not floor:
            return value
        return value + chance + FLOOR_CARD * floor.bit_count() + FLOOR_POINTS * card_points(floor)

    def round_over(  # noqa: PLR0917
        floor: int,
        mine: int,
        theirs: int,
        depth: int,
        alpha: int = -INFINITY,
        beta: int = INFINITY,
    ) -> int:
        """A play ended the round: the value for the seat that plays first in the next one,
        searched on in the next deal while `depth` plies are left, else evaluated (one node)."""
        if depth > 0 and next_deal and floor.bit_count() + mine + theirs == boundary:
            return negamax(first_hand, second_hand, floor, mine, theirs, depth, alpha, beta)
        nonlocal nodes
        if nodes >= node_limit:
            raise OutOfNodes
        nodes += 1
        return evaluate(floor, mine, theirs)

    def negamax(  # noqa: PLR0917 (positional: the hottest call of the service)
        mover: int,
        other: int,
        floor: int,
        mine: int,
        theirs: int,
        depth: int,
        alpha: int,
        beta: int,
    ) -> int:
        nonlocal nodes
        if nodes >= node_limit:
            raise OutOfNodes
        nodes += 1
        best = -INFINITY
        if not mover & (mover - 1):
            # One card left: no choice of card, no transpositions worth a table entry.
            card = mover.bit_length() - 1
            relevant = floor & relevant_of[card]
            steps = steps_on((relevant << 1 | (relevant != floor)) << card_bits | card)
            ways = (steps,) if len(steps) == one_step else each_step(steps)
            if not other:
                # The round's last play: each step ends the round.
                if depth > 1 and next_deal:
                    for moved, gain, taken in ways:
                        value = gain - round_over(
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
                for moved, gain, taken in ways:
                    if nodes >= node_limit:
                        raise OutOfNodes
                    nodes += 1
                    value = gain - evaluate(floor ^ moved, theirs, mine + taken)
                    if value > best:  # noqa: PLR1730 (a comparison is cheaper than a call)
                        best = value
                return best
            if depth <= 1:
                for _moved, gain, taken in ways:
                    if nodes >= node_limit:
                        raise OutOfNodes
                    nodes += 1
                    value = gain - majority * share[theirs][mine + taken]
                    if value > best:  # noqa: PLR1730 (a comparison is cheaper than a call)
                        best = value
                return best
            for moved, gain, taken in ways:
                value = gain - negamax(
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
        key = (((mover << mask_bits | other) << mask_bits | floor) << count_bits) | mine
        bounds = table.get(key)
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
        start = alpha
        children: list[tuple[int, int, int, int, int]] = []
        for card in distinct_cards(mover):
            rest = mover ^ 1 << card
            relevant = floor & relevant_of[card]
            steps = steps_on((relevant << 1 | (relevant != floor)) << card_bits | card)
            ways = (steps,) if len(steps) == one_step else each_step(steps)
            for moved, gain, taken in ways:
                children.append((gain + _ORDER_CARD * taken, floor ^ moved, gain, taken, rest))
        children.sort(reverse=True)
        if depth <= 1:
            for _, _after, gain, taken, _rest in children:
                if nodes >= node_limit:
                    raise OutOfNodes
                nodes += 1
                value = gain - majority * share[theirs][mine + taken]
                if value > best:  # noqa: PLR1730 (a comparison is cheaper than a call)
                    best = value
        else:
            for _, after, gain, taken, rest in children:
                value = gain - negamax(
                    other, rest, after, theirs, mine + taken, depth - 1, gain - beta, gain - alpha
                )
                if value > best:
                    best = value
                    if value > alpha:
                        alpha = value
                        if alpha >= beta:
                            break
        if best <= start:
            high = best
        elif best >= beta:
            low = best
        else:
            low = high = best
        table[key] = (low, high)
        return best

    def count() -> int:
        return nodes

    def forget() -> None:
        # negamax and round_over call themselves and each other through this scope's cells,
        # a cycle only the cyclic collector would free, table and all, in a full collection's
        # pause; emptying the cells lets the last reference free the deal's search at once.
        nonlocal negamax, round_over
        del negamax, round_over

    return negamax, round_over, count, forget


class EndgameSolver:
    """Exact search of the last round of a hand (deck empty: both hands known), to its end."""

    __slots__ = ("_forget", "_nodes", "_solve")

    def __init__(self, majority_points: int, totals: tuple[int, int], node_limit: int) -> None:
        """`totals`: match totals of the non-dealer (who moves when the hand ends), then of
        the dealer."""
        self._solve, self._nodes, self._forget = _endgame(majority_points, totals, node_limit)

    @property
    def nodes(self) -> int:
        """Nodes visited so far."""
        return self._nodes()

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
        solve = self._solve

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

        try:
            return root_values(moves, hand, value)
        finally:
            self._forget()  # as in RoundSearch.values


def _endgame(
    majority_points: int, totals: tuple[int, int], node_limit: int
) -> tuple[
    Callable[[Hand, Hand, int, int, int, int, int, int, int, int], int],
    Callable[[], int],
    Callable[[], None],
]:
    """The exact solver of one last round, its node counter and what frees it (as in
    _round_search)."""
    majority = majority_points * MILLI
    target = TARGET * MILLI
    relevant_of = RELEVANT
    card_bits, one_step = CARD_BITS, ONE_STEP  # as in _round_search
    first_total, second_total = totals[0] * MILLI, totals[1] * MILLI
    nodes = 0

    def end(floor: int, mine: int, theirs: int, pm: int, pt: int, last: int) -> int:  # noqa: PLR0917
        """The hand is over: its value for the seat to move then (the non-dealer)."""
        if floor and last:
            if last > 0:
                mine += floor.bit_count()
                pm += points_of(floor)
            else:
                theirs += floor.bit_count()
                pt += points_of(floor)
        if mine >= MAJORITY_CARDS:
            pm += majority
        elif theirs >= MAJORITY_CARDS:
            pt += majority
        value = pm - pt
        a, b = first_total + pm, second_total + pt
        if (a >= target or b >= target) and a != b:
            value += WIN_VALUE if a > b else -WIN_VALUE
        return value

    def solve(  # noqa: PLR0917 (positional: the hottest call of the solver)
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
        nonlocal nodes
        if nodes >= node_limit:
            raise OutOfNodes
        nodes += 1
        if not mover:
            return end(floor, mine, theirs, pm, pt, last)
        best = -INFINITY
        if len(mover) == 1 and not other:
            # The hand's last play: each step ends the hand.
            card = mover[0]
            relevant = floor & relevant_of[card]
            steps = steps_on((relevant << 1 | (relevant != floor)) << card_bits | card)
            ways = (steps,) if len(steps) == one_step else each_step(steps)
            for moved, gain, taken in ways:
                if nodes >= node_limit:
                    raise OutOfNodes
                nodes += 1
                if taken:
                    value = -end(floor ^ moved, theirs, mine + taken, pt, pm + gain, -1)
                else:
                    value = -end(floor ^ moved, theirs, mine, pt, pm, -last)
                if value > best:  # noqa: PLR1730 (a comparison is cheaper than a call)
                    best = value
            return best
        for card in distinct_cards(mask_of(mover)):  # hands in canonical order, as given
            i = mover.index(card)
            rest = mover[:i] + mover[i + 1 :]
            relevant = floor & relevant_of[card]
            steps = steps_on((relevant << 1 | (relevant != floor)) << card_bits | card)
            ways = (steps,) if len(steps) == one_step else each_step(steps)
            for moved, gain, taken in ways:
                after = floor ^ moved
                if taken:
                    value = -solve(
                        other, rest, after, theirs, mine + taken, pt, pm + gain, -1, -beta, -alpha
                    )
                else:
                    value = -solve(other, rest, after, theirs, mine, pt, pm, -last, -beta, -alpha)
                if value > best:
                    best = value
                    if value > alpha:
                        alpha = value
                        if alpha >= beta:
                            return best
        return best

    def count() -> int:
        return nodes

    def forget() -> None:
        nonlocal solve
        del solve

    return solve, count, forget
