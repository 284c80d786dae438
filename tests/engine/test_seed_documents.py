"""The two source documents, statement by statement: deal, captures, sweeps, Basras, scoring.

000 is the rulebook with implementation notes, 003 the player's guide; their sentences and
positions are kept in tests/data/seeds/examples.json (played by test_seed_examples.py). The
tests here follow the statements that need a whole match or a built state. Where docs/rules.md
settles a point the sources leave open (naming a plan by its exact cards), docs/rules.md wins.
"""

from __future__ import annotations

import random

from engine import (
    BasraScored,
    Captured,
    CardsDealt,
    FloorFixed,
    HandScored,
    HandStarted,
    LeftoversAwarded,
    MatchOver,
    Reason,
    Status,
    Swept,
    Trailed,
    codes,
    legal_moves,
    new_match,
    parse_card,
    score_hand,
    seat_view,
)
from testkit import brute
from testkit.actions import play_match
from testkit.states import act, build, last_play, refused_play, scene

CD = [c for c in brute.ALL_CODES if c[-1] in "CD"]
HS = [c for c in brute.ALL_CODES if c[-1] in "HS"]


def _mask(cards: list[str]) -> int:
    out = 0
    for c in cards:
        out |= 1 << parse_card(c)
    return out


# --- players, deal ----------------------------------------------------------------------


def test_exactly_two_players_each_playing_for_himself() -> None:
    """FAQ "How many players?": two, each scoring only from their own pile (no teams)."""
    state, _ = new_match(b"players")
    assert len(state.hands) == len(state.captured) == len(state.totals) == 2
    scored = score_hand(1, (_mask(["JC", "AC"]), _mask(["JD"])), (1, 0), 0, (0, 0))
    assert [s.hand_total for s in scored.seats] == [12, 1]


def test_server_picks_the_first_dealer_then_the_dealer_alternates() -> None:
    """The first dealer comes from the seed; each following hand has the other dealer."""
    played = play_match(b"dealer", random.Random(0))
    starts = [e for step in played.events for e in step if isinstance(e, HandStarted)]
    assert starts[0].dealer == played.states[0].dealer
    assert [s.dealer for s in starts] == [(starts[0].dealer + i) % 2 for i in range(len(starts))]


def test_non_dealer_starts_the_play() -> None:
    """The first play of a match is the non-dealer's."""
    for i in range(10):
        state, _ = new_match(bytes([i, 1]))
        assert state.to_move == 1 - state.dealer


def test_faq_no_pass_one_card_every_turn() -> None:
    """FAQ "Can I pass?": no; the only moves are the cards of the hand."""
    state, _ = new_match(b"pass")
    moves = legal_moves(state)
    assert state.to_move is not None
    assert sorted(m.card for m in moves) == sorted(state.hands[state.to_move])
    assert all(m.plans or m.trails for m in moves)


def test_dealer_deals_four_to_each_player_and_four_face_up_to_the_floor() -> None:
    """The first three deals of a hand are 4 cards each: two players, then the floor."""
    _, events = new_match(b"deal")
    deals = [e for e in events if isinstance(e, CardsDealt)]
    assert [len(d.cards) for d in deals] == [4, 4, 4]
    assert deals[2].seat is None


def test_jack_or_seven_of_diamonds_on_the_initial_floor_is_returned_and_replaced() -> None:
    """Repeated until the four initial floor cards hold no J and no 7D."""
    seen = 0
    for i in range(60):
        state, events = new_match(bytes([i, 2]))
        fixes = [e for e in events if isinstance(e, FloorFixed)]
        seen += bool(fixes)
        assert len(state.floor) == 4
        assert not any(c >> 2 == 10 or c == 25 for c in state.floor)
        for fix in fixes:
            assert all(c >> 2 == 10 or c == 25 for c in fix.returned)
    assert seen > 5


def test_new_cards_each_with_no_new_floor_cards_until_the_deck_is_exhausted() -> None:
    """5 re-deals per hand of 4 cards to each player, never to the floor."""
    played = play_match(b"redeals", random.Random(1))
    per_hand: list[list[CardsDealt]] = []
    for step in played.events:
        for e in step:
            if isinstance(e, HandStarted):
                per_hand.append([])
            elif isinstance(e, CardsDealt):
                per_hand[-1].append(e)
    for deals in per_hand:
        assert [d.seat is None for d in deals] == [False, False, True] + [False] * 10


def test_eram_note_jack_or_seven_of_diamonds_on_an_empty_floor_is_left_there() -> None:
    """Implementation note: a J or 7D played onto an empty floor captures nothing."""
    for card in ("JS", "7D"):
        after, events = act(scene([card], []), card)
        assert codes(after.floor) == [card]
        assert any(isinstance(e, Trailed) for e in events)


# --- capture plans -------------------------------------------------------------------------


def test_same_rank_captures_all_floor_cards_of_its_rank() -> None:
    """Rule 1: a played 4 takes every floor 4."""
    after, _ = act(scene(["4S"], ["4C", "4D", "4H", "KC"]), "4S")
    assert codes(after.floor) == ["KC"]


def test_numeric_card_or_ace_captures_groups_adding_up_to_its_value() -> None:
    """Rule 2: 8 takes 3+5; an Ace has nothing smaller to add, so it takes by rank only."""
    after, _ = act(scene(["8H"], ["3C", "5D", "QH"]), "8H")
    assert codes(after.floor) == ["QH"]
    after, _ = act(scene(["AH"], ["AC", "KD"]), "AH")
    assert codes(after.floor) == ["KD"]


def test_example_ten_takes_the_floor_ten_and_four_plus_six_in_one_play() -> None:
    """Rule 3 example: a 10 takes the 10 and 4 + 6 together; here it clears the floor: Basra."""
    after, events = act(scene(["10H"], ["10D", "4C", "6S"]), "10H")
    captured = next(e for e in events if isinstance(e, Captured))
    assert codes(captured.same_rank) == ["10D"]
    assert [codes(g) for g in captured.groups] == [["4C", "6S"]]
    assert after.floor == ()
    assert any(isinstance(e, BasraScored) for e in events)


def test_one_floor_card_cannot_be_used_in_two_overlapping_groups() -> None:
    """Rule 4: 7 on {3, 4, 4}: 3+4 twice would reuse the 3, so one 4 always stays."""
    state = scene(["7H"], ["3C", "4D", "4S"])
    (move,) = legal_moves(state)
    assert [codes(p.cards) for p in move.plans] == [["3C", "4D"], ["3C", "4S"]]
    for plan in move.plans:
        assert len(set(plan.cards)) == len(plan.cards) == 2


def test_conflicting_partitions_each_get_an_id_and_the_player_chooses_by_id() -> None:
    """Rule 5: every overlapping alternative has its own id; the choice is made by that id."""
    state = scene(["7H"], ["3C", "4D", "4S"])
    (move,) = legal_moves(state)
    assert [p.id for p in move.plans] == [1, 2]
    assert refused_play(state, "7H").reason is Reason.PLAN_REQUIRED
    after, _ = act(state, "7H", plan_id=2)
    assert codes(after.floor) == ["4D"]


def test_capturing_is_compulsory_but_another_card_may_be_chosen() -> None:
    """Rule 6 and FAQ tip: a capturing card cannot be trailed; another card may be played."""
    state = scene(["8H", "QC"], ["3C", "5D"])
    assert refused_play(state, "8H", trail=True).reason is Reason.MUST_CAPTURE
    after, _ = act(state, "QC")
    assert codes(after.floor) == ["3C", "5D", "QC"]


def test_card_with_no_legal_capture_is_trailed() -> None:
    """Rule 7: 9 on {3, 5, K} has no capture and goes to the floor."""
    after, events = act(scene(["9H"], ["3C", "5D", "KH"]), "9H")
    assert codes(after.floor) == ["3C", "5D", "KH", "9H"]
    assert any(isinstance(e, Trailed) for e in events)


def test_queen_and_king_by_rank_only_jack_and_seven_of_diamonds_sweep_them_too() -> None:
    """Rule 8: Q takes Q only; J and 7D take Q and K along with everything."""
    after, _ = act(scene(["QD"], ["QC", "KC", "2C"]), "QD")
    assert codes(after.floor) == ["KC", "2C"]
    for card in ("JD", "7D"):
        after, events = act(scene([card], ["QC", "KC", "2C"]), card)
        assert after.floor == ()
        assert any(isinstance(e, Swept) for e in events)


def test_arbitrary_illegal_set_is_refused_with_no_change() -> None:
    """Capturing cards no plan takes is refused and the state stays as it was."""
    state = scene(["8H"], ["3C", "5D", "2S", "6H"])
    error = refused_play(state, "8H", capture=["3C", "2S"])
    assert error.reason is Reason.ILLEGAL_CAPTURE


def test_eram_note_all_offered_plans_up_to_twelve_are_shown_to_the_player() -> None:
    """The seat's view lists every offered plan of each card (never more than 12)."""
    floor = ["AC", "AD", "AH", "2C", "2D", "3C", "3D", "4C", "4D", "5C", "6C"]
    state = scene(["7H", "2H"], floor)
    view = seat_view(state, 1)
    plans = {m.card: m.plans for m in view.legal_moves}
    assert len(plans[parse_card("7H")]) == 12
    every_2h = brute.all_maximal_captured_sets("2H", floor)
    assert len(every_2h) > 1
    assert [codes(p.cards) for p in plans[parse_card("2H")]] == [
        brute.canonical(list(s)) for s in every_2h
    ]


def test_eram_note_exactly_one_plan_needs_no_choice() -> None:
    """With one plan the play is carried out as it is."""
    after, events = act(scene(["8H"], ["3C", "5D", "KS"]), "8H")
    assert codes(after.floor) == ["KS"]
    assert next(e for e in events if isinstance(e, Captured)).plan_id == 1


# --- Jack, 7D, Basra ------------------------------------------------------------------------


def test_faq_jack_sweeps_with_no_basra() -> None:
    """FAQ "Does the Jack give a Basra?": no, even when it clears a one-card floor."""
    after, events = act(scene(["JD"], ["9C"]), "JD")
    assert after.floor == ()
    assert after.basras == (0, 0)
    assert not any(isinstance(e, BasraScored) for e in events)


def test_faq_seven_of_diamonds_basra_with_ten_or_fewer_cards_and_no_queen_or_king() -> None:
    """FAQ "When does the 7D give a Basra?": 10 or fewer floor cards and no Q or K."""
    small = ["AC", "2C", "3C", "4C", "5C", "6C", "8C", "9C", "10C", "AH"]
    assert act(scene(["7D"], small), "7D")[0].basras == (0, 1)
    assert act(scene(["7D"], [*small, "2H"]), "7D")[0].basras == (0, 0)
    assert act(scene(["7D"], ["AC", "KH"]), "7D")[0].basras == (0, 0)


def test_seven_of_diamonds_test_is_the_card_count_not_the_sum() -> None:
    """Player's guide mistake: the 7D Basra does not depend on the sum of values."""
    assert act(scene(["7D"], ["10C", "10H", "10S", "9C"]), "7D")[0].basras == (0, 1)


def test_other_card_clearing_the_floor_is_a_basra_worth_ten() -> None:
    """Normal Basra: a capture by a card other than J or 7D that empties the floor."""
    after, events = act(scene(["5H"], ["2C", "3D", "5S"]), "5H")
    assert after.floor == ()
    assert BasraScored(1, parse_card("5H")) in events
    scored = score_hand(1, (0, _mask(["5H"])), (0, 1), 0, (0, 0))
    assert scored.seats[1].basra_points == 10


def test_basra_on_the_very_last_play_of_a_hand_counts() -> None:
    """A Basra on the 48th play is scored in that hand: KD takes the lone KC."""
    pile0 = [c for c in CD if c not in ("KC", "KD")]
    state = build(([], ["KD"]), ["KC"], (HS, pile0), dealer=1, last_capturer=0)
    _, events = act(state, "KD")
    assert BasraScored(1, parse_card("KD")) in events
    assert not any(isinstance(e, LeftoversAwarded) for e in events)
    scored = next(e for e in events if isinstance(e, HandScored))
    assert scored.seats[1].basras == 1
    assert scored.seats[1].hand_total == 9 + 10


# --- leftovers and scoring --------------------------------------------------------------------


def test_leftovers_go_to_the_last_capturer_and_are_no_basra() -> None:
    """Common mistake: the leftovers give no +10; they count for cards and special cards."""
    state = last_play((CD, HS), dealer=0, floor_card="10D", played="2C")
    _, events = act(state, "2C")
    award = next(e for e in events if isinstance(e, LeftoversAwarded))
    assert award.seat == 0
    assert not any(isinstance(e, BasraScored) for e in events)
    seat0 = next(e for e in events if isinstance(e, HandScored)).seats[0]
    assert (seat0.two_of_clubs, seat0.ten_of_diamonds, seat0.basras) == (2, 3, 0)


def test_special_cards_jack_and_ace_one_two_of_clubs_two_ten_of_diamonds_three() -> None:
    """Scoring table: J 1, A 1, 2C 2, 10D 3 (and nothing for any other card)."""
    for cards, points in (
        (["JH"], 1),
        (["AS"], 1),
        (["2C"], 2),
        (["10D"], 3),
        (["2D", "10C", "QS", "KS", "7D"], 0),
    ):
        assert score_hand(1, (_mask(cards), 0), (0, 0), 0, (0, 0)).seats[0].hand_total == points


def test_majority_of_27_cards_is_worth_30() -> None:
    """Scoring table: 27 or more captured cards give 30."""
    pile = brute.ALL_CODES[12:39]
    assert len(pile) == 27
    scored = score_hand(1, (_mask(pile), _mask(brute.ALL_CODES[:12] + brute.ALL_CODES[39:])),
                        (0, 0), 0, (0, 0))  # fmt: skip
    assert scored.seats[0].majority == 30


def test_faq_26_26_nobody_scores_the_majority_and_30_is_carried_accumulating() -> None:
    """FAQ "What if both players tie 26/26?": carried, and accumulating on repeats."""
    piles = (_mask(CD), _mask(HS))
    first = score_hand(1, piles, (0, 0), 0, (0, 0))
    second = score_hand(2, piles, (0, 0), first.carry_after, (0, 0))
    assert [s.majority for s in first.seats + second.seats] == [0, 0, 0, 0]
    assert (first.carry_after, second.carry_after) == (30, 60)


def test_faq_ace_is_worth_one_when_adding() -> None:
    """Player's guide FAQ: an Ace counts 1: 4 = A + 3 and 3 = A + A + A."""
    assert codes(act(scene(["4D"], ["AC", "3H"]), "4D")[0].floor) == []
    assert codes(act(scene(["3D"], ["AC", "AH", "AS"]), "3D")[0].floor) == []


def test_mistake_adding_a_queen_or_king_to_other_cards() -> None:
    """Q and K have no number: 10 trails on {Q, K}; 7 on {Q, 2, 5} takes only 2 + 5."""
    after, events = act(scene(["10D"], ["QC", "KC"]), "10D")
    assert any(isinstance(e, Trailed) for e in events)
    assert codes(after.floor) == ["QC", "KC", "10D"]
    after, _ = act(scene(["7S"], ["QH", "2C", "5C"]), "7S")
    assert codes(after.floor) == ["QH"]


def test_121_is_checked_after_a_complete_hand_and_an_exact_tie_plays_another_hand() -> None:
    """Only after a hand: one over wins, both over higher wins, exact tie another hand."""
    state = last_play((CD, HS), dealer=0, hand_number=2, totals=(115, 120), played="5D")
    after, events = act(state, "5D")
    assert after.totals == (124, 124)
    assert after.status is Status.IN_PROGRESS
    assert not any(isinstance(e, MatchOver) for e in events)
    assert HandStarted(3, 1) in events
    state = last_play((CD, HS), dealer=0, hand_number=2, totals=(113, 120), played="5D")
    after, events = act(state, "5D")
    assert after.totals == (122, 124)
    assert events[-1] == MatchOver(1, (122, 124))
