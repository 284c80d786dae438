"""The players of the bot benchmarks: the levels, the bot of another checkout, and the peekers.

A player is named by a spec, `NAME` or `NAME:DEALS:NODES` (a budget of its own, else the
run's), and is a function from a whole State to the Action it plays. Names:

- `RANDOM`, `GREEDY`, `STRONG`: the levels of this checkout, from the seat's information set.
- `BASE`: STRONG of another checkout (`--baseline TREE`, e.g. a `git worktree` of an older
  commit), loaded side by side in the same process; it sees the same information set.
- `PEEK_HAND`: STRONG's search told the opponent's true hand (one deal, the real one).
- `PEEK_DECK`: the same told the opponent's hand and the deck's order: it searches across
  the round's end into the true next deal where the budget allows (`ToldDeckSearch`).

The peekers read the State's hidden parts on purpose, to measure how much room honest play
has (the ceiling, docs/bot.md). They live here, in benchmark code; the service only ever
calls engine.bot.suggest on an information set.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from dataclasses import fields
from pathlib import Path
from types import ModuleType
from typing import Any

from engine import Action, State
from engine.bot import DEFAULT_BUDGET, Budget, Level, Suggestion, search_hands, suggest
from engine.bot.levels import MAX_DEPTH
from engine.bot.search import RoundSearch
from engine.cards import mask_of
from engine.facts import DECK_SIZE, HAND_CARDS
from engine.view import information_set

Decide = Callable[[State], Action]
NAMES = ("RANDOM", "GREEDY", "STRONG", "BASE", "PEEK_HAND", "PEEK_DECK")

_baseline: dict[str, Any] = {}


def load_baseline(tree: Path) -> None:
    """Import the bot of the checkout at `tree` as objects of their own, for `BASE`.

    Its modules are imported from `tree` with this checkout's engine moved out of the way
    for the time, then this checkout's modules put back: both bots then live in one process.
    """
    tree = tree.resolve()
    mine = {n: m for n, m in sys.modules.items() if n == "engine" or n.startswith("engine.")}
    for name in mine:
        del sys.modules[name]
    sys.path.insert(0, str(tree))
    try:
        modules: dict[str, ModuleType] = {
            name: importlib.import_module(name) for name in ("engine.bot", "engine.infoset")
        }
        for module in modules.values():
            assert tree in Path(str(module.__file__)).parents, f"{module} is not from {tree}"
    finally:
        sys.path.remove(str(tree))
        for name in [n for n in sys.modules if n == "engine" or n.startswith("engine.")]:
            del sys.modules[name]
        sys.modules.update(mine)
    bot, infoset = modules["engine.bot"], modules["engine.infoset"]
    _baseline.update(
        suggest=bot.suggest,
        level=bot.Level.STRONG,
        budget=bot.Budget,
        default=bot.DEFAULT_BUDGET,
        infoset=infoset.InformationSet,
        names=[f.name for f in fields(infoset.InformationSet)],
        tree=str(tree),
    )


def baseline_tree() -> str | None:
    """The checkout `BASE` plays from, if one was loaded."""
    return _baseline.get("tree")


def parse(spec: str, budget: Budget) -> tuple[str, Budget]:
    """A spec's name and budget (its own, or `budget`)."""
    name, *rest = spec.upper().split(":")
    if name not in NAMES:
        raise SystemExit(f"unknown player {name!r}; one of {', '.join(NAMES)}")
    if rest:
        deals, nodes = (int(x) for x in rest)
        budget = Budget(deals, nodes)
    return name, budget


def player(spec: str, budget: Budget = DEFAULT_BUDGET) -> Decide:
    """The function that plays as `spec`."""
    name, budget = parse(spec, budget)
    if name in ("RANDOM", "GREEDY", "STRONG"):
        level = Level(name)

        def honest(state: State) -> Action:
            seat = _seat(state)
            chosen = suggest(information_set(state, seat), level, b"", budget)
            return Action(seat, chosen.card, chosen.plan_id)

        return honest
    if name == "BASE":
        if not _baseline:
            raise SystemExit("BASE needs --baseline TREE (a checkout of the older bot)")
        old_budget = _baseline["budget"](budget.deals, budget.nodes)

        def base(state: State) -> Action:
            seat = _seat(state)
            info = information_set(state, seat)
            old = _baseline["infoset"](**{n: getattr(info, n) for n in _baseline["names"]})
            chosen = _baseline["suggest"](old, _baseline["level"], b"", old_budget)
            return Action(seat, chosen.card, chosen.plan_id)

        return base
    told_deck = name == "PEEK_DECK"

    def peek(state: State) -> Action:
        seat = _seat(state)
        if told_deck:
            chosen = peek_deck(state, seat, budget)
        else:
            hand = tuple(sorted(state.hands[1 - seat]))
            chosen = search_hands(information_set(state, seat), [hand], budget)
        return Action(seat, chosen.card, chosen.plan_id)

    return peek


CROSS_PLIES = 8
"""Plies searched past the round's end when the deal fixes the next round (a told deck)."""
CROSS_DEPTH = 12
"""The most plies searched when crossing a round's end."""


class ToldDeckSearch(RoundSearch):
    """STRONG's search of one deal told the next round's hands as well: past the round's end
    it searches on into that deal while its depth lasts."""

    __slots__ = ("_boundary", "_first", "_later", "_second")

    def __init__(
        self,
        majority_points: int,
        deck_mask: int,
        node_limit: int,
        depth: int,
        next_deal: tuple[int, int],
    ) -> None:
        """`next_deal`: the next round's hands as masks, the non-dealer's then the dealer's."""
        super().__init__(majority_points, deck_mask, node_limit, depth)
        # A last play with two plies or more left is searched on, across the round's end.
        self.past_end = 1
        self._first, self._second = next_deal
        # The round's end is where the piles and the floor hold every card but the deck's.
        self._boundary = DECK_SIZE - deck_mask.bit_count()
        # The next round's end is valued against the deck its hands leave.
        self._later = RoundSearch(majority_points, deck_mask & ~(self._first | self._second), 0, 0)

    def round_over(  # noqa: PLR0917 (as RoundSearch.round_over)
        self, floor: int, mine: int, theirs: int, depth: int, alpha: int, beta: int
    ) -> int:
        """The current round's end, plies left: the search goes on into the told next deal."""
        if depth > 0 and self._ends_round(floor, mine, theirs):
            return self.negamax(self._first, self._second, floor, mine, theirs, depth, alpha, beta)
        return super().round_over(floor, mine, theirs, depth, alpha, beta)

    def evaluate(self, floor: int, mine: int, theirs: int) -> int:
        """As RoundSearch.evaluate at the current round's end, against the later deck past it."""
        if self._ends_round(floor, mine, theirs):
            return super().evaluate(floor, mine, theirs)
        return self._later.evaluate(floor, mine, theirs)

    def _ends_round(self, floor: int, mine: int, theirs: int) -> bool:
        """Whether a position with no card in hand is the current round's end."""
        return floor.bit_count() + mine + theirs == self._boundary


def peek_deck(state: State, seat: int, budget: Budget) -> Suggestion:
    """STRONG's search told the opponent's hand and the deck's order (`PEEK_DECK`)."""
    info = information_set(state, seat)
    hand = tuple(sorted(state.hands[1 - seat]))
    deck = state.deck
    if len(deck) < 2 * HAND_CARDS:
        return search_hands(info, [hand], budget)
    next_deal = mask_of(deck[:HAND_CARDS]), mask_of(deck[HAND_CARDS : 2 * HAND_CARDS])
    plies = min(CROSS_DEPTH, min(MAX_DEPTH, len(info.hand) + info.opponent_hand_size) + CROSS_PLIES)

    def deal_search(majority: int, deck_mask: int, node_limit: int, depth: int) -> RoundSearch:
        return ToldDeckSearch(majority, deck_mask, node_limit, depth, next_deal)

    return search_hands(info, [hand], budget, deal_search=deal_search, plies=plies)


def _seat(state: State) -> int:
    seat = state.to_move
    assert seat is not None
    return seat
