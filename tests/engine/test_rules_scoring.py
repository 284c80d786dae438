"""docs/rules.md sections 4 and 5: leftovers, hand points, the 26/26 carry, the 121 target."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from engine import (
    Action,
    BasraScored,
    HandScored,
    HandStarted,
    LeftoversAwarded,
    MatchOver,
    Reason,
    State,
    Status,
    apply,
    check_state,
    codes,
    parse_card,
    parse_cards,
    score_hand,
)
from testkit import brute
from testkit.states import act, build, last_play, refusal, refused_play, scene, seed_for_dealer

CLUBS_DIAMONDS = [c for c in brute.ALL_CODES if c[-1] in "CD"]
HEARTS_SPADES = [c for c in brute.ALL_CODES if c[-1] in "HS"]


def piles(
    count0: int, with0: Sequence[str] = (), with1: Sequence[str] = ()
) -> tuple[list[str], list[str]]:
    """Split the deck: seat 0 gets `count0` cards including `with0`, seat 1 the rest."""
    pool = [c for c in brute.ALL_CODES if c not in with0 and c not in with1]
    pile0 = [*with0, *pool[: count0 - len(with0)]]
    pile1 = [c for c in brute.ALL_CODES if c not in pile0]
    assert set(with1) <= set(pile1)
    return pile0, pile1


def mask(cards: Sequence[str]) -> int:
    """Bitmask of card codes."""
    out = 0
    for c in parse_cards(cards):
        out |= 1 << c
    return out


def scored_of(events: Sequence[object]) -> HandScored:
    """The hand-scored event among `events`."""
    (scored,) = [e for e in events if isinstance(e, HandScored)]
    return scored


def expected_points(
    final: tuple[list[str], list[str]], basras: tuple[int, int], carry: int
) -> tuple[list[int], int]:
    """Points per seat and the new carry, from the independent scorer."""
    seats, new_carry = brute.score(final, basras, carry)
    return [s.total for s in seats], new_carry


# --- leftovers -------------------------------------------------------------------------


def test_leftovers_go_to_last_capturer_not_a_basra() -> None:
    """After the 48th play the floor goes to the last capturer (not the player who moved last);
    it counts for that player's cards and gives no Basra."""
    final = piles(24, with1=("KC", "5H"))
    state = last_play(final, dealer=0)
    assert state.last_capturer == 1
    after, events = act(state, "5H")
    assert LeftoversAwarded(1, parse_cards(["KC", "5H"])) in events
    assert not any(isinstance(e, BasraScored) for e in events)
    scored = scored_of(events)
    assert [s.cards for s in scored.seats] == [24, 28]
    assert [s.basras for s in scored.seats] == [0, 0]
    points, _ = expected_points(final, (0, 0), 0)
    assert [s.hand_total for s in scored.seats] == points
    assert after.totals == (points[0], points[1])


def test_leftovers_go_to_the_player_who_captured_on_the_last_play() -> None:
    """A last play that captures but leaves cards makes its player the last capturer."""
    hands: tuple[list[str], list[str]] = (["9S"], [])
    pile1 = [c for c in brute.ALL_CODES if c not in ("9S", "4C", "5C", "QD")][:30]
    state = build(hands, ["4C", "5C", "QD"], ([], pile1), dealer=0, rest_to=0, last_capturer=1)
    _, events = act(state, "9S")
    assert LeftoversAwarded(0, (parse_card("QD"),)) in events
    assert not any(isinstance(e, BasraScored) for e in events)
    assert [s.cards for s in scored_of(events).seats] == [52 - 30, 30]


def test_leftovers_count_for_majority_and_special_cards() -> None:
    """Leftovers 10D and AC lift the last capturer from 25 to 27 cards: majority, 10D, Ace."""
    final = piles(25, with1=("10D", "AC"))
    state = last_play(final, dealer=0, floor_card="10D", played="AC")
    _, events = act(state, "AC")
    seat1 = scored_of(events).seats[1]
    assert seat1.cards == 27
    assert seat1.majority == 30
    assert seat1.ten_of_diamonds == 3
    assert seat1.aces == sum(1 for c in final[1] if c.startswith("A"))


def test_leftovers_belong_to_nobody_when_nobody_captured() -> None:
    """With no capture in the hand the leftovers go to no one and nobody takes the majority.

    A real hand always has a capture (the first Jack played meets a non-empty floor), so the
    flow is checked on a partial state with the consistency check turned off, and the
    scoring on piles that do not hold all 52 cards.
    """
    seed = seed_for_dealer(0)
    state = State(
        seed=seed,
        seq=47,
        hand_number=1,
        dealer=0,
        to_move=0,
        deck=(),
        hands=(parse_cards(["5H"]), ()),
        floor=parse_cards(["KC", "9D", "QS"]),
        captured=((), ()),
        basras=(0, 0),
        last_capturer=None,
        unclaimed=(),
        totals=(0, 0),
        carry=0,
        status=Status.IN_PROGRESS,
        winner=None,
    )
    after, events = apply(state, Action(0, parse_card("5H")), check=False)
    assert LeftoversAwarded(None, parse_cards(["KC", "9D", "QS", "5H"])) in events
    scored = scored_of(events)
    assert [s.cards for s in scored.seats] == [0, 0]
    assert [s.hand_total for s in scored.seats] == [0, 0]
    assert scored.carry_after == 0
    assert after.totals == (0, 0)
    direct = score_hand(1, (mask(["AC", "2C"]), mask(["10D"])), (0, 0), 30, (0, 0))
    assert [s.majority for s in direct.seats] == [0, 0]
    assert [s.hand_total for s in direct.seats] == [3, 3]
    assert direct.carry_after == 30


# --- hand points -----------------------------------------------------------------------


def test_each_jack_and_ace_is_one_two_of_clubs_two_ten_of_diamonds_three_basra_ten() -> None:
    """Every scoring item, seat by seat, with no majority in play."""
    pile0 = ["JC", "JD", "AC", "2C", "10D", "5S", "KH"]
    pile1 = ["JH", "AS", "AD", "AH", "2D", "10C"]
    scored = score_hand(2, (mask(pile0), mask(pile1)), (3, 1), 0, (5, 6))
    s0, s1 = scored.seats
    assert (s0.jacks, s0.aces, s0.two_of_clubs, s0.ten_of_diamonds) == (2, 1, 2, 3)
    assert (s0.basras, s0.basra_points, s0.majority) == (3, 30, 0)
    assert s0.hand_total == 2 + 1 + 2 + 3 + 30
    assert s0.running_total == 5 + s0.hand_total
    assert (s1.jacks, s1.aces, s1.two_of_clubs, s1.ten_of_diamonds) == (1, 3, 0, 0)
    assert s1.hand_total == 1 + 3 + 10
    assert s1.running_total == 6 + s1.hand_total


def test_majority_needs_27_cards() -> None:
    """27 cards take 30; 26 do not."""
    p27 = piles(27)
    p26 = piles(26)
    s27 = score_hand(1, (mask(p27[0]), mask(p27[1])), (0, 0), 0, (0, 0))
    s26 = score_hand(1, (mask(p26[0]), mask(p26[1])), (0, 0), 0, (0, 0))
    assert [s.majority for s in s27.seats] == [30, 0]
    assert [s.majority for s in s26.seats] == [0, 0]
    p25 = piles(25)
    s25 = score_hand(1, (mask(p25[0]), mask(p25[1])), (0, 0), 0, (0, 0))
    assert [s.majority for s in s25.seats] == [0, 30]


def test_26_26_tie_carries_30() -> None:
    """A 26/26 hand gives nobody the majority and carries 30 into the next hand."""
    final = (CLUBS_DIAMONDS, HEARTS_SPADES)
    state = last_play(final, dealer=0, floor_card="KC", played="5D")
    after, events = act(state, "5D")
    scored = scored_of(events)
    assert [s.majority for s in scored.seats] == [0, 0]
    assert (scored.carry_before, scored.carry_after) == (0, 30)
    assert [s.hand_total for s in scored.seats] == [9, 4]
    assert after.carry == 30
    assert after.hand_number == 2
    assert after.status is Status.IN_PROGRESS


def test_repeated_ties_accumulate_carry() -> None:
    """Each further 26/26 adds another 30: 30 -> 60 -> 90."""
    final = (CLUBS_DIAMONDS, HEARTS_SPADES)
    carry = 30
    for hand in (2, 3):
        state = last_play(final, dealer=0, hand_number=hand, carry=carry, played="5D")
        after, events = act(state, "5D")
        scored = scored_of(events)
        assert (scored.carry_before, scored.carry_after) == (carry, carry + 30)
        assert [s.majority for s in scored.seats] == [0, 0]
        assert after.carry == carry + 30
        carry += 30


def test_tie_broken_takes_30_plus_the_whole_carry_and_the_carry_returns_to_0() -> None:
    """The next player with 27 or more takes 30 + carry; the carry resets."""
    final = piles(25, with1=("KC", "5H"))
    state = last_play(final, dealer=0, hand_number=3, carry=60)
    after, events = act(state, "5H")
    scored = scored_of(events)
    assert [s.majority for s in scored.seats] == [0, 90]
    assert (scored.carry_before, scored.carry_after) == (60, 0)
    assert after.carry == 0
    points, new_carry = expected_points(final, (0, 0), 60)
    assert [s.hand_total for s in scored.seats] == points
    assert new_carry == 0


def test_nobody_at_27_without_a_26_26_tie_keeps_the_carry() -> None:
    """Only possible when leftovers belong to nobody: no majority, the carry is unchanged."""
    p0 = brute.ALL_CODES[:20]
    p1 = brute.ALL_CODES[20:40]
    scored = score_hand(4, (mask(p0), mask(p1)), (0, 0), 60, (0, 0))
    assert [s.majority for s in scored.seats] == [0, 0]
    assert scored.carry_after == 60


# --- end of the match ----------------------------------------------------------------


def _finish(
    totals: tuple[int, int], final: tuple[list[str], list[str]], **kw: int
) -> tuple[State, tuple[object, ...]]:
    state = last_play(
        final,
        dealer=0,
        hand_number=kw.get("hand_number", 2),
        totals=totals,
        carry=kw.get("carry", 0),
        played="5D",
    )
    return act(state, "5D")


def test_one_player_at_121_or_more_wins() -> None:
    """Exactly one player reaching 121 after a hand wins; the match is over."""
    final = (CLUBS_DIAMONDS, HEARTS_SPADES)  # 26/26: 9 and 4 points
    after, events = _finish((112, 100), final)
    assert after.totals == (121, 104)
    assert events[-1] == MatchOver(0, (121, 104))
    assert after.status is Status.OVER
    assert after.winner == 0
    assert after.to_move is None
    assert not any(isinstance(e, HandStarted) for e in events)
    check_state(after)


def test_120_is_not_enough() -> None:
    """One point short of 121 starts another hand."""
    after, events = _finish((111, 100), (CLUBS_DIAMONDS, HEARTS_SPADES))
    assert after.totals == (120, 104)
    assert after.status is Status.IN_PROGRESS
    assert not any(isinstance(e, MatchOver) for e in events)
    assert HandStarted(3, 1) in events


def test_both_over_121_higher_wins() -> None:
    """Both at 121 or more: the higher total wins, even if it was behind before the hand."""
    after, events = _finish((118, 120), (CLUBS_DIAMONDS, HEARTS_SPADES))
    assert after.totals == (127, 124)
    assert events[-1] == MatchOver(0, (127, 124))
    assert after.winner == 0
    final = piles(25, with1=("KC", "5D"))
    points, _ = expected_points(final, (0, 0), 0)
    after, events = _finish((115, 110), final)
    assert after.totals == (115 + points[0], 110 + points[1])
    assert 121 <= after.totals[0] < after.totals[1]
    assert events[-1] == MatchOver(1, after.totals)
    assert after.winner == 1


def test_exact_tie_over_121_plays_another_hand() -> None:
    """Equal totals of 121 or more: an ordinary extra hand, dealer alternating; then check again."""
    after, events = _finish((115, 120), (CLUBS_DIAMONDS, HEARTS_SPADES))
    assert after.totals == (124, 124)
    assert after.status is Status.IN_PROGRESS
    assert after.winner is None
    assert not any(isinstance(e, MatchOver) for e in events)
    assert HandStarted(3, 1) in events
    assert after.dealer == 1
    assert after.to_move == 0
    assert after.carry == 30
    check_state(after)
    # The check repeats after the extra hand: 27 cards with the carry decide it.
    final = piles(25, with1=("KC", "5D"))
    state = last_play(final, dealer=1, hand_number=3, totals=(124, 124), carry=30, played="5D")
    ended, more = act(state, "5D")
    assert ended.status is Status.OVER
    assert ended.winner == 1
    assert more[-1] == MatchOver(1, ended.totals)


def test_target_is_checked_only_after_a_complete_hand() -> None:
    """A Basra mid-hand does not change the totals or end the match; the hand's end does."""
    state = scene(["10H", "KD"], ["10D", "4C", "6S"], seat=0, hand_number=2, totals=(120, 40))
    after, events = act(state, "10H")
    assert BasraScored(0, parse_card("10H")) in events
    assert after.totals == (120, 40)
    assert after.basras == (1, 0)
    assert after.status is Status.IN_PROGRESS


def test_no_move_is_accepted_once_the_match_is_over() -> None:
    """Every action on a finished match is refused with MATCH_OVER and changes nothing."""
    after, _ = _finish((112, 100), (CLUBS_DIAMONDS, HEARTS_SPADES))
    assert after.status is Status.OVER
    for seat in (0, 1):
        for card in (0, 25, 51):
            assert refusal(after, Action(seat, card)).reason is Reason.MATCH_OVER


@pytest.mark.parametrize("hand_number", [2, 5])
def test_hand_scores_add_to_running_totals(hand_number: int) -> None:
    """Running totals are the previous totals plus the hand's points."""
    final = piles(30, with0=("KC", "5D"))
    after, events = _finish((10, 20), final, hand_number=hand_number)
    scored = scored_of(events)
    points, _ = expected_points(final, (0, 0), 0)
    assert [s.hand_total for s in scored.seats] == points
    assert [s.running_total for s in scored.seats] == [10 + points[0], 20 + points[1]]
    assert after.totals == (10 + points[0], 20 + points[1])
    assert scored.hand_number == hand_number


def test_refused_play_at_hand_end_changes_nothing() -> None:
    """The last play of a hand, refused (wrong card), leaves everything as it was."""
    state = last_play((CLUBS_DIAMONDS, HEARTS_SPADES), dealer=0, played="5D")
    assert refused_play(state, "KS").reason is Reason.CARD_NOT_IN_HAND
    assert codes(state.hands[0]) == ["5D"]
