"""Every refusal reason code, and that a refusal never changes the state it was given."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest

from engine import (
    Action,
    Reason,
    RuleError,
    State,
    Status,
    apply,
    check_state,
    code,
    legal_moves,
    new_match,
    parse_card,
    parse_cards,
    seat_events,
    seat_view,
)
from engine.fairness import Finding, verify
from engine.rng import commitment, first_dealer
from testkit.actions import play_match
from testkit.states import build, refusal, refused_play, scene


def _mid_hand() -> State:
    """A real state in the middle of hand 2, after some captures."""
    played = play_match(b"refusals", random.Random(11))
    for state in played.states:
        if state.hand_number == 2 and state.plays_in_hand == 13 and state.captured[0]:
            return state
    raise AssertionError("no suitable state")


MID = _mid_hand()
FRESH, _ = new_match(b"fresh")


def _over() -> State:
    played = play_match(b"over", random.Random(4))
    return played.states[-1]


OVER = _over()


def test_fixture_states_are_sound() -> None:
    """The states corrupted below are accepted as they are."""
    for state in (MID, FRESH, OVER):
        check_state(state)
    assert OVER.status is Status.OVER


def test_not_your_turn() -> None:
    """The seat not to move is refused with NOT_YOUR_TURN."""
    assert MID.to_move is not None
    other = 1 - MID.to_move
    error = refusal(MID, Action(other, MID.hands[other][0]))
    assert error.reason is Reason.NOT_YOUR_TURN


def test_card_not_in_hand() -> None:
    """A card held by the opponent, lying on the floor or still in the deck is refused."""
    assert MID.to_move is not None
    seat = MID.to_move
    for card in (MID.hands[1 - seat][0], MID.floor[0], MID.deck[0]):
        assert refusal(MID, Action(seat, card)).reason is Reason.CARD_NOT_IN_HAND


def test_plan_required() -> None:
    """A card with several plans and no choice is refused with PLAN_REQUIRED."""
    state = scene(["2C"], ["AD", "AH", "AS"])
    assert refused_play(state, "2C").reason is Reason.PLAN_REQUIRED


def test_unknown_plan() -> None:
    """A plan id the card does not have is refused with UNKNOWN_PLAN."""
    state = scene(["2C"], ["AD", "AH", "AS"])
    assert refused_play(state, "2C", plan_id=4).reason is Reason.UNKNOWN_PLAN


def test_illegal_capture() -> None:
    """A set of cards that is not exactly one offered plan is refused with ILLEGAL_CAPTURE."""
    state = scene(["2C"], ["AD", "AH", "AS"])
    error = refused_play(state, "2C", capture=["AD", "AH", "AS"])
    assert error.reason is Reason.ILLEGAL_CAPTURE


def test_must_capture() -> None:
    """Trailing a card that has a plan is refused with MUST_CAPTURE."""
    state = scene(["2C"], ["AD", "AH", "AS"])
    assert refused_play(state, "2C", trail=True).reason is Reason.MUST_CAPTURE


def test_match_over() -> None:
    """Any play on a finished match is refused with MATCH_OVER."""
    assert refusal(OVER, Action(0, 0)).reason is Reason.MATCH_OVER
    assert legal_moves(OVER) == ()


def test_invalid_seed() -> None:
    """Seeds must be 1 to 64 bytes."""
    for seed in (b"", bytes(65), "basra", None, 7):
        with pytest.raises(RuleError) as info:
            new_match(seed)  # type: ignore[arg-type]
        assert info.value.reason is Reason.INVALID_SEED
    assert new_match(bytes(64))[0].hand_number == 1
    assert new_match(b"\x00")[0].hand_number == 1


@pytest.mark.parametrize("length", [0, 1, 64, 65])
def test_new_match_the_state_check_and_the_fairness_check_take_the_same_seeds(
    length: int,
) -> None:
    """A seed that can start a match is one a state may hold and a verifier may check."""
    seed = bytes(range(length))
    fits = 1 <= length <= 64
    try:
        new_match(seed)
        started = True
    except RuleError as error:
        assert error.reason is Reason.INVALID_SEED
        started = False
    # A state dealt from the seed itself where it can be; else a sound one given that seed.
    state = new_match(seed)[0] if started else replace(new_match(b"seeds")[0], seed=seed)
    try:
        check_state(state)
        held = True
    except RuleError:
        held = False
    found = verify(seed, commitment(seed), []).discrepancy
    checked = found is None or found.finding is not Finding.INVALID_SEED
    assert (started, held, checked) == (fits, fits, fits)


def test_invalid_seat() -> None:
    """Seats other than 0 and 1 are refused by apply, the seat view and the seat events."""
    for seat in (2, -1, 7):
        assert refusal(MID, Action(seat, MID.hands[0][0])).reason is Reason.INVALID_SEAT
        with pytest.raises(RuleError) as info:
            seat_view(MID, seat)
        assert info.value.reason is Reason.INVALID_SEAT
        with pytest.raises(RuleError) as info:
            seat_events((), seat)
        assert info.value.reason is Reason.INVALID_SEAT


def test_invalid_action() -> None:
    """An action naming more than one of plan id, capture set and trail is refused."""
    state = scene(["2C", "KD"], ["AD", "AH", "AS"])
    for choice in (
        {"plan_id": 1, "trail": True},
        {"plan_id": 1, "capture": ["AD", "AH"]},
        {"capture": ["AD", "AH"], "trail": True},
        {"plan_id": 1, "capture": [], "trail": True},
    ):
        error = refused_play(state, "2C", **choice)
        assert error.reason is Reason.INVALID_ACTION, choice
    error = refused_play(state, "KD", plan_id=1, trail=True)
    assert error.reason is Reason.INVALID_ACTION


def test_invalid_labels() -> None:
    """A label that is not printable or longer than 64 characters is INVALID_LABEL, seat named."""
    for labels, seat in ((("a\x00b", ""), 0), (("", "x" * 65), 1), (("line\nbreak", "ok"), 0)):
        with pytest.raises(RuleError) as info:
            new_match(b"seed", labels)
        assert info.value.reason is Reason.INVALID_LABEL
        assert info.value.details == {"seat": str(seat)}
    assert new_match(b"seed", ("Ann", "x" * 64))[0].labels == ("Ann", "x" * 64)


def _complex_state() -> State:
    """A consistent last-round state whose floor holds every card from A to 8 (32 cards)."""
    floor = [r + s for r in ("A", "2", "3", "4", "5", "6", "7", "8") for s in "CDHS"]
    return build((["KD"], ["10H"]), floor, dealer=0, rest_to=0, last_capturer=0)


def test_state_too_complex() -> None:
    """A crafted floor of 32 small cards exceeds the work bound: refused, nothing changes."""
    state = _complex_state()
    assert state.to_move == 1
    assert refused_play(state, "10H").reason is Reason.STATE_TOO_COMPLEX
    with pytest.raises(RuleError) as info:
        legal_moves(state)
    assert info.value.reason is Reason.STATE_TOO_COMPLEX


def test_state_too_complex_only_for_the_card_that_needs_the_search() -> None:
    """On that floor a J still sweeps: its plan needs no search."""
    floor = [r + s for r in ("A", "2", "3", "4", "5", "6", "7", "8") for s in "CDHS"]
    state = build((["KD"], ["JH"]), floor, dealer=0, rest_to=0, last_capturer=0)
    after, _ = apply(state, Action(1, parse_card("JH")))
    assert after.floor == ()


# --- INVALID_STATE ---------------------------------------------------------------------


def _force(state: State, **changes: Any) -> State:
    """Replace fields with values of any type: outside callers are not type-checked."""
    return replace(state, **changes)


def _swap_first(state: State, zone: str, card: int) -> State:
    cards = getattr(state, zone)
    return _force(state, **{zone: (card, *cards[1:])})


def _hands(state: State, h0: tuple[int, ...], h1: tuple[int, ...]) -> State:
    return replace(state, hands=(h0, h1))


Corrupt = Callable[[State], State]

CORRUPTIONS: list[tuple[str, State, Corrupt]] = [
    ("duplicate card", MID, lambda s: _swap_first(s, "floor", s.hands[0][0])),
    ("missing card", MID, lambda s: replace(s, captured=(s.captured[0][1:], s.captured[1]))),
    ("card 52", MID, lambda s: replace(s, floor=(*s.floor, 52))),
    ("card -1", MID, lambda s: replace(s, floor=(*s.floor, -1))),
    ("card as text", MID, lambda s: _force(s, floor=(*s.floor, "AC"))),
    ("card as bool", MID, lambda s: replace(s, floor=(*s.floor, True))),
    (
        "wrong hand sizes",
        MID,
        lambda s: _hands(s, s.hands[0] + s.hands[1][:1], s.hands[1][1:]),
    ),
    ("wrong to_move", MID, lambda s: replace(s, to_move=1 - (s.to_move or 0))),
    ("to_move none", MID, lambda s: replace(s, to_move=None)),
    ("seq + 1", MID, lambda s: replace(s, seq=s.seq + 1)),
    ("seq - 1", MID, lambda s: replace(s, seq=s.seq - 1)),
    ("seq negative", FRESH, lambda s: replace(s, seq=-1)),
    ("bad dealer", MID, lambda s: replace(s, dealer=1 - s.dealer)),
    ("dealer 2", MID, lambda s: replace(s, dealer=2)),
    ("hand number 0", FRESH, lambda s: replace(s, hand_number=0)),
    ("hand number + 1", MID, lambda s: replace(s, hand_number=s.hand_number + 1)),
    ("winner in progress", MID, lambda s: replace(s, winner=0)),
    ("status text", MID, lambda s: _force(s, status="PLAYING")),
    ("over with cards left", MID, lambda s: replace(s, status=Status.OVER, to_move=None)),
    ("winner incoherent", OVER, lambda s: replace(s, winner=1 - (s.winner or 0))),
    ("winner missing", OVER, lambda s: replace(s, winner=None)),
    ("over to_move", OVER, lambda s: replace(s, to_move=0)),
    ("over seq", OVER, lambda s: replace(s, seq=s.seq - 1)),
    ("over totals", OVER, lambda s: replace(s, totals=(60, 50))),
    ("negative total", MID, lambda s: replace(s, totals=(-1, s.totals[1]))),
    ("totals out of range", MID, lambda s: replace(s, totals=(100, 900))),
    ("totals decide", MID, lambda s: replace(s, totals=(130, 20))),
    ("totals in hand 1", FRESH, lambda s: replace(s, totals=(5, 0))),
    ("three totals", MID, lambda s: _force(s, totals=(1, 2, 3))),
    ("float total", MID, lambda s: _force(s, totals=(1.5, 0))),
    ("carry 29", MID, lambda s: replace(s, carry=29)),
    ("carry negative", MID, lambda s: replace(s, carry=-30)),
    ("carry too large", MID, lambda s: replace(s, carry=60)),
    ("carry in hand 1", FRESH, lambda s: replace(s, carry=30)),
    ("negative basras", MID, lambda s: replace(s, basras=(-1, 0))),
    ("too many basras", FRESH, lambda s: replace(s, basras=(1, 0))),
    ("last capturer 2", MID, lambda s: replace(s, last_capturer=2)),
    ("no last capturer", MID, lambda s: replace(s, last_capturer=None)),
    ("last capturer empty pile", FRESH, lambda s: replace(s, last_capturer=0)),
    (
        "unclaimed in progress",
        MID,
        lambda s: replace(s, unclaimed=(s.floor[0],), floor=s.floor[1:]),
    ),
    (
        "deck not whole rounds",
        MID,
        lambda s: replace(s, deck=s.deck[1:], floor=(*s.floor, s.deck[0])),
    ),
    ("deck too big", FRESH, lambda s: replace(s, deck=s.deck + s.floor, floor=())),
    ("empty seed", MID, lambda s: replace(s, seed=b"")),
    ("long seed", MID, lambda s: replace(s, seed=bytes(65))),
    ("text seed", MID, lambda s: _force(s, seed="basra")),
    ("label control", MID, lambda s: replace(s, labels=("a\tb", ""))),
    ("label long", MID, lambda s: replace(s, labels=("", "y" * 65))),
]


def _jack_on_fresh_floor(state: State) -> State:
    jack = next(c for c in state.deck if c >> 2 == 10)
    deck = tuple(state.floor[0] if c == jack else c for c in state.deck)
    return replace(state, deck=deck, floor=(jack, *state.floor[1:]))


def _both_hands_empty(state: State) -> State:
    return replace(state, hands=((), ()), floor=state.floor + state.hands[0] + state.hands[1])


CORRUPTIONS += [
    ("jack on fresh floor", FRESH, _jack_on_fresh_floor),
    ("both hands empty", MID, _both_hands_empty),
    (
        "hands 4 and 2",
        FRESH,
        lambda s: replace(s, hands=(s.hands[0], s.hands[1][:2]), floor=s.floor + s.hands[1][2:]),
    ),
]


@pytest.mark.parametrize(
    ("base", "corrupt"),
    [pytest.param(base, corrupt, id=name) for name, base, corrupt in CORRUPTIONS],
)
def test_invalid_state(base: State, corrupt: Corrupt) -> None:
    """A corrupted state is refused with INVALID_STATE by check_state and by apply."""
    state = corrupt(base)
    assert state != base
    with pytest.raises(RuleError) as info:
        check_state(state)
    assert info.value.reason is Reason.INVALID_STATE
    assert info.value.message.startswith("The state is inconsistent")
    seat = state.to_move if state.to_move in (0, 1) else 0
    hand: Any = state.hands[seat] if state.hands[seat] else (0,)
    error = refusal(state, Action(seat, hand[0]))
    assert error.reason is Reason.INVALID_STATE


def test_invalid_state_first_problem_is_named() -> None:
    """The message names the problem: the duplicated card's code, the missing card's code."""
    card = MID.hands[0][0]
    with pytest.raises(RuleError) as info:
        check_state(_swap_first(MID, "floor", card))
    assert "twice" in info.value.message
    missing = MID.captured[0][0]
    with pytest.raises(RuleError) as info:
        check_state(replace(MID, captured=(MID.captured[0][1:], MID.captured[1])))
    assert "missing" in info.value.message
    assert info.value.details["card"] == code(missing)


def test_first_dealer_check_uses_the_seed() -> None:
    """A state whose seed would give the other dealer is refused."""
    seed = next(bytes([i]) for i in range(256) if first_dealer(bytes([i])) != FRESH.dealer)
    with pytest.raises(RuleError) as info:
        check_state(replace(FRESH, seed=seed))
    assert info.value.reason is Reason.INVALID_STATE


# --- malformed action values -------------------------------------------------------------


# The engine's API takes cards, seats and plan ids as integers: one out of range is bad input
# like any other and must be refused with a reason, not escape as IndexError or ValueError.
MALFORMED: list[tuple[str, dict[str, Any], Reason]] = [
    ("card 52", {"card": 52}, Reason.INVALID_CARD),
    ("card -1", {"card": -1}, Reason.INVALID_CARD),
    ("card 2**32", {"card": 2**32}, Reason.INVALID_CARD),
    ("capture with 52", {"capture": (52,)}, Reason.INVALID_CARD),
    ("capture with -1", {"capture": (-1,)}, Reason.INVALID_CARD),
    ("capture with 2**32", {"capture": (parse_card("AD"), 2**32)}, Reason.INVALID_CARD),
    ("seat 2**32", {"seat": 2**32}, Reason.INVALID_SEAT),
    ("plan id 2**64", {"plan_id": 2**64}, Reason.UNKNOWN_PLAN),
]


@pytest.mark.parametrize(
    ("fields", "reason"), [pytest.param(f, r, id=name) for name, f, r in MALFORMED]
)
def test_out_of_range_action_values_are_refused_with_a_reason(
    fields: dict[str, Any], reason: Reason
) -> None:
    """Values no caller should send still get a RuleError with a reason (never a crash)."""
    state = scene(["2C", "KD"], ["AD", "AH", "AS"])
    base: dict[str, Any] = {"seat": 1, "card": parse_card("2C")}
    action = Action(**{**base, **fields})
    try:
        error = refusal(state, action)
    except Exception as crash:
        pytest.fail(f"{action} raised {type(crash).__name__}: {crash}")
    assert error.reason is reason


def test_refusals_on_a_real_match_change_nothing() -> None:
    """Random wrong actions throughout a real match are all refused without any change."""
    rnd = random.Random(8)
    played = play_match(b"wrong", rnd)
    refused = 0
    for state in played.states[:-1]:
        assert state.to_move is not None
        seat = state.to_move
        wrong = [
            Action(1 - seat, state.hands[1 - seat][0]) if state.hands[1 - seat] else None,
            Action(seat, state.deck[0]) if state.deck else None,
            Action(seat, state.hands[seat][0], plan_id=99),
            Action(seat, state.hands[seat][0], capture=parse_cards(["AC", "AC"])),
        ]
        for action in wrong:
            if action is not None:
                refusal(state, action)
                refused += 1
    assert refused > 3 * len(played.actions)
