"""legal_actions: every legal action of the seat to move, flat, in a fixed order."""

from __future__ import annotations

import random

import pytest

from engine import (
    MAX_PLANS,
    Action,
    Captured,
    RuleError,
    State,
    Status,
    apply,
    code,
    codes,
    legal_actions,
    parse_card,
)
from engine.facts import DECK_SIZE
from testkit import brute
from testkit.actions import play_match, spellings
from testkit.states import scene


def _states(count: int) -> list[State]:
    """In-progress states of a few whole random matches, every point of a hand included."""
    states: list[State] = []
    for n in range(count):
        played = play_match(f"legal-actions-{n}".encode(), random.Random(n))
        states.extend(s for s in played.states if s.status is Status.IN_PROGRESS)
    return states


STATES = _states(3)


def _accepted(state: State, action: Action) -> bool:
    try:
        apply(state, action)
    except RuleError:
        return False
    return True


def _every_card_with_every_choice(state: State) -> list[Action]:
    """Each card of the deck, played by the seat to move with each plan id and as a trail."""
    assert state.to_move is not None
    seat = state.to_move
    return [
        action
        for card in range(DECK_SIZE)
        for action in (
            Action(seat, card, trail=True),
            *(Action(seat, card, plan_id=p) for p in range(MAX_PLANS + 2)),
        )
    ]


def test_every_listed_action_is_accepted_by_apply() -> None:
    for state in STATES:
        for action in legal_actions(state):
            assert _accepted(state, action), action


def test_every_accepted_plan_or_trail_of_any_card_is_listed() -> None:
    """Trying all 52 cards with every plan id and as a trail finds exactly the listed actions."""
    for state in STATES[::7]:
        accepted = {a for a in _every_card_with_every_choice(state) if _accepted(state, a)}
        listed = list(legal_actions(state))
        assert len(listed) == len(set(listed)), "an action is listed twice"
        assert set(listed) == accepted


def test_the_captures_listed_are_those_the_brute_force_finds() -> None:
    """Per card of the hand: its captured sets, or one trail when it has none (docs/rules.md 3)."""
    for state in STATES[::3]:
        assert state.to_move is not None
        floor = codes(state.floor)
        want: list[tuple[str, frozenset[str] | None]] = []
        for card in state.hands[state.to_move]:
            offered = brute.plans(code(card), floor)
            want += [(code(card), frozenset(p.cards)) for p in offered] or [(code(card), None)]
        got: list[tuple[str, frozenset[str] | None]] = []
        for action in legal_actions(state):
            _, events = apply(state, action)
            taken = [frozenset(codes(e.cards)) for e in events if isinstance(e, Captured)]
            got.append((code(action.card), taken[0] if taken else None))
        assert got == want


def test_a_card_with_several_plans_gives_one_action_per_plan_in_plan_order() -> None:
    state = scene(["5C"], ["AC", "4D", "4H"])
    actions = list(legal_actions(state))
    assert [a.plan_id for a in actions] == [1, 2]
    assert all(a.card == parse_card("5C") and not a.trail and a.capture is None for a in actions)


def test_a_card_that_trails_gives_one_trail_action() -> None:
    state = scene(["KC", "2D"], ["QH", "9S"])
    assert {code(c) for c in state.hands[1]} == {"KC", "2D"}
    assert list(legal_actions(state)) == [Action(1, card, trail=True) for card in state.hands[1]]


def test_actions_follow_the_hand_order_and_repeat_exactly() -> None:
    for state in STATES[::11]:
        first = list(legal_actions(state))
        assert first == list(legal_actions(state))
        assert len(first) == len(set(first))
        assert state.to_move is not None
        hand = state.hands[state.to_move]
        assert [hand.index(a.card) for a in first] == sorted(hand.index(a.card) for a in first)
        assert {a.card for a in first} == set(hand)


def test_there_are_no_actions_once_the_match_is_over() -> None:
    over = play_match(b"legal-actions-over", random.Random(0)).states[-1]
    assert over.status is Status.OVER
    assert list(legal_actions(over)) == []


@pytest.mark.parametrize("seat", [0, 1])
def test_the_actions_belong_to_the_seat_to_move(seat: int) -> None:
    state = scene(["2C", "3C"], ["9H"], seat=seat)
    assert state.to_move == seat
    assert {a.seat for a in legal_actions(state)} == {seat}


def test_every_spelling_of_a_listed_action_plays_the_same() -> None:
    """The test helpers' other ways to write an action (testkit.actions) mean the same play."""
    for state in STATES[::5]:
        for action in legal_actions(state):
            ways = spellings(state, action)
            assert ways[0] == action and len(set(ways)) == len(ways)
            for way in ways:
                assert apply(state, way) == apply(state, action), way
