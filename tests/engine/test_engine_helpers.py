"""The test helpers themselves: built states are consistent, the brute force parses strictly."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

import engine.match
from engine import Action, Reason, State, check_state, codes, new_match, parse_card
from testkit import brute
from testkit.states import (
    assert_unchanged,
    build,
    kept,
    last_play,
    refusal,
    rest,
    scene,
    seed_for_dealer,
)


@pytest.mark.parametrize("dealer", [0, 1])
@pytest.mark.parametrize("hand_number", [1, 2, 7])
def test_built_states_pass_check_state(dealer: int, hand_number: int) -> None:
    """Builder states at several points of a hand are accepted, with the derived turn and seq."""
    first = build(
        (["2C", "3C", "4C", "5C"], ["2D", "3D", "4D", "5D"]),
        ["6C", "6D", "8H", "9S"],
        dealer=dealer,
        hand_number=hand_number,
    )
    check_state(first)
    assert first.to_move == 1 - dealer
    assert first.seq == 48 * (hand_number - 1)
    assert len(first.deck) == 40
    hands: list[list[str]] = [["2C", "3C"], ["2D", "3D"]]
    hands[dealer].append("4D")
    mid = build(
        (hands[0], hands[1]),
        ["9H"],
        ([], ["AC", "AD"]),
        deck=brute.ALL_CODES[-16:],
        rest_to=1,
        dealer=dealer,
        hand_number=hand_number,
    )
    assert mid.to_move == dealer
    assert len(mid.deck) == 16
    assert mid.seq == 48 * (hand_number - 1) + (40 - 16) + (8 - 5)
    check_state(mid)


def test_scene_and_last_play_states_pass_check_state() -> None:
    """The shortcuts build consistent states too."""
    for seat in (0, 1):
        state = scene(["5C", "KD"], ["5H"], seat=seat)
        check_state(state)
        assert state.to_move == seat
    ending = last_play((brute.ALL_CODES[:26], brute.ALL_CODES[26:]), played="2C", floor_card="AC")
    check_state(ending)
    assert ending.plays_in_hand == 47


def test_builder_refuses_impossible_layouts() -> None:
    """Hand sizes that cannot occur or a deck that is not whole rounds are refused."""
    with pytest.raises(ValueError):
        build((["2C"], ["2D", "3D", "4D"]), ["KH"], rest_to=0)
    with pytest.raises(ValueError):
        build((["2C"], ["2D"]), ["KH"], deck=["AC"], rest_to=0)


def test_seed_for_dealer_and_rest() -> None:
    """The seed helper gives the asked dealer; rest lists unused cards in canonical order."""
    for dealer in (0, 1):
        assert new_match(seed_for_dealer(dealer))[0].dealer == dealer
    assert rest(brute.ALL_CODES[1:]) == ["AC"]
    assert codes(range(52)) == brute.ALL_CODES


@pytest.mark.parametrize("text", ["1C", "AX", "", "10", "J", "ac"])
def test_brute_force_parses_card_codes_strictly(text: str) -> None:
    """The brute force has its own parser; it refuses what is not a card."""
    with pytest.raises(ValueError):
        brute.index_of(text)


def test_brute_force_refuses_repeated_cards() -> None:
    """A floor with a card twice, or the played card on the floor, is not a position."""
    with pytest.raises(ValueError):
        brute.plans("5C", ["2D", "2D"])
    with pytest.raises(ValueError):
        brute.plans("5C", ["5C"])


# Changes a refused apply might make to the state it was given. A State is frozen and holds
# only tuples, so rebinding a field behind the frozen guard is the change Python allows.
MUTATIONS: dict[str, Callable[[State], Any]] = {
    "a floor card dropped": lambda s: ("floor", s.floor[:-1]),
    "the hands swapped": lambda s: ("hands", (s.hands[1], s.hands[0])),
    "seq advanced": lambda s: ("seq", s.seq + 1),
    "a Basra added": lambda s: ("basras", (s.basras[0] + 1, s.basras[1])),
}


@pytest.mark.parametrize("mutation", sorted(MUTATIONS))
def test_refusal_notices_a_state_changed_by_a_refused_apply(
    mutation: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The 'a refusal changes nothing' check can fail: an apply that changes the state it
    was given and then refuses is caught, whatever field it touched."""
    state = scene(["5C", "KD"], ["5H", "QS"], seat=1)
    wrong_seat = Action(0, parse_card("5C"))
    assert refusal(state, wrong_seat).reason is Reason.NOT_YOUR_TURN  # unchanged: passes

    def check_and_mutate(checked: State) -> None:
        check_state(checked)
        name, value = MUTATIONS[mutation](checked)
        object.__setattr__(checked, name, value)

    monkeypatch.setattr(engine.match, "check_state", check_and_mutate)
    with pytest.raises(AssertionError, match="the state changed"):
        refusal(state, wrong_seat)


def test_kept_state_is_a_value_apart_from_the_state() -> None:
    """What `kept` holds survives any change to the state and compares equal only to the
    value the state had."""
    state = new_match(b"kept")[0]
    before = kept(state)
    assert_unchanged(state, before)
    object.__setattr__(state, "floor", ())
    with pytest.raises(AssertionError, match="the state changed"):
        assert_unchanged(state, before)
