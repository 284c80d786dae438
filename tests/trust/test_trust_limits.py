"""Configurable limits, each at and just past its value: plan work, Replay actions, request size."""

from __future__ import annotations

import random

import grpc
import pytest
from basra.v1 import rules_pb2 as pb

import engine
from engine import Action, State, Status
from engine.plans import plan_work
from service.config import Config
from testkit import messages
from testkit.actions import action_to_proto, play_match
from testkit.loopback import TIMEOUT, refusal, serving


def _match(seed: bytes) -> tuple[list[State], list[Action]]:
    played = play_match(seed, random.Random(seed), any_spelling=False)
    return list(played.states), list(played.actions)


def _hand_work(state: State) -> int:
    """The plan-search work of the costliest card in the hand to move."""
    assert state.to_move is not None
    return max(plan_work(c, state.floor_mask, 10**9) for c in state.hands[state.to_move])


@pytest.fixture(scope="module")
def demanding() -> tuple[State, int]:
    """The state of a few random matches whose hand needs the most plan-search work."""
    best: tuple[int, State] | None = None
    for n in range(3):
        for state in _match(f"work-{n}".encode())[0]:
            if state.status is Status.IN_PROGRESS:
                work = _hand_work(state)
                if best is None or work > best[0]:
                    best = (work, state)
    assert best is not None and best[0] >= 2
    return best[1], best[0]


def test_plan_work_at_the_limit_is_served_and_one_step_less_is_refused(
    demanding: tuple[State, int],
) -> None:
    state, work = demanding
    request = pb.LegalMovesRequest(state=messages.state_to_proto(state))
    with serving(Config(plan_work_limit=work)) as stub:
        moves = stub.LegalMoves(request, timeout=TIMEOUT).legal_moves
        assert moves == messages.moves_to_proto(state.to_move, engine.legal_moves(state))
    with serving(Config(plan_work_limit=work - 1)) as stub:
        with pytest.raises(grpc.RpcError) as refused:
            stub.LegalMoves(request, timeout=TIMEOUT)
        code, reason, metadata = refusal(refused.value)
        assert (code, reason) == (grpc.StatusCode.RESOURCE_EXHAUSTED, "STATE_TOO_COMPLEX")
        assert metadata["workLimit"] == str(work - 1)
        view = pb.PlayerViewRequest(state=request.state, seat=state.to_move)
        with pytest.raises(grpc.RpcError) as refused_view:
            stub.PlayerView(view, timeout=TIMEOUT)
        assert refusal(refused_view.value)[1] == "STATE_TOO_COMPLEX"


@pytest.fixture(scope="module")
def whole_match() -> tuple[bytes, list[Action]]:
    """A whole match's seed and actions."""
    seed = b"replay-limit"
    return seed, _match(seed)[1]


def test_replay_of_exactly_the_most_actions_is_served_and_one_more_refused(
    whole_match: tuple[bytes, list[Action]],
) -> None:
    seed, actions = whole_match
    limit = len(actions)
    with serving(Config(max_replay_actions=limit)) as stub:
        done = stub.Replay(
            pb.ReplayRequest(seed=seed, actions=[action_to_proto(a) for a in actions]),
            timeout=TIMEOUT,
        )
        assert not done.HasField("refused_index")
        assert done.state.status == pb.STATUS_OVER
        extra = [action_to_proto(a) for a in actions] + [action_to_proto(actions[0])]
        with pytest.raises(grpc.RpcError) as refused:
            stub.Replay(pb.ReplayRequest(seed=seed, actions=extra), timeout=TIMEOUT)
        code, reason, metadata = refusal(refused.value)
        assert (code, reason) == (grpc.StatusCode.RESOURCE_EXHAUSTED, "TOO_MANY_ACTIONS")
        assert metadata == {"actions": str(limit + 1), "maxActions": str(limit)}


def test_a_replay_limit_of_zero_allows_only_the_deal(
    whole_match: tuple[bytes, list[Action]],
) -> None:
    seed, actions = whole_match
    with serving(Config(max_replay_actions=0)) as stub:
        assert stub.Replay(pb.ReplayRequest(seed=seed), timeout=TIMEOUT).state.seq == 0
        with pytest.raises(grpc.RpcError) as refused:
            stub.Replay(
                pb.ReplayRequest(seed=seed, actions=[action_to_proto(actions[0])]), timeout=TIMEOUT
            )
        assert refusal(refused.value)[1] == "TOO_MANY_ACTIONS"


def _sized(size: int) -> pb.ReplayRequest:
    """A Replay request of exactly `size` bytes (its first action is refused, so it is cheap)."""
    for count in range(size // 8 + 1):
        for length in range(65):
            request = pb.ReplayRequest(
                seed=b"size", actions=[pb.Action(seat=0, card="AC")] * count, labels=["x" * length]
            )
            if request.ByteSize() == size:
                return request
    raise AssertionError(f"no request of {size} bytes")


def test_a_request_of_the_largest_size_is_served_and_one_byte_more_refused() -> None:
    limit = 2048
    with serving(Config(max_message_bytes=limit)) as stub:
        served = stub.Replay(_sized(limit), timeout=TIMEOUT)
        assert served.refused_index == 0
        with pytest.raises(grpc.RpcError) as refused:
            stub.Replay(_sized(limit + 1), timeout=TIMEOUT)
        code, reason, metadata = refusal(refused.value)
        assert (code, reason) == (grpc.StatusCode.RESOURCE_EXHAUSTED, "REQUEST_TOO_LARGE")
        assert metadata == {"size": str(limit + 1), "maxBytes": str(limit)}
        # Far past it, gRPC itself refuses before any code of the service runs.
        huge = pb.LegalMovesRequest(state=pb.State(seed=bytes(3 * limit + 70_000)))
        with pytest.raises(grpc.RpcError) as flooded:
            stub.LegalMoves(huge, timeout=TIMEOUT)
        assert flooded.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED


def test_the_size_limit_holds_for_every_method() -> None:
    limit = 1024
    big = "x" * limit
    requests = {
        "NewMatch": pb.NewMatchRequest(labels=[big]),
        "Apply": pb.ApplyRequest(action=pb.Action(card=big)),
        "LegalMoves": pb.LegalMovesRequest(state=pb.State(deck=[big])),
        "PlayerView": pb.PlayerViewRequest(state=pb.State(floor=[big])),
        "Replay": pb.ReplayRequest(labels=[big]),
    }
    with serving(Config(max_message_bytes=limit)) as stub:
        for method, request in requests.items():
            with pytest.raises(grpc.RpcError) as refused:
                getattr(stub, method)(request, timeout=TIMEOUT)
            assert refusal(refused.value)[:2] == (
                grpc.StatusCode.RESOURCE_EXHAUSTED,
                "REQUEST_TOO_LARGE",
            ), method


def test_a_response_past_the_size_limit_is_refused_with_its_reason(
    whole_match: tuple[bytes, list[Action]],
) -> None:
    """The limit bounds answers too: a long replay's answer cannot exceed it."""
    seed, actions = whole_match
    request = pb.ReplayRequest(seed=seed, actions=[action_to_proto(a) for a in actions[:60]])
    with serving(Config()) as stub:
        size = stub.Replay(request, timeout=TIMEOUT).ByteSize()
    assert request.ByteSize() < 1024 < size
    with serving(Config(max_message_bytes=size)) as stub:
        assert stub.Replay(request, timeout=TIMEOUT).ByteSize() == size
    with serving(Config(max_message_bytes=size - 1)) as stub:
        with pytest.raises(grpc.RpcError) as refused:
            stub.Replay(request, timeout=TIMEOUT)
        code, reason, metadata = refusal(refused.value)
        assert (code, reason) == (grpc.StatusCode.RESOURCE_EXHAUSTED, "RESPONSE_TOO_LARGE")
        assert metadata == {"size": str(size), "maxBytes": str(size - 1)}
