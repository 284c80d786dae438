"""Every RPC, answered the same way through grpc_testing and a real server."""

from __future__ import annotations

import hashlib

import grpc
from basra.v1 import rules_pb2 as pb

import engine
from service.config import Config
from service.handlers import Handlers
from service.outcomes import Facts
from testkit import messages
from testkit.actions import action_to_proto
from testkit.calls import (
    Caller,
    MakeCaller,
    find_state,
    finished_match,
    first_choice,
    has_multi_plan_card,
    proto,
    states_of,
)

SEED = b"service-rpc-tests"


def _new(call: Caller, seed: bytes = SEED, labels: tuple[str, ...] = ()) -> pb.NewMatchResponse:
    outcome = call("NewMatch", pb.NewMatchRequest(seed=seed, labels=list(labels)))
    assert outcome.code is grpc.StatusCode.OK, outcome
    result: pb.NewMatchResponse = outcome.response
    return result


def _kinds(events: list[pb.Event]) -> list[str]:
    return [str(e.WhichOneof("kind")) for e in events]


def test_new_match_deals_the_first_hand_as_the_engine_does(call: Caller) -> None:
    """NewMatch returns the engine's first state and events, and the moves of the seat to move."""
    result = _new(call, labels=("Ann", "Bob"))
    state, events = engine.new_match(SEED, ("Ann", "Bob"))
    assert result.state == messages.state_to_proto(state)
    assert list(result.events) == messages.events_to_proto(events)
    assert result.state.seq == 0 and result.state.status == pb.STATUS_IN_PROGRESS
    assert [s.label for s in result.state.seats] == ["Ann", "Bob"]
    assert _kinds(list(result.events))[:4] == [
        "hand_started",
        "cards_dealt",
        "cards_dealt",
        "cards_dealt",
    ]
    assert result.legal_moves.seat == result.state.to_move
    hand = result.state.seats[result.state.to_move].hand
    assert [m.card for m in result.legal_moves.moves] == list(hand)
    assert result.seed_commitment == hashlib.sha256(SEED).digest()


def test_new_match_seat_events_hide_the_other_hand(call: Caller) -> None:
    """Each seat's events show its own dealt cards and only a count for the other seat."""
    result = _new(call)
    assert [se.seat for se in result.seat_events] == [0, 1]
    for seat_events in result.seat_events:
        seat = seat_events.seat
        other_hand = set(result.state.seats[1 - seat].hand)
        assert len(seat_events.events) == len(result.events)
        hidden = [e.hidden_deal for e in seat_events.events if e.HasField("hidden_deal")]
        assert [(h.seat, h.count) for h in hidden] == [(1 - seat, 4)]
        shown = {
            card
            for e in seat_events.events
            if e.HasField("cards_dealt")
            for card in e.cards_dealt.cards
        }
        assert shown.isdisjoint(other_hand)
        assert set(result.state.seats[seat].hand) <= shown


def test_new_match_is_deterministic_and_draws_a_seed_when_none_is_given(call: Caller) -> None:
    """The same seed gives the same match; an empty seed gets 32 fresh random bytes."""
    assert _new(call) == _new(call)
    drawn = [_new(call, seed=b"").state.seed for _ in range(2)]
    assert [len(s) for s in drawn] == [32, 32]
    assert drawn[0] != drawn[1]


def test_new_match_refusals(call: Caller) -> None:
    """A bad seed, bad labels or too many labels are INVALID_ARGUMENT with their reason."""
    cases = [
        (pb.NewMatchRequest(seed=b"x" * 65), "INVALID_SEED"),
        (pb.NewMatchRequest(seed=SEED, labels=["a", "b", "c"]), "TOO_MANY_LABELS"),
        (pb.NewMatchRequest(seed=SEED, labels=["bad\nlabel"]), "INVALID_LABEL"),
        (pb.NewMatchRequest(seed=SEED, labels=["x" * 65]), "INVALID_LABEL"),
    ]
    for request, reason in cases:
        outcome = call("NewMatch", request)
        assert outcome.code is grpc.StatusCode.INVALID_ARGUMENT, request
        assert outcome.info.reason == reason
        assert outcome.info.domain == "basra.v1"


def test_apply_plays_a_whole_match_like_the_engine(call: Caller) -> None:
    """Apply, step by step with expected_seq, gives exactly the engine's states and events."""
    result = _new(call)
    for state, action in states_of(SEED):
        assert result.state == proto(state)
        if action is None:
            break
        request = pb.ApplyRequest(
            state=result.state, action=action_to_proto(action), expected_seq=state.seq
        )
        outcome = call("Apply", request)
        assert outcome.code is grpc.StatusCode.OK, outcome
        after, events = engine.apply(state, action)
        result = outcome.response
        assert result.state == proto(after)
        assert list(result.events) == messages.events_to_proto(events)
        assert _kinds(list(result.events))[0] == "card_played"
        for seat in (0, 1):
            expected = messages.events_to_proto(engine.seat_events(events, seat))
            assert list(result.seat_events[seat].events) == expected
    assert result.state.status == pb.STATUS_OVER
    assert not result.state.HasField("to_move") and result.state.HasField("winner")
    assert not result.legal_moves.HasField("seat") and not result.legal_moves.moves
    assert _kinds(list(result.events))[-1] == "match_over"


def test_apply_with_a_stale_expected_seq_is_aborted(call: Caller) -> None:
    """expected_seq that differs from the state's seq: ABORTED, SEQ_MISMATCH, both values named."""
    result = _new(call)
    state = engine.new_match(SEED)[0]
    action = action_to_proto(first_choice(state))
    outcome = call("Apply", pb.ApplyRequest(state=result.state, action=action, expected_seq=5))
    assert outcome.code is grpc.StatusCode.ABORTED
    assert outcome.info.reason == "SEQ_MISMATCH"
    assert dict(outcome.info.metadata) == {"seq": "0", "expectedSeq": "5"}


def _refused(call: Caller, state: pb.State, action: pb.Action) -> tuple[grpc.StatusCode, str]:
    outcome = call("Apply", pb.ApplyRequest(state=state, action=action))
    assert outcome.code is not grpc.StatusCode.OK, f"{action} was accepted"
    assert outcome.info.domain == "basra.v1"
    message = outcome.details
    assert message.endswith(".") and "\n" not in message and message[0].isupper(), message
    return outcome.code, outcome.info.reason


def test_illegal_moves_are_failed_precondition(call: Caller) -> None:
    """Each illegal move gets FAILED_PRECONDITION and the engine's reason code."""
    state = find_state(has_multi_plan_card)
    assert state.to_move is not None
    seat = state.to_move
    moves = engine.legal_moves(state)
    multi = next(m for m in moves if len(m.plans) >= 2)
    card = engine.code(multi.card)
    not_held = next(c for c in range(52) if c not in state.hands[seat])
    taken = set(multi.plans[0].cards)
    # A capture set no plan takes exactly: the first plan's cards minus one.
    wrong = [engine.code(c) for c in sorted(taken)[1:]]
    assert all(set(p.cards) != set(sorted(taken)[1:]) for p in multi.plans)
    message = proto(state)
    fp = grpc.StatusCode.FAILED_PRECONDITION
    cases = [
        (pb.Action(seat=1 - seat, card=card), "NOT_YOUR_TURN"),
        (pb.Action(seat=seat, card=engine.code(not_held)), "CARD_NOT_IN_HAND"),
        (pb.Action(seat=seat, card=card), "PLAN_REQUIRED"),
        (pb.Action(seat=seat, card=card, plan_id=len(multi.plans) + 1), "UNKNOWN_PLAN"),
        (pb.Action(seat=seat, card=card, capture=pb.CardList(cards=wrong)), "ILLEGAL_CAPTURE"),
        (pb.Action(seat=seat, card=card, trail=True), "MUST_CAPTURE"),
        (pb.Action(seat=seat, card=card, capture=pb.CardList()), "MUST_CAPTURE"),
    ]
    for action, reason in cases:
        assert _refused(call, message, action) == (fp, reason), action
    final, _ = finished_match(SEED)
    over = _refused(call, proto(final), pb.Action(seat=0, card="AC"))
    assert over == (fp, "MATCH_OVER")


def test_refusal_metadata_names_the_values_involved(call: Caller) -> None:
    """The ErrorInfo metadata carries the card, the seat and the plan id, in lowerCamelCase."""
    state = find_state(has_multi_plan_card)
    seat = state.to_move
    assert seat is not None
    multi = next(m for m in engine.legal_moves(state) if len(m.plans) >= 2)
    card = engine.code(multi.card)
    action = pb.Action(seat=seat, card=card, plan_id=99)
    outcome = call("Apply", pb.ApplyRequest(state=proto(state), action=action))
    assert outcome.info.reason == "UNKNOWN_PLAN"
    assert dict(outcome.info.metadata) == {
        "card": card,
        "planId": "99",
        "plans": str(len(multi.plans)),
    }
    other = pb.Action(seat=1 - seat, card=card)
    turn = call("Apply", pb.ApplyRequest(state=proto(state), action=other))
    assert turn.info.reason == "NOT_YOUR_TURN"
    assert dict(turn.info.metadata) == {"seat": str(1 - seat), "toMove": str(seat)}


def test_apply_choices_by_plan_id_and_by_capture_set_agree(call: Caller) -> None:
    """Naming a plan by id or by exactly its cards (any order) gives the same result."""
    state = find_state(has_multi_plan_card)
    seat = state.to_move
    multi = next(m for m in engine.legal_moves(state) if len(m.plans) >= 2)
    card = engine.code(multi.card)
    plan = multi.plans[1]
    by_id = call(
        "Apply",
        pb.ApplyRequest(state=proto(state), action=pb.Action(seat=seat, card=card, plan_id=2)),
    )
    cards = pb.CardList(cards=[engine.code(c) for c in reversed(plan.cards)])
    by_set = call(
        "Apply",
        pb.ApplyRequest(state=proto(state), action=pb.Action(seat=seat, card=card, capture=cards)),
    )
    assert by_id.code is grpc.StatusCode.OK and by_id == by_set
    captured = by_id.response.events[1].captured
    assert captured.plan_id == 2 and list(captured.cards) == [engine.code(c) for c in plan.cards]


def test_malformed_input_is_invalid_argument(call: Caller) -> None:
    """Missing or malformed parts of a request are INVALID_ARGUMENT naming the problem."""
    result = _new(call)
    state = result.state
    seat = state.to_move
    card = result.legal_moves.moves[0].card
    duplicated = pb.State()
    duplicated.CopyFrom(state)
    duplicated.floor[0] = duplicated.deck[0]
    unknown_code = pb.State()
    unknown_code.CopyFrom(state)
    unknown_code.deck[3] = "11C"
    one_seat = pb.State()
    one_seat.CopyFrom(state)
    del one_seat.seats[1]
    no_status = pb.State()
    no_status.CopyFrom(state)
    no_status.status = pb.STATUS_UNSPECIFIED
    wrong_seq = pb.State()
    wrong_seq.CopyFrom(state)
    wrong_seq.seq = 7
    good = pb.Action(seat=seat, card=card)
    cases = [
        (pb.ApplyRequest(action=good), "INVALID_STATE", {"field": "state"}),
        (pb.ApplyRequest(state=state), "INVALID_ACTION", {"field": "action"}),
        (pb.ApplyRequest(state=duplicated, action=good), "INVALID_STATE", None),
        (pb.ApplyRequest(state=unknown_code, action=good), "INVALID_STATE", {"zone": "deck"}),
        (pb.ApplyRequest(state=one_seat, action=good), "INVALID_STATE", {"field": "seats"}),
        (pb.ApplyRequest(state=no_status, action=good), "INVALID_STATE", {"field": "status"}),
        (pb.ApplyRequest(state=wrong_seq, action=good), "INVALID_STATE", {"field": "seq"}),
        (pb.ApplyRequest(state=state, action=pb.Action(card=card)), "INVALID_SEAT", None),
        (pb.ApplyRequest(state=state, action=pb.Action(seat=7, card=card)), "INVALID_SEAT", None),
        (
            pb.ApplyRequest(state=state, action=pb.Action(seat=seat, card="1H")),
            "INVALID_CARD",
            None,
        ),
        (
            pb.ApplyRequest(state=state, action=pb.Action(seat=seat, card=card, trail=False)),
            "INVALID_ACTION",
            None,
        ),
        (
            pb.ApplyRequest(
                state=state,
                action=pb.Action(seat=seat, card=card, capture=pb.CardList(cards=["ZZ"])),
            ),
            "INVALID_CARD",
            {"card": card, "capture": "ZZ"},
        ),
    ]
    for request, reason, metadata in cases:
        outcome = call("Apply", request)
        assert outcome.code is grpc.StatusCode.INVALID_ARGUMENT, (request, outcome)
        assert outcome.info.reason == reason, (request, outcome)
        if metadata is not None:
            assert dict(outcome.info.metadata) == metadata
    dup = call("Apply", pb.ApplyRequest(state=duplicated, action=good))
    assert "appears twice" in dup.details and dup.info.metadata["card"] == state.deck[0]


def test_state_too_complex_is_resource_exhausted(call_with: MakeCaller) -> None:
    """Past the plan-search work bound: RESOURCE_EXHAUSTED, STATE_TOO_COMPLEX, limit named."""
    call = call_with(Config(plan_work_limit=1))
    state = find_state(has_multi_plan_card)
    outcome = call("LegalMoves", pb.LegalMovesRequest(state=proto(state)))
    assert outcome.code is grpc.StatusCode.RESOURCE_EXHAUSTED
    assert outcome.info.reason == "STATE_TOO_COMPLEX"
    assert outcome.info.metadata["workLimit"] == "1"


def test_legal_moves_lists_each_card_with_its_plans(call: Caller) -> None:
    """LegalMoves gives the engine's moves: plans with ids, cards, groups, Basra flags."""
    state = find_state(has_multi_plan_card)
    outcome = call("LegalMoves", pb.LegalMovesRequest(state=proto(state)))
    assert outcome.code is grpc.StatusCode.OK
    moves = outcome.response.legal_moves
    assert moves.seat == state.to_move
    expected = engine.legal_moves(state)
    assert moves == messages.moves_to_proto(state.to_move, expected)
    for move, engine_move in zip(moves.moves, expected, strict=True):
        assert move.trails == (not move.plans)
        assert [p.id for p in move.plans] == list(range(1, len(engine_move.plans) + 1))
        for plan in move.plans:
            grouped = {c for g in plan.groups for c in g.cards}
            assert grouped | set(plan.same_rank) == set(plan.cards)
    final, _ = finished_match(SEED)
    over = call("LegalMoves", pb.LegalMovesRequest(state=proto(final)))
    assert not over.response.legal_moves.HasField("seat") and not over.response.legal_moves.moves
    missing = call("LegalMoves", pb.LegalMovesRequest())
    assert missing.code is grpc.StatusCode.INVALID_ARGUMENT
    assert missing.info.reason == "INVALID_STATE"


def test_player_view_shows_only_what_the_seat_may_see(call: Caller) -> None:
    """Own hand, counts of the rest, moves only when to move, the seed only after the end."""
    result = _new(call, labels=("Ann", "Bob"))
    state = result.state
    for seat in (0, 1):
        outcome = call("PlayerView", pb.PlayerViewRequest(state=state, seat=seat))
        assert outcome.code is grpc.StatusCode.OK
        view = outcome.response.view
        assert view.seat == seat and list(view.hand) == list(state.seats[seat].hand)
        assert [s.hand_size for s in view.seats] == [4, 4]
        assert [s.label for s in view.seats] == ["Ann", "Bob"]
        assert view.deck_size == len(state.deck) and list(view.floor) == list(state.floor)
        assert not view.HasField("seed") and view.seed_commitment == result.seed_commitment
        text = view.SerializeToString()
        assert state.seed not in text
        for card in list(state.seats[1 - seat].hand) + list(state.deck):
            assert card not in view.hand and card not in view.floor
        assert view.HasField("legal_moves") == (seat == state.to_move)
        if seat == state.to_move:
            assert view.legal_moves == result.legal_moves
    final, _ = finished_match(SEED)
    end = call("PlayerView", pb.PlayerViewRequest(state=proto(final), seat=0)).response.view
    assert end.seed == SEED and end.status == pb.STATUS_OVER and end.winner == final.winner
    assert hashlib.sha256(end.seed).digest() == end.seed_commitment


def test_player_view_refuses_a_missing_or_unknown_seat(call: Caller) -> None:
    """No seat or a seat other than 0 and 1: INVALID_ARGUMENT, INVALID_SEAT."""
    state = _new(call).state
    for request in (
        pb.PlayerViewRequest(state=state),
        pb.PlayerViewRequest(state=state, seat=2),
        pb.PlayerViewRequest(state=state, seat=-1),
    ):
        outcome = call("PlayerView", request)
        assert outcome.code is grpc.StatusCode.INVALID_ARGUMENT
        assert outcome.info.reason == "INVALID_SEAT"


def test_the_public_view_shows_what_anybody_may_see(call: Caller) -> None:
    """spectator: the floor and counts in public_view (no `view`), the seed only after the end."""
    result = _new(call, labels=("Ann", "Bob"))
    state = result.state
    outcome = call("PlayerView", pb.PlayerViewRequest(state=state, spectator=True))
    assert outcome.code is grpc.StatusCode.OK
    assert not outcome.response.HasField("view")
    view = outcome.response.public_view
    assert list(view.floor) == list(state.floor) and view.deck_size == len(state.deck)
    assert [s.hand_size for s in view.seats] == [4, 4]
    assert [s.label for s in view.seats] == ["Ann", "Bob"]
    assert view.to_move == state.to_move and view.dealer == state.dealer
    assert not view.HasField("seed") and view.seed_commitment == result.seed_commitment
    assert state.seed not in outcome.response.SerializeToString()
    final, _ = finished_match(SEED)
    request = pb.PlayerViewRequest(state=proto(final), spectator=True)
    end = call("PlayerView", request).response.public_view
    assert end.seed == SEED and end.status == pb.STATUS_OVER and end.winner == final.winner
    assert [s.total for s in end.seats] == list(final.totals)
    assert not end.HasField("to_move")


def test_the_public_view_names_no_hand_or_deck_card_in_any_state_of_a_match() -> None:
    """Every state of a whole match, through the handlers: only floor cards, true counts."""
    handlers = Handlers()
    looked = 0
    for state, _ in states_of(SEED):
        request = pb.PlayerViewRequest(state=proto(state), spectator=True)
        answer = pb.PlayerViewResponse.FromString(handlers.player_view(request, Facts()))
        view = answer.public_view
        hidden = {*state.hands[0], *state.hands[1], *state.deck}
        assert set(view.floor) == set(engine.codes(state.floor))
        assert not set(view.floor) & set(engine.codes(hidden))
        assert [s.hand_size for s in view.seats] == [len(h) for h in state.hands]
        assert [s.captured_count for s in view.seats] == [len(p) for p in state.captured]
        assert view.HasField("seed") == (state.status is engine.Status.OVER)
        looked += 1
    assert looked > 48


def test_the_public_view_refuses_a_seat_too(call: Caller) -> None:
    """spectator with a seat: INVALID_ARGUMENT, INVALID_SEAT (a request asks for one view)."""
    state = _new(call).state
    outcome = call("PlayerView", pb.PlayerViewRequest(state=state, seat=0, spectator=True))
    assert outcome.code is grpc.StatusCode.INVALID_ARGUMENT
    assert outcome.info.reason == "INVALID_SEAT"


def test_replay_rebuilds_the_match(call: Caller) -> None:
    """Replaying every action gives the final state and every event; nothing is refused."""
    final, actions = finished_match(SEED)
    request = pb.ReplayRequest(seed=SEED, actions=[action_to_proto(a) for a in actions])
    outcome = call("Replay", request)
    assert outcome.code is grpc.StatusCode.OK
    response = outcome.response
    assert response.state == proto(final)
    assert not response.HasField("refused_index") and not response.HasField("refusal")
    replayed = engine.replay(SEED, actions)
    assert list(response.events) == messages.events_to_proto(replayed.events)


def test_replay_reports_the_first_refused_action(call: Caller) -> None:
    """A refused or unreadable action stops the replay; its index and reason are reported."""
    _, actions = finished_match(SEED)
    messages = [action_to_proto(a) for a in actions[:10]]
    wrong_turn = pb.Action(seat=1 - messages[5].seat, card=messages[5].card)
    outcome = call(
        "Replay", pb.ReplayRequest(seed=SEED, actions=[*messages[:5], wrong_turn, *messages[6:]])
    )
    assert outcome.code is grpc.StatusCode.OK
    response = outcome.response
    assert response.refused_index == 5 and response.refusal.reason == "NOT_YOUR_TURN"
    assert response.state.seq == 5 and response.refusal.message.endswith(".")
    unreadable = pb.Action(seat=messages[3].seat, card="??")
    outcome = call("Replay", pb.ReplayRequest(seed=SEED, actions=[*messages[:3], unreadable]))
    response = outcome.response
    assert response.refused_index == 3 and response.refusal.reason == "INVALID_CARD"
    assert response.state.seq == 3 and response.legal_moves.seat == response.state.to_move


def test_replay_limits(call_with: MakeCaller) -> None:
    """More actions than allowed: RESOURCE_EXHAUSTED, TOO_MANY_ACTIONS; the limit itself is fine."""
    call = call_with(Config(max_replay_actions=3))
    _, actions = finished_match(SEED)
    messages = [action_to_proto(a) for a in actions]
    at_limit = call("Replay", pb.ReplayRequest(seed=SEED, actions=messages[:3]))
    assert at_limit.code is grpc.StatusCode.OK and at_limit.response.state.seq == 3
    past = call("Replay", pb.ReplayRequest(seed=SEED, actions=messages[:4]))
    assert past.code is grpc.StatusCode.RESOURCE_EXHAUSTED
    assert past.info.reason == "TOO_MANY_ACTIONS"
    assert dict(past.info.metadata) == {"actions": "4", "maxActions": "3"}
    bad_seed = call("Replay", pb.ReplayRequest(seed=b"", actions=messages[:1]))
    assert bad_seed.code is grpc.StatusCode.INVALID_ARGUMENT
    assert bad_seed.info.reason == "INVALID_SEED"
