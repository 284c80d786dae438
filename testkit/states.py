"""Builders of consistent match states for scenario tests (check_state accepts what they build)."""

from __future__ import annotations

import pickle
from collections.abc import Iterable, Sequence
from typing import Any, Literal

import pytest

from engine import (
    Action,
    Event,
    RuleError,
    State,
    Status,
    apply,
    check_state,
    parse_card,
    parse_cards,
)
from engine.rng import first_dealer

ALL = [
    r + s
    for r in ("A", "2", "3", "4", "5", "6", "7", "8", "9", "10", "J", "Q", "K")
    for s in "CDHS"
]


def seed_for_dealer(dealer: int, hand_number: int = 1) -> bytes:
    """Return a one-byte seed whose hand `hand_number` is dealt by `dealer`."""
    for b in range(256):
        seed = bytes([b])
        if first_dealer(seed) ^ ((hand_number - 1) & 1) == dealer:
            return seed
    raise AssertionError("no one-byte seed gives that dealer")


def rest(*used: Iterable[str]) -> list[str]:
    """Return, in canonical order, the card codes not in any of `used`."""
    taken = {c for group in used for c in group}
    return [c for c in ALL if c not in taken]


def build(
    hands: tuple[Sequence[str], Sequence[str]],
    floor: Sequence[str] = (),
    captured: tuple[Sequence[str], Sequence[str]] = ((), ()),
    *,
    dealer: int | None = None,
    seed: bytes | None = None,
    hand_number: int = 1,
    deck: Sequence[str] | None = None,
    rest_to: Literal["deck"] | int = "deck",
    basras: tuple[int, int] = (0, 0),
    last_capturer: int | Literal["auto"] | None = "auto",
    totals: tuple[int, int] = (0, 0),
    carry: int = 0,
    labels: tuple[str, str] = ("", ""),
) -> State:
    """Build an in-progress state from card codes; cards not placed go to `rest_to`.

    The seat to move and the sequence number follow from the hand sizes and the deck, the
    dealer from the seed (a seed is chosen when only `dealer` is given).
    """
    if seed is None:
        seed = seed_for_dealer(dealer, hand_number) if dealer is not None else b"\x00"
    actual_dealer = first_dealer(seed) ^ ((hand_number - 1) & 1)
    if dealer is not None and dealer != actual_dealer:
        raise ValueError(f"seed {seed!r} does not make seat {dealer} deal hand {hand_number}")
    piles = [list(captured[0]), list(captured[1])]
    deck_codes = list(deck) if deck is not None else []
    left = rest(hands[0], hands[1], floor, piles[0], piles[1], deck_codes)
    if rest_to == "deck":
        deck_codes += left
    else:
        piles[rest_to] += left
    if len(deck_codes) % 8 or len(deck_codes) > 40:
        raise ValueError(f"{len(deck_codes)} undealt cards is not a whole number of rounds")
    held = {seat: len(hands[seat]) for seat in (0, 1)}
    non_dealer = 1 - actual_dealer
    if held[non_dealer] == held[actual_dealer]:
        to_move = non_dealer
    elif held[actual_dealer] == held[non_dealer] + 1:
        to_move = actual_dealer
    else:
        raise ValueError(f"hand sizes {held} cannot occur")
    if last_capturer == "auto":
        nonempty = [seat for seat in (0, 1) if piles[seat]]
        if len(nonempty) == 2:
            raise ValueError("both piles hold cards: say who captured last")
        last_capturer = nonempty[0] if nonempty else None
    plays = (40 - len(deck_codes)) + (8 - held[0] - held[1])
    state = State(
        seed=seed,
        seq=48 * (hand_number - 1) + plays,
        hand_number=hand_number,
        dealer=actual_dealer,
        to_move=to_move,
        deck=parse_cards(deck_codes),
        hands=(parse_cards(hands[0]), parse_cards(hands[1])),
        floor=parse_cards(floor),
        captured=(parse_cards(piles[0]), parse_cards(piles[1])),
        basras=basras,
        last_capturer=last_capturer,
        unclaimed=(),
        totals=totals,
        carry=carry,
        status=Status.IN_PROGRESS,
        winner=None,
        labels=labels,
    )
    check_state(state)
    return state


def last_play(
    final_piles: tuple[Sequence[str], Sequence[str]],
    *,
    dealer: int = 0,
    hand_number: int = 1,
    basras: tuple[int, int] = (0, 0),
    totals: tuple[int, int] = (0, 0),
    carry: int = 0,
    floor_card: str = "KC",
    played: str = "5H",
) -> State:
    """Build the state before the 48th play of a hand, made so the hand ends with `final_piles`.

    The dealer holds only `played`, which trails on a floor of `floor_card`; both then go as
    leftovers to the last capturer, whose final pile must hold them.
    """
    owners = [seat for seat in (0, 1) if {floor_card, played} <= set(final_piles[seat])]
    if len(owners) != 1 or parse_card(floor_card) >> 2 == parse_card(played) >> 2:
        raise ValueError("the leftovers must be two cards of different ranks in one final pile")
    owner = owners[0]
    piles = [list(final_piles[0]), list(final_piles[1])]
    piles[owner] = [c for c in piles[owner] if c not in (floor_card, played)]
    hands: list[list[str]] = [[], []]
    hands[dealer] = [played]
    return build(
        (hands[0], hands[1]),
        [floor_card],
        (piles[0], piles[1]),
        dealer=dealer,
        hand_number=hand_number,
        last_capturer=owner,
        basras=basras,
        totals=totals,
        carry=carry,
    )


def act(state: State, card: str, **choice: Any) -> tuple[State, tuple[Event, ...]]:
    """Play `card` (a code) for the seat to move; `capture` may be given as codes."""
    if "capture" in choice and choice["capture"] is not None:
        choice["capture"] = parse_cards(choice["capture"])
    assert state.to_move is not None
    return apply(state, Action(state.to_move, parse_card(card), **choice))


def kept(state: State) -> bytes:
    """Keep a state's value apart from it: its pickled bytes, which share no object with it."""
    return pickle.dumps(state)


def assert_unchanged(state: State, before: bytes) -> None:
    """Assert that `state` still holds, field by field, the value `kept` took before."""
    assert state == pickle.loads(before), "the state changed"


def refusal(state: State, action: Action) -> RuleError:
    """Assert that `action` is refused and leaves `state` exactly as it was; return the error.

    The value before is kept as bytes, not as a copy of the State (a deep copy of a frozen
    all-tuple State shares every field with it), so a change anywhere would be seen.
    """
    before = kept(state)
    with pytest.raises(RuleError) as info:
        apply(state, action)
    assert_unchanged(state, before)
    assert info.value.message
    return info.value


def refused_play(state: State, card: str, **choice: Any) -> RuleError:
    """Like `act`, but the play must be refused without changing anything."""
    if "capture" in choice and choice["capture"] is not None:
        choice["capture"] = parse_cards(choice["capture"])
    assert state.to_move is not None
    return refusal(state, Action(state.to_move, parse_card(card), **choice))


def scene(
    hand: Sequence[str],
    floor: Sequence[str],
    *,
    seat: int = 1,
    other_hand: Sequence[str] | None = None,
    hand_number: int = 1,
    totals: tuple[int, int] = (0, 0),
    basras: tuple[int, int] = (0, 0),
    carry: int = 0,
) -> State:
    """A last-round state where `seat` (the non-dealer) is to move holding `hand` on `floor`.

    The dealer holds as many cards (`other_hand`, or the first spare ones in canonical order)
    and every other card is already in the dealer's pile, so the dealer captured last.
    """
    if other_hand is None:
        other_hand = [c for c in rest(hand, floor)][: len(hand)]
    hands: list[Sequence[str]] = [(), ()]
    hands[seat] = hand
    hands[1 - seat] = other_hand
    return build(
        (hands[0], hands[1]),
        floor,
        dealer=1 - seat,
        hand_number=hand_number,
        rest_to=1 - seat,
        totals=totals,
        basras=basras,
        carry=carry,
    )
