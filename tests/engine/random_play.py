"""Random legal play of whole matches, choosing among every way an action may be written."""

from __future__ import annotations

import random
from dataclasses import dataclass

from engine import Action, Event, State, Status, apply, legal_moves, new_match


def random_action(state: State, rnd: random.Random, prefer_trail: bool = False) -> Action:
    """Return a random legal action: a plan id, an explicit capture set, no choice, or a trail."""
    assert state.to_move is not None
    seat = state.to_move
    moves = legal_moves(state)
    if prefer_trail:
        # Trailing whenever possible grows the floor: big reachable floors get exercised.
        trailing = [m for m in moves if m.trails]
        if trailing:
            moves = tuple(trailing)
    move = rnd.choice(moves)
    if not move.plans:
        way = rnd.randrange(3)
        if way == 0:
            return Action(seat, move.card)
        if way == 1:
            return Action(seat, move.card, trail=True)
        return Action(seat, move.card, capture=())
    plan = rnd.choice(move.plans)
    way = rnd.randrange(3 if len(move.plans) == 1 else 2)
    if way == 0:
        return Action(seat, move.card, plan_id=plan.id)
    if way == 1:
        cards = list(plan.cards)
        rnd.shuffle(cards)
        return Action(seat, move.card, capture=tuple(cards))
    return Action(seat, move.card)


@dataclass(frozen=True)
class Played:
    """A match played to its end: every state (first included), events per step, actions."""

    states: tuple[State, ...]
    events: tuple[tuple[Event, ...], ...]
    actions: tuple[Action, ...]


def play_match(
    seed: bytes, rnd: random.Random, prefer_trail: bool = False, max_plays: int = 5000
) -> Played:
    """Play a whole match from `seed` with random legal actions."""
    state, first = new_match(seed)
    states = [state]
    events = [first]
    actions: list[Action] = []
    while state.status is Status.IN_PROGRESS:
        assert len(actions) < max_plays, "the match does not end"
        action = random_action(state, rnd, prefer_trail)
        state, produced = apply(state, action)
        states.append(state)
        events.append(produced)
        actions.append(action)
    return Played(tuple(states), tuple(events), tuple(actions))
