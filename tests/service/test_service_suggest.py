"""SuggestMove through grpc_testing and a real server: answers, refusals."""

from __future__ import annotations

import random

import grpc
import pytest
from basra.v1 import rules_pb2 as pb
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import engine
from engine import Status
from engine.bot import DEFAULT_BUDGET, Budget, Level, suggest
from engine.view import information_set
from service.config import Config
from service.handlers import Handlers
from service.outcomes import Facts
from testkit import messages
from testkit.actions import play_match
from testkit.calls import (
    Caller,
    MakeCaller,
    find_state,
    finished_match,
    has_multi_plan_card,
    proto,
)
from testkit.hidden import redistribute_hidden

ENGINE_LEVEL = {
    pb.BOT_LEVEL_RANDOM: Level.RANDOM,
    pb.BOT_LEVEL_GREEDY: Level.GREEDY,
    pb.BOT_LEVEL_STRONG: Level.STRONG,
}


def _request(state: engine.State, **fields: object) -> pb.SuggestMoveRequest:
    return pb.SuggestMoveRequest(state=proto(state), seat=state.to_move, **fields)  # type: ignore[arg-type]


def _answer(call: Caller, request: pb.SuggestMoveRequest) -> pb.SuggestMoveResponse:
    outcome = call("SuggestMove", request)
    assert outcome.code is grpc.StatusCode.OK, outcome
    answer: pb.SuggestMoveResponse = outcome.response
    return answer


@pytest.mark.parametrize("level", list(ENGINE_LEVEL))
def test_the_suggested_action_is_accepted_by_apply(call: Caller, level: pb.BotLevel) -> None:
    """For a card with several plans too: the action goes to Apply unchanged."""
    state = find_state(has_multi_plan_card)
    answer = _answer(call, _request(state, level=level))
    assert answer.level == level
    assert answer.candidates[0].action == answer.action
    applied = call("Apply", pb.ApplyRequest(state=proto(state), action=answer.action))
    assert applied.code is grpc.StatusCode.OK, applied
    for candidate in answer.candidates:
        tried = call("Apply", pb.ApplyRequest(state=proto(state), action=candidate.action))
        assert tried.code is grpc.StatusCode.OK, (candidate, tried)


def test_the_answer_is_the_engines_suggestion(call: Caller) -> None:
    """Same action, candidates, reason, level and work as the engine's bot on the seat's
    information set, with the default level (STRONG) and budget."""
    state = find_state(has_multi_plan_card)
    answer = _answer(call, _request(state))
    seat = state.to_move
    assert seat is not None
    expected = suggest(information_set(state, seat), Level.STRONG, b"", DEFAULT_BUDGET)
    assert answer == messages.suggestion_to_proto(expected)
    assert answer.level == pb.BOT_LEVEL_STRONG
    assert 1 <= answer.work.deals <= DEFAULT_BUDGET.deals
    assert 0 < answer.work.nodes <= DEFAULT_BUDGET.nodes
    assert all(0 < c.deals <= answer.work.deals for c in answer.candidates)


def test_a_budget_and_a_bot_seed_are_used(call: Caller) -> None:
    state = find_state(has_multi_plan_card)
    small = _answer(call, _request(state, budget=pb.BotWork(deals=2, nodes=300), bot_seed=b"x"))
    seat = state.to_move
    assert seat is not None
    expected = suggest(information_set(state, seat), Level.STRONG, b"x", Budget(2, 300))
    assert small == messages.suggestion_to_proto(expected)
    assert small.work.deals <= 2 and small.work.nodes <= 300
    # A field left 0 takes the default: deals from the request, nodes by default.
    half = _answer(call, _request(state, budget=pb.BotWork(deals=3), bot_seed=b"x"))
    assert half.work.deals <= 3
    expected = suggest(
        information_set(state, seat), Level.STRONG, b"x", Budget(3, DEFAULT_BUDGET.nodes)
    )
    assert half == messages.suggestion_to_proto(expected)


def test_the_configured_default_level_plays_an_unspecified_level(call_with: MakeCaller) -> None:
    call = call_with(Config(bot_level="greedy"))
    state = find_state(has_multi_plan_card)
    assert _answer(call, _request(state)).level == pb.BOT_LEVEL_GREEDY
    assert _answer(call, _request(state, level=pb.BOT_LEVEL_RANDOM)).level == pb.BOT_LEVEL_RANDOM


def _refused(call: Caller, request: pb.SuggestMoveRequest, code: grpc.StatusCode) -> str:
    outcome = call("SuggestMove", request)
    assert outcome.code is code, outcome
    return str(outcome.info.reason)


def test_refusals(call: Caller) -> None:
    """Like the other RPCs: a bad state, a missing, unknown or wrong seat, a finished match,
    an unknown level, a bot seed over 64 bytes."""
    state = find_state(has_multi_plan_card)
    assert state.to_move is not None
    invalid, failed = grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.FAILED_PRECONDITION
    corrupt = proto(state)
    corrupt.deck.pop()
    assert _refused(call, pb.SuggestMoveRequest(state=corrupt, seat=0), invalid) == (
        "INVALID_STATE"
    )
    assert _refused(call, pb.SuggestMoveRequest(seat=0), invalid) == "INVALID_STATE"
    no_seat = pb.SuggestMoveRequest(state=proto(state))
    assert _refused(call, no_seat, invalid) == "INVALID_SEAT"
    unknown = pb.SuggestMoveRequest(state=proto(state), seat=2)
    assert _refused(call, unknown, invalid) == "INVALID_SEAT"
    other = pb.SuggestMoveRequest(state=proto(state), seat=1 - state.to_move)
    assert _refused(call, other, failed) == "NOT_YOUR_TURN"
    final, _ = finished_match(b"suggest-over")
    over = pb.SuggestMoveRequest(state=proto(final), seat=0)
    assert _refused(call, over, failed) == "MATCH_OVER"
    level = _request(state)
    level.level = 7  # type: ignore[assignment]  # not a BotLevel: what an older client may send
    assert _refused(call, level, invalid) == "INVALID_LEVEL"
    long_seed = _request(state, bot_seed=bytes(65))
    assert _refused(call, long_seed, invalid) == "INVALID_SEED"


def test_a_budget_above_the_cap_is_resource_exhausted(call_with: MakeCaller) -> None:
    """Past BASRA_BOT_MAX_DEALS or BASRA_BOT_MAX_NODES: refused, the cap named; at the cap,
    answered; a default budget above the cap is capped, not refused."""
    call = call_with(Config(bot_max_deals=8, bot_max_nodes=1000))
    state = find_state(has_multi_plan_card)
    exhausted = grpc.StatusCode.RESOURCE_EXHAUSTED
    for asked in (pb.BotWork(deals=9), pb.BotWork(nodes=1001), pb.BotWork(deals=9, nodes=9)):
        outcome = call("SuggestMove", _request(state, budget=asked))
        assert outcome.code is exhausted, outcome
        assert outcome.info.reason == "BUDGET_TOO_LARGE"
        assert outcome.info.metadata["maxDeals"] == "8"
        assert outcome.info.metadata["maxNodes"] == "1000"
    at_cap = _answer(call, _request(state, budget=pb.BotWork(deals=8, nodes=1000)))
    assert at_cap.work.nodes <= 1000
    by_default = _answer(call, _request(state))
    assert by_default.work.deals <= 8 and by_default.work.nodes <= 1000


def test_signed_states_are_read_like_the_other_rpcs(call_with: MakeCaller) -> None:
    """With signing keys, the signed state is taken and a plain one refused."""
    call = call_with(Config(signing_keys="k1:" + "QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo0NTY3ODk="))
    started = call("NewMatch", pb.NewMatchRequest(seed=b"signed-suggest"))
    assert started.code is grpc.StatusCode.OK
    sealed = started.response.signed_state
    seat = started.response.state.to_move
    ok = call("SuggestMove", pb.SuggestMoveRequest(signed_state=sealed, seat=seat))
    assert ok.code is grpc.StatusCode.OK, ok
    plain = call("SuggestMove", pb.SuggestMoveRequest(state=started.response.state, seat=seat))
    assert plain.code is grpc.StatusCode.UNAUTHENTICATED
    assert plain.info.reason == "BAD_SIGNATURE"


def _states(count: int) -> list[engine.State]:
    states: list[engine.State] = []
    for n in range(count):
        played = play_match(f"suggest-{n}".encode(), random.Random(n))
        states.extend(s for s in played.states if s.status is Status.IN_PROGRESS)
    return states


STATES = _states(2)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    index=st.integers(min_value=0, max_value=len(STATES) - 1),
    level=st.sampled_from(list(ENGINE_LEVEL)),
    bot_seed=st.binary(max_size=8),
    redeal=st.integers(min_value=0, max_value=2**32),
)
def test_redealt_unseen_cards_give_byte_identical_responses(
    index: int, level: pb.BotLevel, bot_seed: bytes, redeal: int
) -> None:
    """The handlers' bytes do not change when the opponent's hand, the deck and the seed are
    drawn again (the engine-level property, here through the service's translation)."""
    handlers = Handlers()
    state = STATES[index]
    seat = state.to_move
    assert seat is not None
    other = redistribute_hidden(state, seat, random.Random(redeal))
    budget = pb.BotWork(deals=6, nodes=900)

    def asked(s: engine.State) -> bytes:
        request = pb.SuggestMoveRequest(
            state=proto(s), seat=seat, level=level, bot_seed=bot_seed, budget=budget
        )
        return handlers.suggest_move(request, Facts())

    assert asked(other) == asked(state)
