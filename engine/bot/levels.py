"""The three levels of the bot and what they answer (docs/bot.md).

RANDOM picks a legal action uniformly; GREEDY takes the best immediate outcome; STRONG
searches sampled deals (engine.bot.search). Each reads only an InformationSet.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from itertools import combinations
from math import comb

from engine.bot.evaluation import EXPOSURE, MAJORITY_SHARE
from engine.bot.moves import MILLI, Effect, clearers, effects, points_of
from engine.bot.sampling import Draws
from engine.bot.search import EndgameSolver, OutOfNodes, RoundSearch
from engine.cards import Card, cards_of, mask_of, shows_codes
from engine.errors import Reason, RuleError
from engine.facts import BASRA_POINTS, DEFAULT_WORK_LIMIT, MAJORITY_POINTS
from engine.infoset import InformationSet
from engine.plans import plans_for


class Level(StrEnum):
    """How hard the bot plays."""

    RANDOM = "RANDOM"
    GREEDY = "GREEDY"
    STRONG = "STRONG"


class Why(StrEnum):
    """Stable code of why the suggested action was chosen."""

    ONLY_MOVE = "ONLY_MOVE"
    """There was one legal action."""
    RANDOM = "RANDOM"
    """Drawn uniformly among the legal actions (level RANDOM)."""
    BASRA = "BASRA"
    """The action scores a Basra."""
    SWEEP = "SWEEP"
    """A J or the 7D takes the whole floor (no Basra)."""
    DENY_BASRA = "DENY_BASRA"
    """GREEDY passed over a bigger take that would leave the opponent a likely Basra."""
    BEST_TAKE = "BEST_TAKE"
    """GREEDY: the best immediate outcome."""
    ENDGAME_SOLVED = "ENDGAME_SOLVED"
    """STRONG, deck empty: the rest of the hand was solved exactly."""
    SEARCHED = "SEARCHED"
    """STRONG: the best average over the sampled deals."""


@dataclass(frozen=True, slots=True)
class Budget:
    """Work one STRONG suggestion may do: deals sampled, and nodes searched over all of them."""

    deals: int
    nodes: int


DEFAULT_BUDGET = Budget(deals=16, nodes=2200)


@shows_codes
@dataclass(frozen=True, slots=True)
class Candidate:
    """One legal way to play, as the bot valued it."""

    card: Card
    plan_id: int | None
    """Id of the card's plan carried out, set only when the card has several (as Apply
    takes it): the card and this id tell the candidates apart."""
    value: float
    """Estimated points for the seat, minus the opponent's, from here (see docs/bot.md)."""
    deals: int
    """Sampled deals in which this action was searched."""


@shows_codes
@dataclass(frozen=True, slots=True)
class Suggestion:
    """The action to play and how it was chosen."""

    seat: int
    card: Card
    plan_id: int | None
    """Set only when the card has several plans (as Apply needs it)."""
    candidates: tuple[Candidate, ...]
    """Every legal action considered, best first."""
    reason: Why
    level: Level
    deals: int
    """Deals sampled (STRONG)."""
    nodes: int
    """Search nodes visited (STRONG), or actions valued (GREEDY)."""


@shows_codes
@dataclass(frozen=True, slots=True)
class _Option:
    """A legal action at the root with what it does."""

    card: Card
    plan_id: int | None
    plans: int
    effect: Effect
    basra: bool
    sweep: bool


def default_seed(info: InformationSet) -> bytes:
    """The bot seed used when none is given: a digest of the public position alone."""
    return hashlib.sha256(b"basra-rules/bot-seed\n" + info.public_key()).digest()


def suggest(
    info: InformationSet,
    level: Level = Level.STRONG,
    bot_seed: bytes = b"",
    budget: Budget = DEFAULT_BUDGET,
    work_limit: int = DEFAULT_WORK_LIMIT,
) -> Suggestion:
    """Suggest an action for the seat of `info`, which must be the seat to move."""
    _check(info, budget)
    options = _options(info, work_limit)
    seed = bot_seed or default_seed(info)
    if len(options) == 1:
        return _answer(info, options, [0], [0], level=level, reason=Why.ONLY_MOVE)
    if level is Level.RANDOM:
        return _random(info, options, seed)
    if level is Level.GREEDY:
        return _greedy(info, options)
    return _strong(info, options, seed, budget)


def _check(info: InformationSet, budget: Budget) -> None:
    """Refuse a finished match, a seat that is not to move, and an empty budget."""
    if info.match_over or info.to_move is None:
        raise RuleError(Reason.MATCH_OVER, "The match is over; no more moves can be played.")
    if info.seat != info.to_move:
        raise RuleError(
            Reason.NOT_YOUR_TURN,
            f"It is seat {info.to_move}'s turn, not seat {info.seat}'s.",
            seat=info.seat,
            to_move=str(info.to_move),
        )
    if budget.deals < 1 or budget.nodes < 1:
        raise RuleError(
            Reason.INVALID_ACTION,
            "A budget needs at least one deal and one node.",
            deals=budget.deals,
            nodes=budget.nodes,
        )


def _options(info: InformationSet, work_limit: int) -> list[_Option]:
    """Every legal action, cards in canonical order, each card's plans in offered order."""
    floor = info.floor_mask
    out: list[_Option] = []
    for card in sorted(info.hand):
        plans = plans_for(card, floor, work_limit)
        played = effects(card, floor)
        if not plans:
            out.append(_Option(card, None, 0, played[0], False, False))
            continue
        for plan, effect in zip(plans, played, strict=True):
            out.append(_Option(card, plan.id, len(plans), effect, plan.basra, plan.sweep))
    return out


def _answer(
    info: InformationSet,
    options: list[_Option],
    totals: list[int],
    deals: list[int],
    *,
    level: Level,
    reason: Why,
    sampled: int = 0,
    nodes: int = 0,
) -> Suggestion:
    """Rank the options by value (their mean over the deals searched; ties keep the order of
    `options`) and describe the best."""
    ranked = sorted(range(len(options)), key=lambda i: (-_mean(totals[i], deals[i]), i))
    candidates = tuple(
        Candidate(
            options[i].card,
            options[i].plan_id if options[i].plans > 1 else None,
            _mean(totals[i], deals[i]) / MILLI,
            deals[i],
        )
        for i in ranked
    )
    return Suggestion(
        seat=info.seat,
        card=candidates[0].card,
        plan_id=candidates[0].plan_id,
        candidates=candidates,
        reason=reason,
        level=level,
        deals=sampled,
        nodes=nodes,
    )


def _mean(total: int, deals: int) -> float:
    """A move's value: its mean over the deals it was searched in (the total when none)."""
    return total / deals if deals else total


def _random(info: InformationSet, options: list[_Option], seed: bytes) -> Suggestion:
    """A uniformly drawn legal action; the others follow in canonical order, valued 0."""
    chosen = Draws(seed).below(len(options))
    order = [options[chosen], *(o for i, o in enumerate(options) if i != chosen)]
    zeros = [0] * len(order)
    return _answer(info, order, zeros, zeros, level=Level.RANDOM, reason=Why.RANDOM)


CARD_WEIGHT = 1
"""GREEDY: points per card taken, for the majority."""


def _greedy(info: InformationSet, options: list[_Option]) -> Suggestion:
    """The best immediate outcome (docs/bot.md, "GREEDY")."""
    unseen = info.unseen_mask
    exposure = EXPOSURE[info.opponent_hand_size][unseen.bit_count()]
    takes: list[int] = []
    values: list[int] = []
    for option in options:
        after, gain, taken = option.effect
        take = gain + MILLI * CARD_WEIGHT * taken
        takes.append(take)
        values.append(take - exposure[(clearers(after) & unseen).bit_count()])
    best = max(range(len(options)), key=lambda i: (values[i], -i))
    reason = _why(options[best], Why.DENY_BASRA if takes[best] < max(takes) else Why.BEST_TAKE)
    zeros = [0] * len(options)
    return _answer(
        info, options, values, zeros, level=Level.GREEDY, reason=reason, nodes=len(options)
    )


def _strong(
    info: InformationSet, options: list[_Option], seed: bytes, budget: Budget
) -> Suggestion:
    """Determinized search over sampled deals; the last round of a hand solved exactly."""
    spent = 0
    if info.deck_size == 0:
        solved, spent = _solve(info, options, budget.nodes)
        if solved is not None:
            return solved
    pool = cards_of(info.unseen_mask)
    size = info.opponent_hand_size
    if comb(len(pool), size) <= budget.deals:
        hands = list(combinations(pool, size))
    else:
        hands = balanced_hands(Draws(seed), pool, size, budget.deals)
    return _search(info, options, hands, budget, spent)


DealSearch = Callable[[int, int, int, int], RoundSearch]
"""What searches one deal: (majority points, the deal's deck, node limit, plies) -> search."""


def search_hands(
    info: InformationSet,
    opponent_hands: list[tuple[Card, ...]],
    budget: Budget = DEFAULT_BUDGET,
    work_limit: int = DEFAULT_WORK_LIMIT,
    *,
    deal_search: DealSearch = RoundSearch,
    plies: int | None = None,
) -> Suggestion:
    """STRONG's search over given opponent hands instead of sampled ones.

    For analysis: given the opponent's true hand it is the cheating twin of the tests, and
    the ceiling of benchmarks/bot_players.py (which gives its own `deal_search` and `plies`
    to search on into the true next deal), which show what the honest bot does not know.
    The service never calls it.
    """
    _check(info, budget)
    options = _options(info, work_limit)
    if len(options) == 1:
        return _answer(info, options, [0], [0], level=Level.STRONG, reason=Why.ONLY_MOVE)
    spent = 0
    if info.deck_size == 0:
        solved, spent = _solve(info, options, budget.nodes)
        if solved is not None:
            return solved
    return _search(
        info, options, opponent_hands, budget, spent, deal_search=deal_search, plies=plies
    )


def _search(
    info: InformationSet,
    options: list[_Option],
    hands: list[tuple[Card, ...]],
    budget: Budget,
    spent: int,
    *,
    deal_search: DealSearch = RoundSearch,
    plies: int | None = None,
) -> Suggestion:
    """Search the deals of the given opponent hands, one after another, within the budget
    (of which `spent` nodes are already gone), `plies` deep (by default MAX_DEPTH, or the
    plays left in the round)."""
    me, opp = info.seat, 1 - info.seat
    hand = tuple(sorted(info.hand))
    counts = (len(info.captured[me]), len(info.captured[opp]))
    majority = MAJORITY_POINTS + info.carry
    moves = [(o.card, o.effect) for o in options]
    unseen = info.unseen_mask
    n = len(options)
    totals = [0] * n
    deals = [0] * n
    # The search counts points from here on; the piles' points make values hand margins.
    base = _points(info, me) - _points(info, opp)
    nodes = spent
    searched = 0
    depth = min(MAX_DEPTH, len(hand) + info.opponent_hand_size) if plies is None else plies
    active = list(range(n))
    history: list[list[int]] = [[] for _ in range(n)]
    for world in hands:
        left = budget.nodes - nodes
        if searched and left * searched < nodes:
            break  # another deal would likely not fit in what is left
        if searched >= PRUNE_AFTER and len(active) > 1:
            active = _survivors(active, history, totals, deals)
        while True:
            search = deal_search(majority, unseen & ~mask_of(world), left, depth)
            try:
                values = search.values([moves[i] for i in active], hand, world, counts)
                break
            except OutOfNodes:
                nodes += search.nodes
                left = budget.nodes - nodes
                if searched or depth <= MIN_DEPTH:
                    values = []
                    break
                depth = max(MIN_DEPTH, depth - 2)
        if not values:
            break
        nodes += search.nodes
        searched += 1
        for i, v in zip(active, values, strict=True):
            totals[i] += base + v
            deals[i] += 1
            history[i].append(v)
    if not searched:
        # Not even the shallowest search of one deal fitted: value the plays alone.
        for i, (_card, (_after, gain, taken)) in enumerate(moves):
            totals[i] = base + gain + majority * MAJORITY_SHARE[counts[0] + taken][counts[1]]
    best = max(range(n), key=lambda i: (_mean(totals[i], deals[i]), -i))
    return _answer(
        info,
        options,
        totals,
        deals,
        level=Level.STRONG,
        reason=_why(options[best], Why.SEARCHED),
        sampled=searched,
        nodes=nodes,
    )


def _solve(
    info: InformationSet, options: list[_Option], node_limit: int
) -> tuple[Suggestion | None, int]:
    """The last round of a hand solved exactly (None if it does not fit), and the nodes spent."""
    me, opp = info.seat, 1 - info.seat
    hand = tuple(sorted(info.hand))
    counts = (len(info.captured[me]), len(info.captured[opp]))
    points = [_points(info, me), _points(info, opp)]
    last = 0 if info.last_capturer is None else 1 if info.last_capturer == me else -1
    non_dealer = 1 - info.dealer
    solver = EndgameSolver(
        MAJORITY_POINTS + info.carry,
        (info.totals[non_dealer], info.totals[info.dealer]),
        node_limit,
    )
    moves = [(o.card, o.effect) for o in options]
    try:
        values = solver.values(
            moves,
            hand,
            cards_of(info.unseen_mask),
            counts,
            points=(points[0], points[1]),
            last=last,
        )
    except OutOfNodes:
        return None, solver.nodes
    best = max(range(len(options)), key=lambda i: (values[i], -i))
    solved = _answer(
        info,
        options,
        values,
        [1] * len(options),
        level=Level.STRONG,
        reason=_why(options[best], Why.ENDGAME_SOLVED),
        sampled=1,
        nodes=solver.nodes,
    )
    return solved, solver.nodes


def _points(info: InformationSet, seat: int) -> int:
    """Points of `seat` in this hand so far (special cards and Basras), in thousandths."""
    return points_of(mask_of(info.captured[seat])) + MILLI * BASRA_POINTS * info.basras[seat]


def _survivors(
    active: list[int], history: list[list[int]], totals: list[int], deals: list[int]
) -> list[int]:
    """Drop the moves clearly worse than the leader in the deals both were searched in.

    A move goes when its mean difference to the leader, d, is below zero by more than
    PRUNE_Z standard errors: d < 0 and d^2 > Z^2 var(d) / k, in exact integers.
    """
    leader = max(active, key=lambda i: (totals[i] / deals[i], -i))
    lead = history[leader]
    kept = []
    for i in active:
        if i != leader:
            mine = history[i]
            diffs = [a - b for a, b in zip(mine, lead[len(lead) - len(mine) :], strict=True)]
            k, total = len(diffs), sum(diffs)
            spread = k * sum(d * d for d in diffs) - total * total
            if total < 0 and total * total * (k - 1) > PRUNE_Z_SQUARED * spread:
                continue
        kept.append(i)
    return kept


MAX_DEPTH = 7
"""Plies searched at most. A round has eight plays; at its first, the last one (the
dealer's last card) is left to the evaluation: that frees nodes for more deals within the
same budget (docs/bot.md, "STRONG: the search")."""
MIN_DEPTH = 2
"""The shallowest search tried when a deal does not fit in the node budget."""
PRUNE_AFTER = 4
"""Deals searched before moves clearly behind the leader are dropped."""
PRUNE_Z_SQUARED = 9
"""How clearly: three standard errors of the paired difference, squared."""


def balanced_hands(
    draws: Draws, pool: tuple[Card, ...], size: int, count: int
) -> list[tuple[Card, ...]]:
    """`count` hands of `size` cards from `pool`, each uniformly random on its own.

    Consecutive hands are cut from one shuffle of the pool (a fresh shuffle when it runs
    out), so every unseen card turns up about equally often across the deals: the chance
    of each card being in the opponent's hand is estimated with less noise than by
    independent draws.
    """
    hands: list[tuple[Card, ...]] = []
    while len(hands) < count:
        shuffled = draws.sample(pool, len(pool))
        for start in range(0, len(pool) - size + 1, size):
            hands.append(tuple(sorted(shuffled[start : start + size])))
            if len(hands) == count:
                break
    return hands


def _why(best: _Option, otherwise: Why) -> Why:
    """Why `best` was chosen: BASRA or SWEEP when it is one, else `otherwise`."""
    return Why.BASRA if best.basra else Why.SWEEP if best.sweep else otherwise
