"""The fairness verifier: honest matches pass, and each kind of cheating is named where it is."""

from __future__ import annotations

import random
import re
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import engine
from engine import Action, CardsDealt, Event, FloorFixed, HiddenDeal, rng
from engine.cards import parse_cards
from engine.fairness import Finding, actions_from_events, hand_deals, verify
from engine.replay import ReplayResult
from testkit.actions import play_match

DOCS = Path(__file__).resolve().parents[2] / "docs" / "determinism.md"


def play(seed: bytes, rnd: random.Random) -> tuple[list[Action], list[tuple[Event, ...]]]:
    """Play a whole match with random legal actions; return actions and events per call."""
    played = play_match(seed, rnd, any_spelling=False)
    return list(played.actions), list(played.events)


def seen_by(calls: list[tuple[Event, ...]], seat: int) -> list[Event | HiddenDeal]:
    """The events one seat received over the match, as a gateway forwards them."""
    return [e for events in calls for e in engine.seat_events(events, seat)]


@pytest.fixture(scope="module")
def match() -> tuple[bytes, list[Action], list[tuple[Event, ...]]]:
    """One whole match with at least one floor fix."""
    seed = b"fairness"
    actions, calls = play(seed, random.Random(5))
    assert any(isinstance(e, FloorFixed) for events in calls for e in events)
    return seed, actions, calls


def test_honest_match_passes_and_counts_what_it_checked(
    match: tuple[bytes, list[Action], list[tuple[Event, ...]]],
) -> None:
    seed, actions, calls = match
    everything = [e for events in calls for e in events]
    verdict = verify(seed, rng.commitment(seed), actions)
    assert verdict.honest and verdict.discrepancy is None
    assert verdict.match_over
    assert verdict.actions_applied == len(actions)
    assert verdict.hands == sum(isinstance(e, engine.HandStarted) for e in everything)
    assert verdict.deals_checked == sum(isinstance(e, CardsDealt) for e in everything)
    assert verdict.fixes_checked == sum(isinstance(e, FloorFixed) for e in everything)
    assert verdict.deals_checked == 13 * verdict.hands  # 3 first deals and 10 later ones
    assert verdict.hands >= 2  # so hands after the first, dealt by the other seat, are covered


@settings(max_examples=15, deadline=None)
@given(
    seed=st.binary(min_size=1, max_size=64),
    play_seed=st.integers(0, 2**32),
    seat=st.sampled_from((0, 1)),
)
def test_every_honest_match_passes_with_either_seats_record(
    seed: bytes, play_seed: int, seat: int
) -> None:
    actions, calls = play(seed, random.Random(play_seed))
    observed = seen_by(calls, seat)
    verdict = verify(seed, rng.commitment(seed), actions, observed=observed, seat=seat)
    assert verdict.honest, verdict.discrepancy
    assert verdict.observed_checked == verdict.deals_checked + verdict.hands + verdict.fixes_checked


def test_actions_can_be_read_back_from_a_seats_own_events(
    match: tuple[bytes, list[Action], list[tuple[Event, ...]]],
) -> None:
    seed, actions, calls = match
    for seat in (0, 1):
        recovered = actions_from_events(seen_by(calls, seat))
        assert [(a.seat, a.card) for a in recovered] == [(a.seat, a.card) for a in actions]
        assert engine.replay(seed, recovered).state == engine.replay(seed, actions).state


def test_a_partial_record_of_a_match_in_progress_passes(
    match: tuple[bytes, list[Action], list[tuple[Event, ...]]],
) -> None:
    seed, actions, calls = match
    verdict = verify(
        seed, rng.commitment(seed), actions[:60], observed=seen_by(calls[:61], 0), seat=0
    )
    assert verdict.honest, verdict.discrepancy
    assert not verdict.match_over
    assert verdict.actions_applied == 60


def test_a_revealed_seed_that_is_not_the_committed_one_is_caught(
    match: tuple[bytes, list[Action], list[tuple[Event, ...]]],
) -> None:
    seed, actions, _ = match
    verdict = verify(b"another seed", rng.commitment(seed), actions)
    assert verdict.discrepancy is not None
    assert verdict.discrepancy.finding is Finding.COMMITMENT_MISMATCH
    assert verdict.actions_applied == 0


@pytest.mark.parametrize("seed", [b"", bytes(65)])
def test_a_seed_of_impossible_length_is_named(seed: bytes) -> None:
    verdict = verify(seed, rng.commitment(seed), [])
    assert verdict.discrepancy is not None
    assert verdict.discrepancy.finding is Finding.INVALID_SEED


def test_deals_shown_from_another_shuffle_are_caught_at_the_first_differing_deal(
    match: tuple[bytes, list[Action], list[tuple[Event, ...]]],
) -> None:
    """A server that deals seat 0 other cards than the seed gives is caught by seat 0."""
    seed, actions, calls = match
    observed = seen_by(calls, 0)
    deals = [i for i, e in enumerate(observed) if isinstance(e, CardsDealt) and e.seat == 0]
    target = deals[3]
    dealt = observed[target]
    assert isinstance(dealt, CardsDealt)
    observed[target] = replace(dealt, cards=tuple(reversed(dealt.cards)))
    verdict = verify(seed, rng.commitment(seed), actions, observed=observed, seat=0)
    assert verdict.discrepancy is not None
    assert verdict.discrepancy.finding is Finding.OBSERVED_MISMATCH
    assert verdict.discrepancy.index is not None
    assert verdict.observed_checked == verdict.discrepancy.index > 0
    assert "seat 0 gets" in verdict.discrepancy.message


def test_a_hidden_deal_with_a_wrong_count_is_caught(
    match: tuple[bytes, list[Action], list[tuple[Event, ...]]],
) -> None:
    seed, actions, calls = match
    observed = seen_by(calls, 1)
    hidden = next(i for i, e in enumerate(observed) if isinstance(e, HiddenDeal))
    observed[hidden] = HiddenDeal(0, 5)
    verdict = verify(seed, rng.commitment(seed), actions, observed=observed, seat=1)
    assert verdict.discrepancy is not None
    assert verdict.discrepancy.finding is Finding.OBSERVED_MISMATCH
    assert "5 hidden cards" in verdict.discrepancy.message


def test_a_record_longer_or_shorter_than_the_actions_is_named(
    match: tuple[bytes, list[Action], list[tuple[Event, ...]]],
) -> None:
    seed, actions, calls = match
    observed = seen_by(calls, 0)
    short = verify(seed, rng.commitment(seed), actions[:50], observed=observed, seat=0)
    assert short.discrepancy is not None and short.discrepancy.finding is Finding.OBSERVED_EXTRA
    long = verify(seed, rng.commitment(seed), actions, observed=seen_by(calls[:20], 0), seat=0)
    assert long.discrepancy is not None and long.discrepancy.finding is Finding.OBSERVED_MISSING


def test_an_illegal_recorded_action_is_named_with_its_index(
    match: tuple[bytes, list[Action], list[tuple[Event, ...]]],
) -> None:
    seed, actions, _ = match
    forged = [*actions[:7], replace(actions[7], seat=1 - actions[7].seat), *actions[8:]]
    verdict = verify(seed, rng.commitment(seed), forged)
    assert verdict.discrepancy is not None
    assert verdict.discrepancy.finding is Finding.ACTION_REFUSED
    assert verdict.discrepancy.index == 7
    assert verdict.actions_applied == 7


def test_a_replay_that_deals_otherwise_than_the_seed_is_caught(
    match: tuple[bytes, list[Action], list[tuple[Event, ...]]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The verifier recomputes deals itself, so even a dishonest match flow is caught."""
    seed, actions, _ = match
    honest = engine.replay(seed, actions)
    events = list(honest.events)
    floor = next(i for i, e in enumerate(events) if isinstance(e, CardsDealt) and e.seat is None)
    later = [i for i, e in enumerate(events) if isinstance(e, CardsDealt)][5]
    first, second = events[floor], events[later]
    assert isinstance(first, CardsDealt) and isinstance(second, CardsDealt)
    events[floor] = replace(first, cards=(second.cards[0], *first.cards[1:]))
    events[later] = replace(second, cards=(first.cards[0], *second.cards[1:]))

    def crooked(*args: object, **kwargs: object) -> ReplayResult:
        return replace(honest, events=tuple(events))

    monkeypatch.setattr("engine.fairness.replay", crooked)
    verdict = verify(seed, rng.commitment(seed), actions)
    assert verdict.discrepancy is not None
    assert verdict.discrepancy.finding is Finding.DEAL_MISMATCH
    assert "floor" in verdict.discrepancy.message


def test_a_replay_that_skips_a_deal_is_caught(
    match: tuple[bytes, list[Action], list[tuple[Event, ...]]], monkeypatch: pytest.MonkeyPatch
) -> None:
    seed, actions, _ = match
    honest = engine.replay(seed, actions)
    last_deal = max(i for i, e in enumerate(honest.events) if isinstance(e, CardsDealt))
    shortened = honest.events[:last_deal] + honest.events[last_deal + 1 :]
    monkeypatch.setattr("engine.fairness.replay", lambda *a, **k: replace(honest, events=shortened))
    verdict = verify(seed, rng.commitment(seed), actions)
    assert verdict.discrepancy is not None
    assert verdict.discrepancy.finding is Finding.DEAL_MISMATCH


def test_a_record_needs_its_seat() -> None:
    with pytest.raises(ValueError, match="seat"):
        verify(b"x", rng.commitment(b"x"), [], observed=[])


def _vectors() -> list[dict[str, str]]:
    blocks = re.findall(r"```vector\n(.*?)```", DOCS.read_text(), re.S)
    parsed = []
    for block in blocks:
        fields: dict[str, str] = {}
        for line in block.strip().splitlines():
            key, _, value = line.partition(": ")
            fields[key] = value
        parsed.append(fields)
    return parsed


@pytest.mark.parametrize("vector", _vectors(), ids=lambda v: v["seed"])
def test_recomputed_deals_match_the_documented_vectors(vector: dict[str, str]) -> None:
    """hand_deals follows docs/determinism.md: the same hands, floor, fixes and undealt order."""
    seed = bytes.fromhex(vector["seed"])
    dealer = int(vector["first dealer"])
    deals = hand_deals(seed, 1)
    assert deals[0] == engine.HandStarted(1, dealer)
    assert deals[1] == CardsDealt(1 - dealer, parse_cards(vector["non-dealer hand"].split()))
    assert deals[2] == CardsDealt(dealer, parse_cards(vector["dealer hand"].split()))
    assert deals[3] == CardsDealt(None, parse_cards(vector["floor dealt"].split()))
    fixes = [e for e in deals if isinstance(e, FloorFixed)]
    documented = sorted(k for k in vector if k.startswith("fix "))
    assert len(fixes) == len(documented)
    for fix, key in zip(fixes, documented, strict=True):
        returned, replacements = vector[key].split(" -> ")
        assert fix == FloorFixed(parse_cards(returned.split()), parse_cards(replacements.split()))
    later = [c for e in deals[4 + len(fixes) :] if isinstance(e, CardsDealt) for c in e.cards]
    assert later == list(parse_cards(vector["undealt"].split()))
