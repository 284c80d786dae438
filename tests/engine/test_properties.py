"""Property tests: random whole matches checked at every step against independent oracles."""

from __future__ import annotations

import hashlib
import random
from dataclasses import fields

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine import (
    Action,
    BasraScored,
    Captured,
    CardPlayed,
    CardsDealt,
    Event,
    HandScored,
    HandStarted,
    LeftoversAwarded,
    MatchOver,
    RuleError,
    State,
    Status,
    apply,
    check_state,
    code,
    codes,
    legal_moves,
    new_match,
    public_events,
    public_view,
    replay,
    seat_events,
    seat_view,
)
from engine.view import HiddenDeal
from testkit import brute
from testkit.actions import random_action
from testkit.states import assert_unchanged, kept

PROPERTY_SETTINGS = settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


def all_zones(state: State) -> list[int]:
    """Every card of every zone of a state."""
    return [
        *state.deck,
        *state.hands[0],
        *state.hands[1],
        *state.floor,
        *state.captured[0],
        *state.captured[1],
        *state.unclaimed,
    ]


def check_offers(state: State) -> None:
    """Every offered plan equals the brute force's, in order, with ids; each one is sound."""
    floor = codes(state.floor)
    moves = legal_moves(state)
    assert state.to_move is not None
    assert [m.card for m in moves] == list(state.hands[state.to_move])
    for move in moves:
        card = code(move.card)
        expected = brute.plans(card, floor)
        assert [codes(p.cards) for p in move.plans] == [list(p.cards) for p in expected]
        assert [p.id for p in move.plans] == list(range(1, len(expected) + 1))
        assert [p.basra for p in move.plans] == [p.basra for p in expected]
        assert move.trails == (not expected)
        assert len(move.plans) <= 12
        if brute.value_of(card) is not None and card != "7D":
            for plan in move.plans:
                brute.check_plan_parts(
                    card, floor, codes(plan.cards), codes(plan.same_rank),
                    [codes(g) for g in plan.groups],
                )  # fmt: skip


def oracle_accepts(state: State, action: Action) -> bool:
    """Whether the rules accept `action`, decided from the brute force alone."""
    if action.seat != state.to_move or action.card not in state.hands[action.seat]:
        return False
    offered = brute.plans(code(action.card), codes(state.floor))
    named = (action.plan_id is not None) + (action.capture is not None) + action.trail
    if named > 1:
        return False
    if action.trail:
        return not offered
    if action.plan_id is not None:
        return 1 <= action.plan_id <= len(offered)
    if action.capture is not None:
        if not action.capture:
            return not offered
        wanted = codes(action.capture)
        return len(set(wanted)) == len(wanted) and any(set(p.cards) == set(wanted) for p in offered)
    return len(offered) <= 1


def wild_action(state: State, rnd: random.Random) -> Action:
    """A random action that is often wrong: any seat, any card, any choice."""
    seat = rnd.choice([0, 1, state.to_move or 0])
    pool = list(state.hands[seat]) * 3 + list(range(52))
    card = rnd.choice(pool)
    kind = rnd.randrange(5)
    if kind == 0:
        return Action(seat, card)
    if kind == 1:
        return Action(seat, card, plan_id=rnd.randrange(-1, 6))
    if kind == 2:
        sample = rnd.sample(list(state.floor), rnd.randint(0, len(state.floor)))
        return Action(seat, card, capture=tuple(sample))
    if kind == 3:
        return Action(seat, card, trail=True)
    return Action(seat, card, plan_id=1, trail=rnd.random() < 0.5)


def check_view(state: State, events: tuple[Event, ...]) -> None:
    """A seat sees its own cards and public counts, never the seed, deck or opponent cards."""
    for seat in (0, 1):
        view = seat_view(state, seat)
        assert view.hand == state.hands[seat]
        assert view.public == public_view(state)
        assert not hasattr(view, "deck")
        assert (view.legal_moves != ()) == (state.to_move == seat)
        for event in seat_events(events, seat):
            if isinstance(event, CardsDealt) and event.seat is not None:
                assert event.seat == seat
            if isinstance(event, HiddenDeal):
                assert event.seat == 1 - seat


# Every field of the public view; a new one fails check_public until it is checked there.
PUBLIC_FIELDS = {
    "seq",
    "hand_number",
    "round_number",
    "dealer",
    "to_move",
    "floor",
    "deck_size",
    "hand_sizes",
    "captured_counts",
    "basras",
    "totals",
    "carry",
    "status",
    "winner",
    "labels",
    "seed_commitment",
    "seed",
}


def check_public(state: State, events: tuple[Event, ...]) -> None:
    """Anybody sees the floor, counts and scores: no hand or deck card, no seed until the end."""
    view = public_view(state)
    assert {f.name for f in fields(view)} == PUBLIC_FIELDS  # the floor is the only card zone
    assert view.floor == state.floor
    assert view.hand_sizes == (len(state.hands[0]), len(state.hands[1]))
    assert view.captured_counts == (len(state.captured[0]), len(state.captured[1]))
    assert view.deck_size == len(state.deck)
    assert (view.basras, view.totals, view.carry) == (state.basras, state.totals, state.carry)
    assert (view.to_move, view.winner, view.status) == (state.to_move, state.winner, state.status)
    assert view.seed_commitment == hashlib.sha256(state.seed).digest()
    assert view.seed == (state.seed if state.status is Status.OVER else None)
    shown = public_events(events)
    assert len(shown) == len(events)
    for event, public in zip(events, shown, strict=True):
        if isinstance(event, CardsDealt) and event.seat is not None:
            assert public == HiddenDeal(event.seat, len(event.cards))
        else:
            assert public is event


class PileTracker:
    """Rebuilds each hand's piles from the events, to score hands independently."""

    def __init__(self) -> None:
        self.piles: tuple[list[str], list[str]] = ([], [])
        self.basras = [0, 0]

    def see(self, event: Event, carry_before: int) -> None:
        """Follow one event; on a hand's end, compare the engine's scores with brute.score."""
        if isinstance(event, HandStarted):
            self.piles, self.basras = ([], []), [0, 0]
        elif isinstance(event, Captured):
            self.piles[event.seat].extend([code(event.card), *codes(event.cards)])
        elif isinstance(event, BasraScored):
            self.basras[event.seat] += 1
        elif isinstance(event, LeftoversAwarded):
            # Every hand has a capture: the first Jack played meets a non-empty floor.
            assert event.seat is not None
            self.piles[event.seat].extend(codes(event.cards))
        elif isinstance(event, HandScored):
            assert len(self.piles[0]) + len(self.piles[1]) == 52
            seats, new_carry = brute.score(
                self.piles, (self.basras[0], self.basras[1]), carry_before
            )
            assert [s.hand_total for s in event.seats] == [s.total for s in seats]
            assert [s.cards for s in event.seats] == [len(p) for p in self.piles]
            assert event.carry_before == carry_before
            assert event.carry_after == new_carry


def play_checked(seed: bytes, rnd: random.Random, prefer_trail: bool) -> None:
    """Play one whole match, checking every property at every step."""
    state, first = new_match(seed)
    states = [state]
    all_events: list[Event] = list(first)
    actions: list[Action] = []
    tracker = PileTracker()
    carry = 0
    for event in first:
        tracker.see(event, carry)
    while state.status is Status.IN_PROGRESS:
        assert sorted(all_zones(state)) == list(range(52))
        check_state(state)
        check_offers(state)
        before = kept(state)
        for _ in range(2):
            wild = wild_action(state, rnd)
            try:
                result = apply(state, wild)
            except RuleError:
                assert not oracle_accepts(state, wild), wild
                assert_unchanged(state, before)
            else:
                assert oracle_accepts(state, wild), wild
                assert result[0].seq == state.seq + 1
        action = random_action(state, rnd, prefer_trail=prefer_trail, any_spelling=True)
        played = state
        state, events = apply(played, action)
        assert_unchanged(played, before)  # apply returns a new state, the old one stays
        assert isinstance(events[0], CardPlayed)
        assert events[0] == CardPlayed(action.seat, action.card)
        for event in events:
            tracker.see(event, carry)
            if isinstance(event, HandScored):
                carry = event.carry_after
        check_public(state, events)
        if rnd.random() < 0.05:
            check_view(state, events)
        states.append(state)
        all_events.extend(events)
        actions.append(action)
        assert len(actions) < 3000
    check_state(state)
    assert sorted(all_zones(state)) == list(range(52))
    assert isinstance(all_events[-1], MatchOver)
    assert all_events[-1].winner == state.winner
    check_view(state, ())
    check_public(state, tuple(all_events))

    again = replay(seed, actions)
    assert again.refused_index is None
    assert again.state == state
    assert again.events == tuple(all_events)
    assert repr(again.state) == repr(state)
    assert replay(seed, actions) == again
    stepwise = new_match(seed)[0]
    for index, action in enumerate(actions):
        stepwise = apply(stepwise, action)[0]
        assert stepwise == states[index + 1]


@PROPERTY_SETTINGS
@given(
    seed=st.binary(min_size=1, max_size=64),
    choices=st.integers(min_value=0, max_value=2**32 - 1),
    prefer_trail=st.booleans(),
)
def test_random_matches_keep_every_property(seed: bytes, choices: int, prefer_trail: bool) -> None:
    """Conservation, soundness, plan equality with the brute force, refusals, replay."""
    play_checked(seed, random.Random(choices), prefer_trail)


@PROPERTY_SETTINGS
@given(
    seed=st.binary(min_size=1, max_size=64),
    choices=st.integers(min_value=0, max_value=2**32 - 1),
)
def test_replay_stops_at_the_first_refused_action(seed: bytes, choices: int) -> None:
    """A wrong action inside a recorded list: replay reports its index and the state before it."""
    rnd = random.Random(choices)
    state, _ = new_match(seed)
    actions: list[Action] = []
    states = [state]
    for _ in range(rnd.randrange(1, 60)):
        action = random_action(state, rnd, any_spelling=True)
        state, _ = apply(state, action)
        actions.append(action)
        states.append(state)
    assert state.to_move is not None
    wrong = Action(1 - state.to_move, 0)
    result = replay(seed, [*actions, wrong, *actions[:3]])
    assert result.refused_index == len(actions)
    assert result.error is not None
    assert result.state == states[-1]


VIEW_FIELDS = {"seat", "public", "hand", "legal_moves"}  # the public part: PUBLIC_FIELDS


@settings(max_examples=30, deadline=None)
@given(seed=st.binary(min_size=1, max_size=64), seat=st.sampled_from([0, 1]))
def test_seat_view_never_shows_what_the_seat_may_not_see(seed: bytes, seat: int) -> None:
    """On fresh matches: own hand only, no seed, no deck, no opponent cards in the events."""
    state, events = new_match(seed)
    view = seat_view(state, seat)
    assert {f.name for f in fields(view)} == VIEW_FIELDS
    assert view.hand == state.hands[seat]
    assert {f.name for f in fields(view.public)} == PUBLIC_FIELDS
    assert view.public.seed is None
    assert view.public.seed_commitment == hashlib.sha256(seed).digest()
    opponent = set(state.hands[1 - seat])
    shown = {*view.hand, *view.public.floor, *(m.card for m in view.legal_moves)}
    for move in view.legal_moves:
        for plan in move.plans:
            shown |= set(plan.cards)
    assert not opponent & shown
    for event in seat_events(events, seat):
        if isinstance(event, CardsDealt):
            assert not opponent & set(event.cards)
