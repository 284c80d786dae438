"""docs/rules.md section 1: cards, text codes, canonical order, numeric values, the floor 7D."""

from __future__ import annotations

import pytest

from engine import Reason, RuleError, code, codes, parse_card, parse_cards, plans_for
from testkit.states import act, scene

RANKS = ["A", "2", "3", "4", "5", "6", "7", "8", "9", "10", "J", "Q", "K"]
SUITS = ["C", "D", "H", "S"]


def _plans(card: str, floor: list[str]) -> list[list[str]]:
    mask = 0
    for c in parse_cards(floor):
        mask |= 1 << c
    return [codes(p.cards) for p in plans_for(parse_card(card), mask)]


def test_deck_is_52_distinct_cards_of_13_ranks_in_4_suits() -> None:
    """One standard deck: every rank in every suit, each exactly once."""
    cards = [parse_card(r + s) for r in RANKS for s in SUITS]
    assert sorted(cards) == list(range(52))


def test_text_code_is_rank_then_suit_letter() -> None:
    """Codes such as AC, 7D, 10D, QS parse and print back unchanged."""
    for text in ("AC", "7D", "10D", "QS", "KH", "JC", "2S"):
        assert code(parse_card(text)) == text
    for r in RANKS:
        for s in SUITS:
            assert code(parse_card(r + s)) == r + s


@pytest.mark.parametrize(
    "text",
    ["", "A", "1C", "11D", "0S", "10", "TD", "ac", "10d", "Qs", "AX", " AC", "AC ", "C A", "1OD"],
)
def test_anything_but_a_card_code_is_refused(text: str) -> None:
    """Parsing refuses every other text with INVALID_CARD and a message."""
    with pytest.raises(RuleError) as info:
        parse_card(text)
    assert info.value.reason is Reason.INVALID_CARD
    assert info.value.message


def test_canonical_index_is_rank_position_times_four_plus_suit_position() -> None:
    """AC=0, AS=3, 2C=4, 10D=37, JC=40, QS=47, KS=51."""
    for r, rank in enumerate(RANKS):
        for s, suit in enumerate(SUITS):
            assert parse_card(rank + suit) == r * 4 + s
    assert parse_cards(["AC", "AS", "2C", "10D", "JC", "QS", "KS"]) == (0, 3, 4, 37, 40, 47, 51)


def test_canonical_order_is_by_rank_then_suit() -> None:
    """A < 2 < ... < 10 < J < Q < K, then C < D < H < S: plan cards come out in that order."""
    floor = ["KS", "2C", "AS", "10C", "JD", "QC", "AD", "9H"]
    (only,) = _plans("JC", floor)
    assert only == ["AD", "AS", "2C", "9H", "10C", "JD", "QC", "KS"]


def test_ace_counts_one_in_a_sum() -> None:
    """An Ace adds 1: A+2 makes 3, A+4 makes 5, A+A makes 2."""
    assert _plans("3C", ["AC", "2D"]) == [["AC", "2D"]]
    assert _plans("5S", ["AH", "4S", "KD"]) == [["AH", "4S"]]
    assert _plans("2H", ["AC", "AD"]) == [["AC", "AD"]]


def test_numeric_values_two_to_ten_are_their_number() -> None:
    """2..10 add up as their number: 2+8 and 3+7 make 10, 4+5 makes 9."""
    assert _plans("10S", ["2C", "8D", "3H", "7S"]) == [["2C", "3H", "7S", "8D"]]
    assert _plans("9C", ["4D", "5H"]) == [["4D", "5H"]]
    assert _plans("8C", ["4D", "5H"]) == []


def test_jack_queen_king_have_no_value_and_are_never_summed() -> None:
    """J, Q and K on the floor never join a sum, and a played Q or K sums nothing."""
    assert _plans("2C", ["JC", "QD", "KS", "AC", "AD"]) == [["AC", "AD"]]
    assert _plans("10C", ["QD", "KH", "JS"]) == []
    assert _plans("QH", ["5C", "7C", "AC"]) == []
    assert _plans("KH", ["10C", "3D"]) == []


def test_seven_of_diamonds_on_the_floor_is_an_ordinary_seven() -> None:
    """A floor 7D is taken by a played 7 (rank) and used in sums like any 7."""
    assert _plans("7C", ["7D"]) == [["7D"]]
    assert _plans("7S", ["7D", "3C", "4C"]) == [["3C", "4C", "7D"]]
    assert _plans("9S", ["7D", "2C", "QH"]) == [["2C", "7D"]]
    assert _plans("10H", ["7D", "3C"]) == [["3C", "7D"]]


def test_seven_of_diamonds_on_the_floor_is_not_swept_by_rank_of_other_sevens() -> None:
    """Only the played 7D sweeps: a played 7C on a floor 7D and a 5 takes just the 7D."""
    state = scene(["7C"], ["7D", "5S"])
    after, events = act(state, "7C")
    assert codes(after.floor) == ["5S"]
    assert not any(type(e).__name__ == "Swept" for e in events)
