"""Hidden information never leaks: not through PlayerView (a seat's or the public view), seat or
public events, not into the logs."""

from __future__ import annotations

import base64
import hashlib
import json
import random
import re
from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from basra.v1 import rules_pb2 as pb
from basra.v1 import rules_pb2_grpc
from google.protobuf.message import Message
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import engine
from engine import State, Status
from testkit import harness, messages
from testkit.actions import action_to_proto, random_action

CODES = frozenset(engine.code(c) for c in range(52))
TIMEOUT = 10.0


@pytest.fixture(scope="module")
def server() -> Iterator[harness.ServedProcess]:
    """A one-worker server logging at debug, so every line it can write is written."""
    served = harness.start(["--workers", "1"], log_level="debug")
    yield served
    served.stop()


@pytest.fixture(scope="module")
def stub(server: harness.ServedProcess) -> Iterator[Any]:
    """A RulesService stub on one channel to the server."""
    with grpc.insecure_channel(server.target) as channel:
        yield rules_pb2_grpc.RulesServiceStub(channel)  # type: ignore[no-untyped-call]


def strings_in(message: Message) -> Iterator[str]:
    """Every string anywhere in a message, nested messages and lists included."""
    for descriptor, value in message.ListFields():
        values = value if descriptor.is_repeated else [value]
        for item in values:
            if isinstance(item, Message):
                yield from strings_in(item)
            elif isinstance(item, str):
                yield item


def check_view(view: pb.PlayerView, state: State, seat: int) -> None:
    """A view shows only the seat's own hand and the floor; the seed only once it is over."""
    own = set(engine.codes(state.hands[seat]))
    public = own | set(engine.codes(state.floor))
    shown = {s for s in strings_in(view) if s in CODES}
    assert shown <= public, f"seat {seat} sees {sorted(shown - public)}"
    assert set(view.hand) == own
    hidden = set(engine.codes(state.hands[1 - seat])) | set(engine.codes(state.deck))
    assert not shown & hidden
    assert view.seed_commitment == hashlib.sha256(state.seed).digest()
    if state.status is Status.OVER:
        assert view.HasField("seed") and view.seed == state.seed
    else:
        assert not view.HasField("seed")
        assert state.seed not in view.SerializeToString()


def check_public_view(response: pb.PlayerViewResponse, state: State) -> None:
    """The public view shows the floor and counts: no hand card, no deck card, no seed early."""
    assert response.HasField("public_view") and not response.HasField("view")
    view = response.public_view
    shown = {s for s in strings_in(view) if s in CODES}
    assert shown <= set(engine.codes(state.floor)), f"anybody sees {sorted(shown)}"
    hidden = {*engine.codes(state.hands[0]), *engine.codes(state.hands[1])}
    assert not shown & (hidden | set(engine.codes(state.deck)))
    assert [s.hand_size for s in view.seats] == [len(hand) for hand in state.hands]
    assert [s.captured_count for s in view.seats] == [len(pile) for pile in state.captured]
    assert view.deck_size == len(state.deck)
    assert view.seed_commitment == hashlib.sha256(state.seed).digest()
    if state.status is Status.OVER:
        assert view.HasField("seed") and view.seed == state.seed
    else:
        assert not view.HasField("seed")
        assert state.seed not in response.SerializeToString()


def check_seat_events(result: pb.NewMatchResponse | pb.ApplyResponse) -> None:
    """Each seat's events show the cards dealt to it and to the floor, and only a count else."""
    for seat in (0, 1):
        events = result.seat_events[seat]
        assert events.seat == seat
        for event in events.events:
            kind = event.WhichOneof("kind")
            if kind == "cards_dealt":
                dealt = event.cards_dealt
                assert not dealt.HasField("seat") or dealt.seat == seat
            elif kind == "hidden_deal":
                assert event.hidden_deal.seat == 1 - seat and event.hidden_deal.count > 0
        assert result.state.seed not in events.SerializeToString()
    # Anybody's events: every seat's deal as a count, everything else as it happened.
    assert len(result.public_events) == len(result.events)
    for public, event in zip(result.public_events, result.events, strict=True):
        if event.WhichOneof("kind") == "cards_dealt" and event.cards_dealt.HasField("seat"):
            assert public.WhichOneof("kind") == "hidden_deal"
            assert public.hidden_deal.seat == event.cards_dealt.seat
            assert public.hidden_deal.count == len(event.cards_dealt.cards)
        else:
            assert public == event
    assert result.state.seed not in b"".join(e.SerializeToString() for e in result.public_events)


@settings(
    max_examples=6,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    seed=st.binary(min_size=16, max_size=64), play=st.integers(0, 2**32), looks=st.integers(3, 12)
)
def test_no_view_and_no_event_shows_what_its_reader_may_not_see(
    stub: Any, seed: bytes, play: int, looks: int
) -> None:
    """Whole matches through gRPC; both seats' views and the public view checked at random steps
    and at the end, every seat's and the public events at every step."""
    rnd = random.Random(play)
    result = stub.NewMatch(pb.NewMatchRequest(seed=seed), timeout=TIMEOUT)
    check_seat_events(result)
    state, _ = engine.new_match(seed)
    step = 0
    while True:
        if state.status is Status.OVER or rnd.random() < looks / 150:
            for seat in (0, 1):
                request = pb.PlayerViewRequest(state=result.state, seat=seat)
                view = stub.PlayerView(request, timeout=TIMEOUT).view
                check_view(view, state, seat)
            request = pb.PlayerViewRequest(state=result.state, spectator=True)
            check_public_view(stub.PlayerView(request, timeout=TIMEOUT), state)
        if state.status is Status.OVER:
            break
        action = random_action(state, rnd)
        state, _ = engine.apply(state, action)
        message = action_to_proto(action)
        result = stub.Apply(pb.ApplyRequest(state=result.state, action=message), timeout=TIMEOUT)
        assert result.state == messages.state_to_proto(state)
        check_seat_events(result)
        step += 1
    assert step >= 48


def _values(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            yield str(key)
            yield from _values(value)
    elif isinstance(node, list):
        for item in node:
            yield from _values(item)
    else:
        yield str(node)


def test_the_logs_of_a_whole_match_hold_no_seed_and_no_card(
    server: harness.ServedProcess, stub: Any
) -> None:
    """Every call of a match, refusals naming cards included, leaves no card and no seed behind."""
    seed = b"log-leak-check:" + random.Random(7).randbytes(24)
    result = stub.NewMatch(pb.NewMatchRequest(seed=seed, labels=["ann", "bob"]), timeout=TIMEOUT)
    state, _ = engine.new_match(seed, ("ann", "bob"))
    actions = []
    rnd = random.Random(11)
    while state.status is Status.IN_PROGRESS:
        assert state.to_move is not None
        seat = state.to_move
        wire = result.state
        metadata = (("x-request-id", f"match-{state.seq}"),)
        stub.LegalMoves(pb.LegalMovesRequest(state=wire), timeout=TIMEOUT, metadata=metadata)
        stub.PlayerView(pb.PlayerViewRequest(state=wire, seat=1 - seat), timeout=TIMEOUT)
        # Refusals whose metadata names hidden cards: the opponent's and the deck's top card.
        for card in (*state.hands[1 - seat][:1], *state.deck[:1]):
            wrong = pb.Action(seat=seat, card=engine.code(card))
            with pytest.raises(grpc.RpcError) as refused:
                stub.Apply(pb.ApplyRequest(state=wire, action=wrong), timeout=TIMEOUT)
            assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        action = random_action(state, rnd)
        message = action_to_proto(action)
        result = stub.Apply(pb.ApplyRequest(state=wire, action=message), timeout=TIMEOUT)
        state, _ = engine.apply(state, action)
        actions.append(message)
    stub.Replay(pb.ReplayRequest(seed=seed, actions=actions), timeout=TIMEOUT)

    server.wait_for("rpc", TIMEOUT, method="basra.v1.RulesService/Replay")
    lines = server.find("rpc")
    assert len(lines) >= 4 * len(actions)  # every call above was logged
    text = server.log_text()
    for form in (seed, seed.hex(), base64.b64encode(seed).decode(), repr(seed), seed[:15]):
        needle = form if isinstance(form, str) else form.decode("latin-1")
        assert needle not in text, f"the seed appears in the logs as {form!r}"
    tokens = set()
    for raw in text.splitlines():
        for value in _values(json.loads(raw)):
            tokens.update(re.split(r"[^0-9A-Za-z]+", value))
    assert not tokens & CODES, f"card codes in the logs: {sorted(tokens & CODES)}"
