"""The converters are each other's inverse, on the corpus's matches and on arbitrary values.

state_from_proto(state_to_proto(s)) == s and event_from_proto(event_to_proto(e)) == e for every
engine value, and the other way round every recorded message converts to an engine value and
back to the same bytes.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from basra.v1 import rules_pb2 as pb
from hypothesis import given
from hypothesis import strategies as st

import engine
from clients.messages import event_from_proto
from engine import (
    BasraScored,
    Captured,
    CardPlayed,
    CardsDealt,
    Event,
    FloorFixed,
    HandScored,
    HandStarted,
    HiddenDeal,
    LeftoversAwarded,
    MatchOver,
    SeatScore,
    State,
    Status,
    Swept,
    Trailed,
)
from service import reading
from testkit import messages
from testkit.golden import OK, load_cases, match_response

U32 = st.integers(0, 2**32 - 1)
SEAT = st.sampled_from((0, 1))
CARD = st.integers(0, 51)
CARDS = st.lists(CARD, max_size=12).map(tuple)


def _recorded() -> Iterator[tuple[pb.State, list[pb.Event]]]:
    """Every state and every event (seat events included) of the corpus's answers."""
    for case in load_cases():
        if case.expected.code != OK or case.rpc not in ("NewMatch", "Apply", "Replay"):
            continue
        if case.rpc == "Replay":
            replayed = pb.ReplayResponse.FromString(case.expected.body)
            yield replayed.state, list(replayed.events)
            continue
        result = match_response(case.rpc, case.expected.body)
        events = [*result.events, *(e for s in result.seat_events for e in s.events)]
        yield result.state, events
        if result.HasField("signed_state"):
            yield pb.State.FromString(result.signed_state.state), []


def test_every_recorded_state_and_event_converts_there_and_back() -> None:
    """Message -> engine -> message gives the same bytes; engine -> message -> engine, the value."""
    states = events = 0
    kinds: set[type] = set()
    for message, event_messages in _recorded():
        state = reading.state_from_proto(message)
        engine.check_state(state)
        back = messages.state_to_proto(state)
        assert back.SerializeToString() == message.SerializeToString()
        assert reading.state_from_proto(back) == state
        states += 1
        for event_message in event_messages:
            event = event_from_proto(event_message)
            again = messages.event_to_proto(event)
            assert again.SerializeToString() == event_message.SerializeToString()
            assert event_from_proto(again) == event
            kinds.add(type(event))
            events += 1
    assert states >= 600 and events >= 5000
    assert len(kinds) == 12  # every event type, hidden deals included


@st.composite
def states(draw: st.DrawFn) -> State:
    """Any value the State type can hold with card codes in its zones (consistent or not)."""
    deck = draw(st.permutations(range(52)))
    cuts = sorted(draw(st.lists(st.integers(0, 52), min_size=6, max_size=6)))
    zones = [tuple(deck[a:b]) for a, b in zip([0, *cuts], [*cuts, 52], strict=True)]
    label = st.text(st.characters(codec="utf-8"), max_size=8)
    over = draw(st.booleans())
    return State(
        seed=draw(st.binary(min_size=1, max_size=64)),
        seq=draw(U32),
        hand_number=draw(U32),
        dealer=draw(SEAT),
        to_move=draw(st.none() | SEAT),
        deck=zones[0],
        hands=(zones[1], zones[2]),
        floor=zones[3],
        captured=(zones[4], zones[5]),
        basras=(draw(U32), draw(U32)),
        last_capturer=draw(st.none() | SEAT),
        unclaimed=zones[6],
        totals=(draw(U32), draw(U32)),
        carry=draw(U32),
        status=Status.OVER if over else Status.IN_PROGRESS,
        winner=draw(st.none() | SEAT),
        labels=(draw(label), draw(label)),
    )


SEAT_SCORES = st.builds(SeatScore, *([U32] * 10))
EVENTS: st.SearchStrategy[Event | HiddenDeal] = st.one_of(
    st.builds(HandStarted, U32, SEAT),
    st.builds(CardsDealt, st.none() | SEAT, CARDS),
    st.builds(FloorFixed, CARDS, CARDS),
    st.builds(CardPlayed, SEAT, CARD),
    st.builds(Captured, SEAT, CARD, U32, CARDS, CARDS, st.lists(CARDS, max_size=4).map(tuple)),
    st.builds(Trailed, SEAT, CARD),
    st.builds(Swept, SEAT, CARD, CARDS),
    st.builds(BasraScored, SEAT, CARD),
    st.builds(LeftoversAwarded, st.none() | SEAT, CARDS),
    st.builds(HandScored, U32, st.tuples(SEAT_SCORES, SEAT_SCORES), U32, U32),
    st.builds(MatchOver, SEAT, st.tuples(U32, U32)),
    st.builds(HiddenDeal, SEAT, U32),
)


@given(states())
def test_a_state_converts_there_and_back(state: State) -> None:
    """state_from_proto(state_to_proto(s)) == s for any state of card codes."""
    message = messages.state_to_proto(state)
    assert reading.state_from_proto(message) == state
    assert messages.state_to_proto(reading.state_from_proto(message)) == message


@given(EVENTS)
def test_an_event_converts_there_and_back(event: Event | HiddenDeal) -> None:
    """event_from_proto(event_to_proto(e)) == e for every kind of event."""
    message = messages.event_to_proto(event)
    assert event_from_proto(message) == event
    assert messages.event_to_proto(event_from_proto(message)) == message


def test_an_event_message_that_is_not_an_event_is_refused_clearly() -> None:
    """No kind set, a score of one seat, a card code that is no card: each refused."""
    with pytest.raises(ValueError, match="none of its kinds"):
        event_from_proto(pb.Event())
    one_seat = pb.Event(hand_scored=pb.HandScored(seats=[pb.SeatScore()]))
    with pytest.raises(ValueError, match="exactly two"):
        event_from_proto(one_seat)
    with pytest.raises(engine.RuleError) as refused:
        event_from_proto(pb.Event(trailed=pb.Trailed(card="1Z")))
    assert refused.value.reason is engine.Reason.INVALID_CARD
