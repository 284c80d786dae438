"""The bot sees what its seat has seen and nothing else (docs/bot.md, "What the bot may know").

Three ways of showing it: the bot's modules cannot reach the state, the deck or the deal's
random stream; redealing every card the seat cannot see (under another match seed) never
changes an answer; and the same search told the opponent's true hand (a cheating twin, here
only) clearly beats it, so the honest bot really plays without that knowledge.
"""

from __future__ import annotations

import math
import random
import subprocess
import sys
from dataclasses import fields
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine import Action, State, Status, apply, new_match
from engine.bot import Budget, Level, search_hands, suggest
from engine.infoset import InformationSet
from engine.view import information_set
from testkit.actions import random_action
from testkit.hidden import redistribute_hidden

REPO = Path(__file__).resolve().parents[2]
# What the bot must not be able to reach: the state (it holds the opponent's hand, the deck
# order and the seed), the match flow and checks built on it, and the deal's random stream.
FORBIDDEN = (
    "engine.state",
    "engine.match",
    "engine.rng",
    "engine.validate",
    "engine.replay",
    "engine.fairness",
    "engine.view",
)
LEVELS = tuple(Level)
# Deals of the cheating twin's matches, each played twice with the seats swapped.
DEALS = 150


def test_the_information_set_has_no_field_for_hidden_things() -> None:
    """Own hand, floor, piles, counts and scores; the opponent's cards only as a count."""
    names = {f.name for f in fields(InformationSet)}
    assert names == {
        "seat",
        "seq",
        "hand_number",
        "dealer",
        "to_move",
        "hand",
        "floor",
        "captured",
        "basras",
        "totals",
        "carry",
        "last_capturer",
        "opponent_hand_size",
        "deck_size",
        "match_over",
    }


def test_the_unseen_cards_are_the_opponents_hand_and_the_deck() -> None:
    state, _ = new_match(b"unseen")
    seat = state.to_move
    assert seat is not None
    info = information_set(state, seat)
    hidden = {*state.hands[1 - seat], *state.deck}
    assert info.unseen_mask == sum(1 << c for c in hidden)
    assert info.opponent_hand_size == len(state.hands[1 - seat])
    assert info.deck_size == len(state.deck)


def test_the_bot_modules_import_nothing_that_reaches_the_state_or_the_deal() -> None:
    """Loaded alone (without the engine package's own __init__, which re-exports the whole
    engine for other callers), the bot imports none of the forbidden modules and plays."""
    program = f"""
import sys, types
FORBIDDEN = {FORBIDDEN!r}
package = types.ModuleType("engine")
package.__path__ = [{str(REPO / "engine")!r}]
sys.modules["engine"] = package

class Refuse:
    def find_spec(self, name, path=None, target=None):
        if name in FORBIDDEN:
            raise ImportError("the bot reached " + name)
        return None

sys.meta_path.insert(0, Refuse())
from engine.bot import Level, suggest
from engine.infoset import InformationSet
from engine.cards import parse_cards

info = InformationSet(
    seat=0, seq=0, hand_number=1, dealer=1, to_move=0,
    hand=parse_cards(["5H", "JC", "KD", "2C"]), floor=parse_cards(["5C", "3D", "9S", "QH"]),
    captured=((), ()), basras=(0, 0), totals=(0, 0), carry=0, last_capturer=None,
    opponent_hand_size=4, deck_size=40, match_over=False,
)
for level in Level:
    suggest(info, level)
loaded = sorted(name for name in sys.modules if name == "engine" or name.startswith("engine."))
print(" ".join(loaded))
"""
    done = subprocess.run(
        [sys.executable, "-c", program],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    loaded = set(done.stdout.split())
    assert "engine.bot.search" in loaded
    assert not loaded & set(FORBIDDEN)


def _reach(seed: bytes, plays: int) -> State:
    """The state after up to `plays` random plays of the match of `seed` (still going on)."""
    rnd = random.Random(seed)
    state, _ = new_match(seed)
    for _ in range(plays):
        after, _events = apply(state, random_action(state, rnd))
        if after.status is Status.OVER:
            break
        state = after
    return state


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.binary(min_size=1, max_size=8),
    plays=st.integers(min_value=0, max_value=150),
    level=st.sampled_from(LEVELS),
    bot_seed=st.binary(max_size=8),
    redeal=st.integers(min_value=0, max_value=2**32),
)
def test_redealing_the_unseen_cards_never_changes_the_answer(
    seed: bytes, plays: int, level: Level, bot_seed: bytes, redeal: int
) -> None:
    """Metamorphic: the opponent's hand, the deck and the seed drawn again, same answer."""
    state = _reach(seed, plays)
    seat = state.to_move
    assert seat is not None
    other = redistribute_hidden(state, seat, random.Random(redeal))
    budget = Budget(6, 900)
    answer = suggest(information_set(state, seat), level, bot_seed, budget)
    assert suggest(information_set(other, seat), level, bot_seed, budget) == answer


def _cheating_twin(state: State, budget: Budget) -> Action:
    """The STRONG search told the opponent's true hand: one deal, the real one."""
    seat = state.to_move
    assert seat is not None
    truth = tuple(sorted(state.hands[1 - seat]))
    told = search_hands(information_set(state, seat), [truth], budget)
    return Action(seat, told.card, told.plan_id)


def _honest(state: State, budget: Budget) -> Action:
    seat = state.to_move
    assert seat is not None
    found = suggest(information_set(state, seat), Level.STRONG, b"", budget)
    return Action(seat, found.card, found.plan_id)


@pytest.mark.slow
def test_the_cheating_twin_clearly_beats_the_honest_bot() -> None:
    """Over 300 matches (150 deals, seats swapped), the twin that knows the opponent's hand
    wins far more than half: the honest bot's play lacks exactly that knowledge."""
    budget = Budget(2, 200)
    wins = margin = hands = 0
    for number in range(DEALS):
        for cheater in (0, 1):
            state, _ = new_match(b"twin" + number.to_bytes(2, "big"))
            while state.status is Status.IN_PROGRESS:
                play = _cheating_twin if state.to_move == cheater else _honest
                state, _ = apply(state, play(state, budget))
            wins += state.winner == cheater
            margin += state.totals[cheater] - state.totals[1 - cheater]
            hands += state.hand_number
    matches = 2 * DEALS
    rate = wins / matches
    # Wilson lower bound at z = 3.29 (99.9 %): above one half means "clearly", not luck.
    z = 3.29
    centre = rate + z * z / (2 * matches)
    spread = z * math.sqrt(rate * (1 - rate) / matches + z * z / (4 * matches * matches))
    assert (centre - spread) / (1 + z * z / matches) > 0.5, (wins, matches)
    assert margin / hands > 0
