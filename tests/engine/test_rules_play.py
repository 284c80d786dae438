"""docs/rules.md 3: one play; J and 7D sweeps, Q/K, capture plans, choosing, piles, Basra."""

from __future__ import annotations

from engine import (
    BasraScored,
    Captured,
    CardPlayed,
    HandScored,
    Reason,
    Swept,
    Trailed,
    codes,
    legal_moves,
    parse_card,
    parse_cards,
)
from testkit import brute
from testkit.states import act, build, refused_play, scene

TEN_CARDS = ["AC", "2C", "3C", "4C", "5C", "6C", "8C", "9C", "10C", "2H"]


def _offered(state_hand: list[str], floor: list[str], card: str) -> list[list[str]]:
    state = scene(state_hand, floor)
    (move,) = [m for m in legal_moves(state) if m.card == parse_card(card)]
    return [codes(p.cards) for p in move.plans]


# --- J and 7D -------------------------------------------------------------------------


def test_jack_on_an_empty_floor_trails() -> None:
    """A J played on an empty floor captures nothing and stays there."""
    state = scene(["JC"], [])
    after, events = act(state, "JC")
    assert codes(after.floor) == ["JC"]
    assert events[:2] == (CardPlayed(1, parse_card("JC")), Trailed(1, parse_card("JC")))
    assert after.captured == state.captured
    assert after.last_capturer == state.last_capturer


def test_seven_of_diamonds_on_an_empty_floor_trails() -> None:
    """The 7D played on an empty floor captures nothing and stays there."""
    state = scene(["7D"], [])
    after, events = act(state, "7D")
    assert codes(after.floor) == ["7D"]
    assert Trailed(1, parse_card("7D")) in events
    assert after.basras == state.basras


def test_jack_sweeps_every_floor_card_including_queen_king_and_seven_of_diamonds() -> None:
    """A J takes the whole floor, faces and the floor 7D included."""
    floor = ["5C", "QD", "KH", "7D", "9S"]
    state = scene(["JC"], floor)
    after, events = act(state, "JC")
    assert after.floor == ()
    assert sorted(after.captured[1]) == sorted(parse_cards(["JC", *floor]))
    assert Swept(1, parse_card("JC"), tuple(sorted(parse_cards(floor)))) in events
    assert after.last_capturer == 1


def test_jack_sweep_is_never_a_basra() -> None:
    """Clearing the floor with a J scores nothing, whatever the floor held."""
    for floor in (["5C"], ["5C", "3D"], TEN_CARDS, ["QC", "KD"]):
        state = scene(["JH"], floor)
        after, events = act(state, "JH")
        assert after.floor == ()
        assert after.basras == state.basras
        assert not any(isinstance(e, BasraScored) for e in events)


def test_seven_of_diamonds_sweeps_the_whole_floor() -> None:
    """The played 7D takes every floor card, Q and K included, even when other 7s lie there."""
    floor = ["7C", "7H", "QS", "AC", "10D"]
    state = scene(["7D"], floor)
    after, events = act(state, "7D")
    assert after.floor == ()
    assert sorted(after.captured[1]) == sorted(parse_cards(["7D", *floor]))
    assert any(isinstance(e, Swept) for e in events)


def test_seven_of_diamonds_basra_needs_ten_or_fewer_cards_and_no_queen_or_king() -> None:
    """7D sweep: Basra with 1..10 floor cards and no Q/K; none with 11 cards or with a Q or K."""
    cases = [
        (["5C"], True),
        (TEN_CARDS, True),
        ([*TEN_CARDS, "3H"], False),
        (["AC", "QS"], False),
        (["AC", "KS"], False),
        (["JC", "2D"], True),  # a floor J (trailed earlier) is neither Q nor K
        (["7C", "7H", "7S"], True),
    ]
    for floor, basra in cases:
        state = scene(["7D"], floor)
        after, events = act(state, "7D")
        assert after.floor == (), floor
        assert after.basras[1] == state.basras[1] + basra, floor
        assert (BasraScored(1, parse_card("7D")) in events) is basra, floor


def test_seven_of_diamonds_basra_counts_cards_not_their_sum() -> None:
    """Floor values adding far beyond 10 still give the Basra when there are at most 10 cards."""
    floor = ["10C", "10H", "9S", "8D", "9C", "10S"]
    after, events = act(scene(["7D"], floor), "7D")
    assert any(isinstance(e, BasraScored) for e in events)
    assert after.basras[1] == 1


# --- Q and K ----------------------------------------------------------------------------


def test_queen_and_king_take_every_floor_card_of_their_rank_only() -> None:
    """KC on {KD, KS, QH, 3C} takes both kings; the queen and the 3 stay."""
    state = scene(["KC"], ["KD", "KS", "QH", "3C"])
    after, events = act(state, "KC")
    assert codes(after.floor) == ["QH", "3C"]
    captured = next(e for e in events if isinstance(e, Captured))
    assert codes(captured.cards) == ["KD", "KS"]
    assert not any(isinstance(e, BasraScored) for e in events)


def test_queen_or_king_trails_when_no_card_of_its_rank_lies_there() -> None:
    """QH on {5C, KD, JS} and KD on {QC, QD} trail."""
    after, events = act(scene(["QH"], ["5C", "KD", "JS"]), "QH")
    assert codes(after.floor) == ["5C", "KD", "JS", "QH"]
    assert any(isinstance(e, Trailed) for e in events)
    after, _ = act(scene(["KD"], ["QC", "QD"]), "KD")
    assert codes(after.floor) == ["QC", "QD", "KD"]


def test_queen_or_king_taking_the_last_floor_cards_is_a_basra() -> None:
    """A Q that takes every card left on the floor scores a Basra."""
    after, events = act(scene(["QH"], ["QS", "QC"]), "QH")
    assert after.floor == ()
    assert BasraScored(1, parse_card("QH")) in events
    assert after.basras == (0, 1)


def test_numeric_card_on_an_empty_floor_trails() -> None:
    """Any A..10 played on an empty floor stays there."""
    after, events = act(scene(["5D"], []), "5D")
    assert codes(after.floor) == ["5D"]
    assert any(isinstance(e, Trailed) for e in events)


# --- capture plans ---------------------------------------------------------------------


def test_same_rank_cards_are_always_taken() -> None:
    """Every plan of a 5 includes every floor 5, whatever groups it adds."""
    plans = _offered(["5C"], ["5D", "5H", "2C", "3D", "3H", "KS"], "5C")
    assert len(plans) > 1
    for plan in plans:
        assert {"5D", "5H"} <= set(plan)


def test_group_needs_two_or_more_cards() -> None:
    """A lone card of the right value is not a group: 2S on {AC} trails, 2S on {AC, AD} takes."""
    assert _offered(["2S"], ["AC"], "2S") == []
    assert _offered(["2S"], ["AC", "AD"], "2S") == [["AC", "AD"]]


def test_groups_may_overlap_and_a_plan_is_a_maximal_collection_of_disjoint_groups() -> None:
    """Example: 6H on {AC, 5C, 2C, 4C, 3C, 3D} offers exactly three plans, in order."""
    plans = _offered(["6H"], ["AC", "5C", "2C", "4C", "3C", "3D"], "6H")
    assert plans == [
        ["AC", "2C", "3C", "3D", "4C", "5C"],
        ["AC", "2C", "3C"],
        ["AC", "2C", "3D"],
    ]


def test_maximality_is_about_groups_so_one_plan_may_take_a_subset_of_another() -> None:
    """{AC, 2C, 3C} is offered although {AC, 5C, 2C, 4C, 3C, 3D} takes all of its cards."""
    plans = _offered(["6H"], ["AC", "5C", "2C", "4C", "3C", "3D"], "6H")
    assert set(plans[1]) < set(plans[0])


def test_non_maximal_collections_are_not_plans() -> None:
    """6C on {AC, 2D, 3H, 4S, 5D}: {AC, 5D} alone is not offered since 2+4 could join it."""
    plans = _offered(["6C"], ["AC", "2D", "3H", "4S", "5D", "QS"], "6C")
    assert plans == [["AC", "2D", "4S", "5D"], ["AC", "2D", "3H"]]
    assert ["AC", "5D"] not in plans
    assert ["2D", "4S"] not in plans


def test_collections_taking_the_same_cards_are_one_plan() -> None:
    """2D on four aces: three ways to pair them, one captured set, one plan."""
    assert _offered(["2D"], ["AC", "AD", "AH", "AS"], "2D") == [["AC", "AD", "AH", "AS"]]


def test_a_plan_that_takes_no_card_does_not_exist_so_the_card_trails() -> None:
    """8C on {4D, 5H, KS}: no rank, no group: no plan, the card trails."""
    state = scene(["8C"], ["4D", "5H", "KS"])
    (move,) = legal_moves(state)
    assert move.plans == ()
    assert move.trails
    after, events = act(state, "8C")
    assert codes(after.floor) == ["4D", "5H", "KS", "8C"]
    assert any(isinstance(e, Trailed) for e in events)


def test_plans_are_ordered_by_more_cards_first_then_sorted_canonical_indices() -> None:
    """10H on {5C, 5D, 2S, 3S}: the two 3-card plans (5C before 5D), then 5+5; ids 1, 2, 3."""
    state = scene(["10H"], ["5C", "5D", "2S", "3S"])
    (move,) = legal_moves(state)
    assert [codes(p.cards) for p in move.plans] == [
        ["2S", "3S", "5C"],
        ["2S", "3S", "5D"],
        ["5C", "5D"],
    ]
    assert [p.id for p in move.plans] == [1, 2, 3]


def test_ten_on_ten_four_six_queen_has_one_plan_and_the_queen_stays() -> None:
    """docs/rules.md example: 10 on {10S, 4H, 6C, QD} takes {10S, 4H, 6C}; no Basra."""
    state = scene(["10C"], ["10S", "4H", "6C", "QD"])
    after, events = act(state, "10C")
    assert codes(after.floor) == ["QD"]
    captured = next(e for e in events if isinstance(e, Captured))
    assert codes(captured.cards) == ["4H", "6C", "10S"]
    assert codes(captured.same_rank) == ["10S"]
    assert [codes(g) for g in captured.groups] == [["4H", "6C"]]
    assert not any(isinstance(e, BasraScored) for e in events)


CAP_FLOOR = ["AC", "AD", "AH", "2C", "2D", "3C", "3D", "4C", "4D", "5C", "6C"]


def test_at_most_the_first_twelve_plans_are_offered() -> None:
    """7H on a floor with more than 12 plans offers the first 12; the 13th cannot be named."""
    every = brute.all_maximal_captured_sets("7H", CAP_FLOOR)
    assert len(every) > 12
    state = scene(["7H"], CAP_FLOOR)
    (move,) = legal_moves(state)
    assert [set(codes(p.cards)) for p in move.plans] == [set(s) for s in every[:12]]
    assert refused_play(state, "7H", plan_id=13).reason is Reason.UNKNOWN_PLAN
    thirteenth = brute.canonical(list(every[12]))
    assert refused_play(state, "7H", capture=thirteenth).reason is Reason.ILLEGAL_CAPTURE
    after, _ = act(state, "7H", plan_id=12)
    assert set(codes(after.captured[1])) >= set(every[11])


# --- choosing -----------------------------------------------------------------------------


def test_capture_is_compulsory_card_with_plan_cannot_trail() -> None:
    """Asking to trail a card that has a plan is refused with MUST_CAPTURE; nothing changes."""
    state = scene(["5C", "KD"], ["5H", "2S"])
    assert refused_play(state, "5C", trail=True).reason is Reason.MUST_CAPTURE
    assert refused_play(state, "5C", capture=[]).reason is Reason.MUST_CAPTURE
    jack = scene(["JC"], ["2S"])
    assert refused_play(jack, "JC", trail=True).reason is Reason.MUST_CAPTURE


def test_player_may_choose_another_card_instead_of_capturing() -> None:
    """With a capturing 5 in hand, the player may still play a K that has no capture."""
    state = scene(["5C", "KD"], ["5H", "2S"])
    after, events = act(state, "KD", trail=True)
    assert codes(after.floor) == ["5H", "2S", "KD"]
    assert codes(after.hands[1]) == ["5C"]
    assert any(isinstance(e, Trailed) for e in events)


def test_card_without_plan_trails_with_no_choice_a_trail_request_or_an_empty_capture() -> None:
    """Three ways to write a trail give the same result."""
    state = scene(["8C"], ["4D", "5H"])
    ways: list[dict[str, object]] = [{}, {"trail": True}, {"capture": []}]
    results = {act(state, "8C", **kw)[0] for kw in ways}
    assert len(results) == 1


def test_one_plan_is_carried_out_without_an_id() -> None:
    """A card with exactly one plan needs no choice; naming it by id or cards gives the same."""
    state = scene(["9S"], ["7D", "2C", "QH"])
    plain = act(state, "9S")
    assert plain == act(state, "9S", plan_id=1)
    assert plain == act(state, "9S", capture=["2C", "7D"])
    assert codes(plain[0].floor) == ["QH"]


def test_several_plans_need_an_id_or_the_exact_cards_of_one() -> None:
    """No choice is refused with PLAN_REQUIRED; an id or the exact set (any order) is accepted."""
    state = scene(["10H"], ["5C", "5D", "2S", "3S"])
    assert refused_play(state, "10H").reason is Reason.PLAN_REQUIRED
    by_id, _ = act(state, "10H", plan_id=2)
    by_cards, _ = act(state, "10H", capture=["5D", "3S", "2S"])
    assert by_id == by_cards
    assert codes(by_id.floor) == ["5C"]
    third, _ = act(state, "10H", plan_id=3)
    assert codes(third.floor) == ["2S", "3S"]


def test_any_other_set_of_cards_is_refused() -> None:
    """Subsets, supersets, foreign cards, non-maximal and repeated cards: ILLEGAL_CAPTURE."""
    state = scene(["10H"], ["5C", "5D", "2S", "3S", "QH"])
    for capture in (
        ["5C"],
        ["2S", "3S"],
        ["5C", "5D", "QH"],
        ["5C", "5D", "2S", "3S"],
        ["5C", "5D", "KS"],
        ["5C", "5C"],
        ["5C", "5D", "5D"],
    ):
        error = refused_play(state, "10H", capture=capture)
        assert error.reason is Reason.ILLEGAL_CAPTURE, capture
    trailing = scene(["8C"], ["4D", "5H"])
    assert refused_play(trailing, "8C", capture=["4D"]).reason is Reason.ILLEGAL_CAPTURE


def test_unknown_plan_ids_are_refused() -> None:
    """Ids outside 1..number of plans are refused with UNKNOWN_PLAN, trailing cards included."""
    state = scene(["10H", "KD"], ["5C", "5D", "2S", "3S"])
    for plan_id in (0, -1, 4, 13, 10**9):
        assert refused_play(state, "10H", plan_id=plan_id).reason is Reason.UNKNOWN_PLAN
    assert refused_play(state, "KD", plan_id=1).reason is Reason.UNKNOWN_PLAN


# --- piles, trails and the Basra ---------------------------------------------------------


def test_capturing_card_goes_with_the_cards_it_took_to_the_players_pile() -> None:
    """The played card and its plan's cards join the pile; the seat becomes the last capturer."""
    state = scene(["9S", "KH"], ["4C", "5C", "QD"], seat=0)
    after, events = act(state, "9S")
    assert after.captured[0] == (*state.captured[0], *parse_cards(["9S", "4C", "5C"]))
    assert after.captured[1] == state.captured[1]
    assert codes(after.floor) == ["QD"]
    assert codes(after.hands[0]) == ["KH"]
    assert after.last_capturer == 0
    assert events[0] == CardPlayed(0, parse_card("9S"))
    assert isinstance(events[1], Captured)
    assert events[1].plan_id == 1


def test_trailed_card_stays_on_the_floor() -> None:
    """A trail adds the card at the end of the floor and changes no pile and no last capturer."""
    state = scene(["8C", "KH"], ["4D", "5H"], seat=0)
    after, _ = act(state, "8C")
    assert codes(after.floor) == ["4D", "5H", "8C"]
    assert after.captured == state.captured
    assert after.last_capturer == state.last_capturer == 1


def test_numeric_capture_that_clears_the_floor_is_a_basra() -> None:
    """10H on {10D, 4C, 6S} takes everything: Basra +1 for that seat, with its event."""
    state = scene(["10H"], ["10D", "4C", "6S"])
    after, events = act(state, "10H")
    assert after.floor == ()
    assert after.basras == (0, 1)
    assert events[-1] == BasraScored(1, parse_card("10H"))


def test_capture_that_leaves_cards_on_the_floor_is_not_a_basra() -> None:
    """A capture with one card left over scores nothing."""
    after, events = act(scene(["10H"], ["10D", "4C", "6S", "2H"]), "10H")
    assert codes(after.floor) == ["2H"]
    assert after.basras == (0, 0)
    assert not any(isinstance(e, BasraScored) for e in events)


def test_basra_on_the_last_play_of_a_hand_counts() -> None:
    """The 48th play clearing the floor scores a Basra in that hand's scoring."""
    hands: tuple[list[str], list[str]] = ([], ["5H"])
    floor = ["5C"]
    pile0 = [c for c in brute.ALL_CODES if c not in ("5H", "5C")][:30]
    state = build(hands, floor, (pile0, []), dealer=1, rest_to=1, last_capturer=0)
    after, events = act(state, "5H")
    assert BasraScored(1, parse_card("5H")) in events
    scored = next(e for e in events if isinstance(e, HandScored))
    assert scored.seats[1].basras == 1
    assert scored.seats[1].basra_points == 10
    assert not any(type(e).__name__ == "LeftoversAwarded" for e in events)
    assert after.hand_number == 2
    assert after.totals[1] == scored.seats[1].hand_total >= 10


def test_events_of_a_capture_come_in_order() -> None:
    """Card played, captured (plan id, cards, same-rank part, groups), then the Basra."""
    state = scene(["6H"], ["6C", "AC", "5D", "3S", "3D"])
    _, events = act(state, "6H")
    assert [type(e).__name__ for e in events] == ["CardPlayed", "Captured", "BasraScored"]
    captured = events[1]
    assert isinstance(captured, Captured)
    assert captured.plan_id == 1
    assert codes(captured.cards) == ["AC", "3D", "3S", "5D", "6C"]
    assert codes(captured.same_rank) == ["6C"]
    assert sorted(codes(g) for g in captured.groups) == [["3D", "3S"], ["AC", "5D"]]
