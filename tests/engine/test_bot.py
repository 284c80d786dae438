"""The bot's answers: always legal, deterministic, within budget, and sensible where obvious."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine import (
    Action,
    HandScored,
    MatchOver,
    RuleError,
    State,
    Status,
    apply,
    codes,
    legal_actions,
    parse_card,
    plans_for,
)
from engine.bot import DEFAULT_BUDGET, Budget, Level, Suggestion, Why, suggest
from engine.plans import plans_unmemoised
from engine.plans import rule as plans_module
from engine.view import information_set
from testkit.actions import play_match
from testkit.states import scene

REPO = Path(__file__).resolve().parents[2]
LEVELS = tuple(Level)


def _suggest(state: State, level: Level, budget: Budget = DEFAULT_BUDGET) -> Suggestion:
    seat = state.to_move
    assert seat is not None
    return suggest(information_set(state, seat), level, b"", budget)


def _accepted(state: State, card: int, plan_id: int | None) -> None:
    """Apply takes the action as suggested (seat, card, plan id when the card needs one)."""
    seat = state.to_move
    assert seat is not None
    apply(state, Action(seat, card, plan_id))


def _states(count: int, prefer_trail: bool) -> list[State]:
    states: list[State] = []
    for n in range(count):
        played = play_match(f"bot-{n}".encode(), random.Random(n), prefer_trail=prefer_trail)
        states.extend(s for s in played.states if s.status is Status.IN_PROGRESS)
    return states


# Whole random matches, one of them trailing whenever it can (big floors, many plans).
STATES = _states(2, prefer_trail=False) + _states(1, prefer_trail=True)


@pytest.mark.parametrize("level", LEVELS)
def test_every_suggested_action_and_candidate_is_accepted_by_apply(level: Level) -> None:
    """Over every point of three whole matches: last rounds, sweeps and several plans too."""
    rnd = random.Random(level.value)
    sampled = rnd.sample(STATES, 150) if level is Level.STRONG else STATES
    seen_plans = seen_last_round = 0
    for state in sampled:
        answer = _suggest(state, level, Budget(6, 600))
        _accepted(state, answer.card, answer.plan_id)
        assert (answer.card, answer.plan_id) == (
            answer.candidates[0].card,
            answer.candidates[0].plan_id,
        )
        for candidate in answer.candidates:
            _accepted(state, candidate.card, candidate.plan_id)
        seen_plans += any(c.plan_id is not None for c in answer.candidates)
        seen_last_round += not state.deck
    assert seen_plans and seen_last_round


@pytest.mark.parametrize("level", LEVELS)
def test_the_candidates_are_every_legal_action_once(level: Level) -> None:
    state = scene(["6H", "JS", "7D", "QC"], ["AC", "5C", "2C", "4C", "3C", "3D"])
    answer = _suggest(state, level)
    listed = [(c.card, c.plan_id) for c in answer.candidates]
    six = parse_card("6H")
    assert len(plans_for(six, state.floor_mask)) == 3
    others = [(parse_card(c), None) for c in ("JS", "7D", "QC")]
    assert sorted(listed, key=str) == sorted([(six, 1), (six, 2), (six, 3), *others], key=str)


@pytest.mark.parametrize("level", LEVELS)
def test_a_single_legal_action_is_the_only_move(level: Level) -> None:
    state = scene(["5H"], ["KD", "QC"])
    answer = _suggest(state, level)
    assert answer.reason is Why.ONLY_MOVE
    assert answer.card == parse_card("5H")
    assert (answer.deals, answer.nodes) == (0, 0)


@pytest.mark.parametrize("level", [Level.GREEDY, Level.STRONG])
def test_an_open_basra_is_taken(level: Level) -> None:
    """A 9 clears the floor 4+5; nothing else takes a card."""
    state = scene(["9H", "KD", "QS"], ["4C", "5D"])
    answer = _suggest(state, level)
    assert (answer.card, answer.reason) == (parse_card("9H"), Why.BASRA)


def test_greedy_passes_over_a_take_that_leaves_a_likely_basra() -> None:
    """Taking the 4 leaves a lone K for the opponent's king (the last round: its two cards
    are the only unseen ones); trailing the 8 leaves a floor nothing can clear."""
    state = scene(["4H", "8S"], ["KD", "4C"], other_hand=["KS", "2C"])
    answer = _suggest(state, Level.GREEDY)
    assert (answer.card, answer.reason) == (parse_card("8S"), Why.DENY_BASRA)
    took = next(c for c in answer.candidates if c.card == parse_card("4H"))
    assert took.value < answer.candidates[0].value


def test_the_last_round_is_solved_exactly() -> None:
    """Deck empty: the unseen cards are the opponent's hand, one exact deal."""
    state = scene(["5H", "KD"], ["2S", "9C"], other_hand=["7C", "QH"])
    answer = _suggest(state, Level.STRONG)
    assert answer.reason in (Why.ENDGAME_SOLVED, Why.BASRA, Why.SWEEP)
    assert answer.deals == 1
    assert all(c.deals == 1 for c in answer.candidates)


def _exact(state: State, seat: int) -> int:
    """Minimax over every legal play to the end of the hand, with Apply alone: the seat's
    points of the hand minus the opponent's, 1000 more (less) when it wins (loses) the match."""
    actions = list(legal_actions(state))
    values = []
    for action in actions:
        after, events = apply(state, action)
        scored = [e for e in events if isinstance(e, HandScored)]
        if scored:
            mine, theirs = scored[0].seats[seat], scored[0].seats[1 - seat]
            value = mine.hand_total - theirs.hand_total
            for event in events:
                if isinstance(event, MatchOver):
                    value += 1000 if event.winner == seat else -1000
            values.append(value)
        else:
            values.append(_exact(after, seat))
    return max(values) if state.to_move == seat else min(values)


LAST_ROUNDS = [s for s in STATES if not s.deck and len(s.hands[0]) + len(s.hands[1]) <= 6]


@pytest.mark.parametrize("state", LAST_ROUNDS[::3], ids=lambda s: f"seq{s.seq}")
def test_the_last_round_values_are_the_exact_hand_margins(state: State) -> None:
    """With the deck empty, every candidate's value is the exact minimax margin of the hand,
    found independently by playing out every line with Apply."""
    seat = state.to_move
    assert seat is not None
    answer = _suggest(state, Level.STRONG)
    for candidate in answer.candidates:
        after, events = apply(state, Action(seat, candidate.card, candidate.plan_id))
        scored = [e for e in events if isinstance(e, HandScored)]
        if scored:
            continue  # the hand's very last play: nothing left to search
        assert candidate.value == _exact(after, seat), codes([candidate.card])


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    index=st.integers(min_value=0, max_value=len(STATES) - 1),
    deals=st.integers(min_value=1, max_value=24),
    nodes=st.integers(min_value=1, max_value=4000),
)
def test_strong_stays_within_its_budget(index: int, deals: int, nodes: int) -> None:
    """Deals sampled never exceed the budget; nodes never exceed it by more than the one
    shallowest deal that values the moves when nothing fits (it is cut short too)."""
    answer = _suggest(STATES[index], Level.STRONG, Budget(deals, nodes))
    assert answer.deals <= max(deals, 1)
    assert answer.nodes <= nodes + 1
    assert all(c.deals <= answer.deals for c in answer.candidates)


def test_the_same_position_and_seed_give_the_same_answer() -> None:
    for state in STATES[::40]:
        for level in LEVELS:
            assert _suggest(state, level) == _suggest(state, level)


def test_the_bot_seed_changes_only_the_draws() -> None:
    """RANDOM draws from the bot seed: different seeds pick different actions somewhere."""
    state = STATES[0]
    seat = state.to_move
    assert seat is not None
    info = information_set(state, seat)
    picks = {suggest(info, Level.RANDOM, bytes([b])).card for b in range(32)}
    assert len(picks) > 1


_DIGEST = """
import json, random, sys
from engine import Status
from engine.bot import Level, suggest
from engine.view import information_set
from testkit.actions import play_match
out = []
played = play_match(b"bot-processes", random.Random(7))
for state in played.states[:60]:
    if state.status is Status.IN_PROGRESS:
        for level in Level:
            answer = suggest(information_set(state, state.to_move), level)
            out.append([answer.card, answer.plan_id, answer.reason.value,
                        [[c.card, c.plan_id, c.value, c.deals] for c in answer.candidates]])
print(json.dumps(out))
"""


def test_answers_are_the_same_in_another_process() -> None:
    """A fresh interpreter (another hash seed, cold memos) gives the same answers."""
    runs = [
        subprocess.run(
            [sys.executable, "-c", _DIGEST],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=REPO,
            check=True,
            env={"PYTHONHASHSEED": str(seed), "PATH": ""},
        ).stdout
        for seed in (1, 2)
    ]
    assert runs[0] == runs[1]
    assert json.loads(runs[0])


def test_a_finished_match_is_refused() -> None:
    played = play_match(b"bot-over", random.Random(3))
    final = played.states[-1]
    with pytest.raises(RuleError) as refused:
        suggest(information_set(final, 0))
    assert refused.value.reason == "MATCH_OVER"


def test_a_seat_that_is_not_to_move_is_refused() -> None:
    state = STATES[0]
    assert state.to_move is not None
    with pytest.raises(RuleError) as refused:
        suggest(information_set(state, 1 - state.to_move))
    assert refused.value.reason == "NOT_YOUR_TURN"


@pytest.mark.parametrize("budget", [Budget(0, 100), Budget(4, 0)])
def test_an_empty_budget_is_refused(budget: Budget) -> None:
    state = STATES[0]
    with pytest.raises(RuleError) as refused:
        _suggest(state, Level.STRONG, budget)
    assert refused.value.reason == "INVALID_ACTION"


def test_the_search_keeps_the_floors_it_visits_out_of_the_plans_memos() -> None:
    """The floors of sampled deals stay in the bot's own memo: plans_for's memo, which
    every call of a worker shares, looks up only the real floor
    for the seat's cards (their nested values would reach the collector's oldest generation
    still tracked, for a full collection to walk)."""
    state = next(s for s in STATES if len(s.floor) >= 4 and s.deck and len(s.hands[0]) == 4)
    seat = state.to_move
    assert seat is not None
    info = information_set(state, seat)
    memos = (plans_module._plans_cached,)
    before = [memo.cache_info() for memo in memos]
    answer = suggest(
        info, Level.STRONG, b"a seed of its own: floors not met before", Budget(16, 4000)
    )
    after = [memo.cache_info() for memo in memos]
    assert answer.nodes > 100  # a real search ran
    for old, new in zip(before, after, strict=True):
        assert new.misses - old.misses <= len(info.hand)


@settings(max_examples=300, deadline=None)
@given(
    card=st.integers(min_value=0, max_value=51),
    floor=st.lists(st.integers(min_value=0, max_value=51), max_size=12, unique=True),
)
def test_unmemoised_plans_are_the_plans(card: int, floor: list[int]) -> None:
    """plans_unmemoised gives what plans_for gives, on any floor without the played card."""
    mask = sum(1 << c for c in floor if c != card)
    assert plans_unmemoised(card, mask) == plans_for(card, mask)
