"""docs/rules.md section 2: seats, dealer, the deal, the floor fix, rounds and plays."""

from __future__ import annotations

import itertools
import random

import pytest

from engine import (
    Action,
    CardPlayed,
    CardsDealt,
    FloorFixed,
    HandScored,
    HandStarted,
    Reason,
    Status,
    legal_moves,
    new_match,
)
from engine.rng import deck_label, first_dealer, shuffled
from testkit.actions import play_match
from testkit.states import refusal

SEEDS = [bytes([i]) for i in range(64)]


def _is_j_or_7d(card: int) -> bool:
    return card >> 2 == 10 or card == 25


def test_two_players_no_pass() -> None:
    """Seats are 0 and 1 only, every turn is one card played, and the turn then passes."""
    played = play_match(b"two-players", random.Random(1))
    for state, action in zip(played.states[:-1], played.actions, strict=True):
        assert state.to_move in (0, 1)
        assert action.seat == state.to_move
        moves = legal_moves(state)
        # Every card in the hand is a move, and a move always plays that card.
        assert [m.card for m in moves] == list(state.hands[state.to_move])
    for step in played.events[1:]:
        assert sum(isinstance(e, CardPlayed) for e in step) == 1
    state = played.states[0]
    for seat in (2, -1):
        assert refusal(state, Action(seat, state.hands[0][0])).reason is Reason.INVALID_SEAT


def test_first_dealer_is_chosen_at_random_from_the_seed() -> None:
    """The first dealer follows the seed alone, and both seats deal first for some seeds."""
    dealers = []
    for seed in SEEDS:
        state, events = new_match(seed)
        assert state.dealer == first_dealer(seed)
        assert events[0] == HandStarted(1, state.dealer)
        assert new_match(seed)[0].dealer == state.dealer
        dealers.append(state.dealer)
    assert 20 < sum(dealers) < 44


@pytest.mark.parametrize("seed", [b"alt-1", b"alt-2", b"alt-3"])
def test_dealer_alternates_every_hand(seed: bytes) -> None:
    """Each new hand is dealt by the other seat."""
    played = play_match(seed, random.Random(seed))
    starts = [e for step in played.events for e in step if isinstance(e, HandStarted)]
    assert len(starts) >= 2
    assert [s.hand_number for s in starts] == list(range(1, len(starts) + 1))
    for before, after in itertools.pairwise(starts):
        assert after.dealer == 1 - before.dealer


@pytest.mark.parametrize("seed", [b"ns-1", b"ns-2"])
def test_non_dealer_starts_every_hand_and_every_round(seed: bytes) -> None:
    """After every deal (a new hand or a new round) the non-dealer is the one to move."""
    played = play_match(seed, random.Random(seed))
    for state, step in zip(played.states[1:], played.events[1:], strict=True):
        if any(isinstance(e, CardsDealt) for e in step) and state.status is Status.IN_PROGRESS:
            assert state.to_move == 1 - state.dealer
    assert played.states[0].to_move == 1 - played.states[0].dealer


def test_4_4_4_deal_from_the_top_non_dealer_first() -> None:
    """4 cards to the non-dealer, 4 to the dealer, 4 to the floor, from the top of the deck."""
    seen_plain = 0
    for seed in SEEDS:
        state, events = new_match(seed)
        deck = shuffled(seed, deck_label(1), range(52))
        non_dealer, dealer = 1 - state.dealer, state.dealer
        assert events[1] == CardsDealt(non_dealer, deck[0:4])
        assert events[2] == CardsDealt(dealer, deck[4:8])
        assert events[3] == CardsDealt(None, deck[8:12])
        assert len(state.hands[0]) == len(state.hands[1]) == 4
        assert len(state.floor) == 4
        assert len(state.deck) == 40
        if not any(isinstance(e, FloorFixed) for e in events):
            seen_plain += 1
            assert state.hands[non_dealer] == deck[0:4]
            assert state.hands[dealer] == deck[4:8]
            assert state.floor == deck[8:12]
            assert state.deck == deck[12:]
    assert seen_plain > 10


def test_floor_fix_returns_jacks_and_seven_of_diamonds_and_reshuffles() -> None:
    """J/7D on the dealt floor go back into the undealt deck, which is reshuffled, and are
    replaced from the top, until the floor has neither."""
    fixed_matches = 0
    repeated = 0
    not_at_bottom = 0
    for i in range(256):
        seed = bytes([i, 7])
        state, events = new_match(seed)
        fixes = [e for e in events if isinstance(e, FloorFixed)]
        assert not any(_is_j_or_7d(c) for c in state.floor)
        if not fixes:
            continue
        fixed_matches += 1
        repeated += len(fixes) > 1
        floor = list(events[3].cards)  # type: ignore[union-attr]
        deck = shuffled(seed, deck_label(1), range(52))
        undealt = list(deck[12:])
        for fix in fixes:
            assert fix.returned == tuple(c for c in floor if _is_j_or_7d(c))
            assert len(fix.replacements) == len(fix.returned)
            # Replacements come from the undealt deck with the returned cards shuffled in.
            pool = set(undealt) | set(fix.returned)
            assert set(fix.replacements) <= pool
            floor = [c for c in floor if c not in fix.returned] + list(fix.replacements)
            undealt = [c for c in undealt if c not in fix.replacements] + [
                c for c in fix.returned if c not in fix.replacements
            ]
        assert list(state.floor) == floor
        assert sorted(state.deck) == sorted(undealt)
        # Reshuffled, not put at the bottom: the returned cards are not simply the last ones.
        returned = {c for f in fixes for c in f.returned} - set(state.floor)
        if returned and set(state.deck[-len(returned) :]) != returned:
            not_at_bottom += 1
    assert fixed_matches > 40
    assert repeated > 0, "some seed must need a second fix"
    assert not_at_bottom > 0


def test_fresh_floor_never_holds_a_jack_or_the_seven_of_diamonds() -> None:
    """After every deal of a hand the floor is free of J and 7D."""
    for i in range(8):
        played = play_match(bytes([i, 9]), random.Random(i))
        for state, step in zip(played.states, played.events, strict=True):
            if any(isinstance(e, HandStarted) for e in step):
                assert not any(_is_j_or_7d(c) for c in state.floor)
                assert len(state.floor) == 4


def test_when_both_hands_are_empty_four_more_each_and_none_to_the_floor() -> None:
    """After the 8th play of a round: 4 to the non-dealer, then 4 to the dealer, floor untouched."""
    played = play_match(b"redeal", random.Random(5))
    for n in (8, 16, 24, 32, 40):
        before, after, step = played.states[n - 1], played.states[n], played.events[n]
        deals = [e for e in step if isinstance(e, CardsDealt)]
        assert [d.seat for d in deals] == [1 - before.dealer, before.dealer]
        assert deals[0].cards == before.deck[0:4]
        assert deals[1].cards == before.deck[4:8]
        assert after.deck == before.deck[8:]
        assert after.hands[1 - before.dealer] == before.deck[0:4]
        assert after.hands[before.dealer] == before.deck[4:8]
        assert after.to_move == 1 - before.dealer
        for state in played.states[n - 8 : n]:
            assert len(state.deck) == len(after.deck) + 8


def test_6_rounds_48_plays_per_hand() -> None:
    """Each hand is 6 deals of 4 cards each and 48 plays, then it is scored."""
    played = play_match(b"rounds", random.Random(2))
    plays = 0
    deals_per_seat = [0, 0]
    hands = 0
    for state, step in zip(played.states, played.events, strict=True):
        for e in step:
            if isinstance(e, CardPlayed):
                plays += 1
            if isinstance(e, CardsDealt) and e.seat is not None:
                deals_per_seat[e.seat] += 1
                assert len(e.cards) == 4
            if isinstance(e, HandScored):
                assert plays == 48
                assert deals_per_seat == [6, 6]
                plays, deals_per_seat = 0, [0, 0]
                hands += 1
        if state.status is Status.IN_PROGRESS:
            assert state.round_number == plays // 8 + 1
            assert state.plays_in_hand == plays
    assert hands == played.states[-1].hand_number


def test_players_alternate_single_plays() -> None:
    """Within a hand the seat to move changes after every play."""
    played = play_match(b"alternate", random.Random(3))
    checked = 0
    for n in range(1, len(played.actions)):
        new_hand = any(isinstance(e, HandStarted) for e in played.events[n])
        if not new_hand:
            # Within a hand (rounds included) the seats take turns.
            assert played.actions[n].seat == 1 - played.actions[n - 1].seat
            checked += 1
        else:
            # The last play of a hand is the dealer's; the new dealer is the other seat, so
            # the next hand's first player (the non-dealer) is that same seat again.
            assert played.actions[n].seat == played.actions[n - 1].seat
    assert checked >= 47
