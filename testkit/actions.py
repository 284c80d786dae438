"""Random legal play: one random legal action, every way to write it, whole random matches.

The one helper of its kind for tests, benchmarks and the soak. Actions are drawn uniformly
from `engine.legal_actions` (one per plan of a capturing card, one trail per card that
trails); `spellings` gives the other ways the contract accepts to write the same choice,
and `action_to_proto` turns any of them into its message, keeping the way it was written.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from basra.v1 import rules_pb2 as pb

from engine import (
    Action,
    Event,
    State,
    Status,
    apply,
    code,
    legal_actions,
    new_match,
    plans_for,
)


def spellings(state: State, action: Action) -> tuple[Action, ...]:
    """Every way to write a listed legal action: by plan id, its cards, no choice, or a trail.

    `action` is one of `legal_actions(state)`. A capture may also be written as the plan's
    cards (in any order), and with no choice when it is the card's only plan; a trail also
    as no choice or as an empty capture set.
    """
    seat, card = action.seat, action.card
    if action.trail:
        return (action, Action(seat, card), Action(seat, card, capture=()))
    assert action.plan_id is not None, "spellings takes an action of legal_actions"
    plans = plans_for(card, state.floor_mask)
    ways = (action, Action(seat, card, capture=plans[action.plan_id - 1].cards))
    return (*ways, Action(seat, card)) if len(plans) == 1 else ways


def random_action(
    state: State, rnd: random.Random, *, prefer_trail: bool = False, any_spelling: bool = False
) -> Action:
    """Return a random legal action of the seat to move, every one of them equally likely.

    `prefer_trail` draws among the trails when there are any (trailing grows the floor, so
    big reachable floors get exercised). `any_spelling` writes the action in a random one
    of its `spellings`, a capture set in a random order.
    """
    actions = list(legal_actions(state))
    if prefer_trail:
        actions = [a for a in actions if a.trail] or actions
    action = rnd.choice(actions)
    if not any_spelling:
        return action
    spelled = rnd.choice(spellings(state, action))
    if spelled.capture:
        cards = list(spelled.capture)
        rnd.shuffle(cards)
        return Action(spelled.seat, spelled.card, capture=tuple(cards))
    return spelled


def action_to_proto(action: Action) -> pb.Action:
    """Return the message of an engine action, written the way the action is."""
    message = pb.Action(seat=action.seat, card=code(action.card))
    if action.plan_id is not None:
        message.plan_id = action.plan_id
    elif action.capture is not None:
        message.capture.SetInParent()  # an empty set is still a set: "take nothing"
        message.capture.cards.extend(code(c) for c in action.capture)
    elif action.trail:
        message.trail = True
    return message


@dataclass(frozen=True)
class Played:
    """A match played to its end: every state (first included), events per step, actions."""

    states: tuple[State, ...]
    events: tuple[tuple[Event, ...], ...]
    actions: tuple[Action, ...]


def play_match(
    seed: bytes,
    rnd: random.Random,
    *,
    labels: tuple[str, str] = ("", ""),
    prefer_trail: bool = False,
    any_spelling: bool = True,
    max_plays: int = 5000,
) -> Played:
    """Play a whole match from `seed` with `random_action`, written in any of its spellings."""
    state, first = new_match(seed, labels)
    states = [state]
    events = [first]
    actions: list[Action] = []
    while state.status is Status.IN_PROGRESS:
        assert len(actions) < max_plays, "the match does not end"
        action = random_action(state, rnd, prefer_trail=prefer_trail, any_spelling=any_spelling)
        state, produced = apply(state, action)
        states.append(state)
        events.append(produced)
        actions.append(action)
    return Played(tuple(states), tuple(events), tuple(actions))
