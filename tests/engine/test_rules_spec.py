"""docs/rules.md is the specification: every rule it states is proved by a named test.

PROOFS maps each rule id of the page to the tests that prove the rule. The page and the map
must agree both ways, and every named test must exist, so a rule cannot be added, renamed or
dropped on one side only. The rules that no other module tests directly (the order of the
checks, the order of the events, the groups a plan reports, the searches the work bound
spares) are proved here.
"""

from __future__ import annotations

import ast
import random
import re
from dataclasses import replace

import pytest

from engine import (
    Action,
    BasraScored,
    Captured,
    CardPlayed,
    CardsDealt,
    Event,
    FloorFixed,
    HandScored,
    HandStarted,
    LeftoversAwarded,
    MatchOver,
    Reason,
    RuleError,
    State,
    Swept,
    Trailed,
    codes,
    parse_card,
    parse_cards,
    plans_for,
)
from engine.cards import mask_of
from testkit.actions import play_match
from testkit.rule_sources import REPO, RULES_PAGE, cited_rules, sections, stated_rules
from testkit.states import build, refusal, scene

CARDS = "tests/engine/test_rules_cards.py"
DEAL = "tests/engine/test_rules_deal.py"
PLAY = "tests/engine/test_rules_play.py"
SCORING = "tests/engine/test_rules_scoring.py"
REFUSALS = "tests/engine/test_engine_refusals.py"
SEEDS = "tests/engine/test_seed_documents.py"
VECTORS = "tests/engine/test_vectors.py"
PROPERTIES = "tests/engine/test_properties.py"
DETERMINISM = "tests/engine/test_determinism.py"
BRUTE = "tests/engine/test_brute_force.py"
LEGAL = "tests/engine/test_legal_actions.py"
SPEC = "tests/engine/test_rules_spec.py"
GOLDEN = "tests/golden/test_golden_rules.py"

# Rule id -> the tests that prove it ("path::function"; a parametrized test by its function).
PROOFS: dict[str, tuple[str, ...]] = {
    "cards.deck": (f"{CARDS}::test_deck_is_52_distinct_cards_of_13_ranks_in_4_suits",),
    "cards.code": (
        f"{CARDS}::test_text_code_is_rank_then_suit_letter",
        f"{CARDS}::test_anything_but_a_card_code_is_refused",
    ),
    "cards.order": (
        f"{CARDS}::test_canonical_index_is_rank_position_times_four_plus_suit_position",
        f"{CARDS}::test_canonical_order_is_by_rank_then_suit",
    ),
    "cards.values": (
        f"{CARDS}::test_ace_counts_one_in_a_sum",
        f"{CARDS}::test_numeric_values_two_to_ten_are_their_number",
        f"{CARDS}::test_jack_queen_king_have_no_value_and_are_never_summed",
    ),
    "cards.floor-seven": (
        f"{CARDS}::test_seven_of_diamonds_on_the_floor_is_an_ordinary_seven",
        f"{CARDS}::test_seven_of_diamonds_on_the_floor_is_not_swept_by_rank_of_other_sevens",
    ),
    "match.seats": (
        f"{DEAL}::test_two_players_no_pass",
        f"{SEEDS}::test_exactly_two_players_each_playing_for_himself",
    ),
    "match.dealer": (
        f"{DEAL}::test_first_dealer_is_chosen_at_random_from_the_seed",
        f"{DEAL}::test_dealer_alternates_every_hand",
    ),
    "deal.first": (f"{DEAL}::test_4_4_4_deal_from_the_top_non_dealer_first",),
    "deal.floor-fix": (
        f"{DEAL}::test_floor_fix_returns_jacks_and_seven_of_diamonds_and_reshuffles",
        f"{DEAL}::test_fresh_floor_never_holds_a_jack_or_the_seven_of_diamonds",
    ),
    "deal.rounds": (
        f"{DEAL}::test_when_both_hands_are_empty_four_more_each_and_none_to_the_floor",
        f"{DEAL}::test_6_rounds_48_plays_per_hand",
    ),
    "turn.order": (
        f"{DEAL}::test_non_dealer_starts_every_hand_and_every_round",
        f"{DEAL}::test_players_alternate_single_plays",
        f"{DEAL}::test_two_players_no_pass",
    ),
    "play.jack": (
        f"{PLAY}::test_jack_on_an_empty_floor_trails",
        f"{PLAY}::test_jack_sweeps_every_floor_card_including_queen_king_and_seven_of_diamonds",
        f"{PLAY}::test_jack_sweep_is_never_a_basra",
    ),
    "play.seven-of-diamonds": (
        f"{PLAY}::test_seven_of_diamonds_on_an_empty_floor_trails",
        f"{PLAY}::test_seven_of_diamonds_sweeps_the_whole_floor",
        f"{PLAY}::test_seven_of_diamonds_basra_needs_ten_or_fewer_cards_and_no_queen_or_king",
        f"{PLAY}::test_seven_of_diamonds_basra_counts_cards_not_their_sum",
    ),
    "play.face": (
        f"{PLAY}::test_queen_and_king_take_every_floor_card_of_their_rank_only",
        f"{PLAY}::test_queen_or_king_trails_when_no_card_of_its_rank_lies_there",
    ),
    "play.number": (
        f"{PLAY}::test_numeric_card_on_an_empty_floor_trails",
        f"{PLAY}::test_a_plan_that_takes_no_card_does_not_exist_so_the_card_trails",
        f"{VECTORS}::test_plan_vector_engine",
    ),
    "plans.same-rank": (f"{PLAY}::test_same_rank_cards_are_always_taken",),
    "plans.groups": (
        f"{PLAY}::test_group_needs_two_or_more_cards",
        f"{BRUTE}::test_engine_plans_equal_brute_force_on_random_floors",
        f"{BRUTE}::test_engine_plans_equal_brute_force_on_small_numeric_floors",
    ),
    "plans.maximal": (
        f"{PLAY}::test_groups_may_overlap_and_a_plan_is_a_maximal_collection_of_disjoint_groups",
        f"{PLAY}::test_non_maximal_collections_are_not_plans",
    ),
    "plans.subset": (
        f"{PLAY}::test_maximality_is_about_groups_so_one_plan_may_take_a_subset_of_another",
        f"{SPEC}::test_the_examples_of_the_plan_rules_are_what_the_engine_offers",
    ),
    "plans.one-per-set": (f"{PLAY}::test_collections_taking_the_same_cards_are_one_plan",),
    "plans.nonempty": (
        f"{PLAY}::test_a_plan_that_takes_no_card_does_not_exist_so_the_card_trails",
    ),
    "plans.order": (
        f"{PLAY}::test_plans_are_ordered_by_more_cards_first_then_sorted_canonical_indices",
        f"{VECTORS}::test_plan_vector_engine",
    ),
    "plans.limit": (
        f"{PLAY}::test_at_most_the_first_twelve_plans_are_offered",
        f"{BRUTE}::test_cap_keeps_the_first_twelve_plans_in_order",
    ),
    "choose.compulsory": (
        f"{PLAY}::test_capture_is_compulsory_card_with_plan_cannot_trail",
        f"{PLAY}::test_player_may_choose_another_card_instead_of_capturing",
    ),
    "choose.one": (f"{PLAY}::test_one_plan_is_carried_out_without_an_id",),
    "choose.several": (
        f"{PLAY}::test_several_plans_need_an_id_or_the_exact_cards_of_one",
        f"{PLAY}::test_any_other_set_of_cards_is_refused",
    ),
    "choose.refusal": (
        f"{REFUSALS}::test_refusals_on_a_real_match_change_nothing",
        f"{PROPERTIES}::test_random_matches_keep_every_property",
    ),
    "play.pile": (
        f"{PLAY}::test_capturing_card_goes_with_the_cards_it_took_to_the_players_pile",
        f"{PLAY}::test_trailed_card_stays_on_the_floor",
    ),
    "basra.clear": (
        f"{PLAY}::test_numeric_capture_that_clears_the_floor_is_a_basra",
        f"{PLAY}::test_capture_that_leaves_cards_on_the_floor_is_not_a_basra",
        f"{PLAY}::test_queen_or_king_taking_the_last_floor_cards_is_a_basra",
        f"{PLAY}::test_basra_on_the_last_play_of_a_hand_counts",
    ),
    "hand.leftovers": (
        f"{SCORING}::test_leftovers_go_to_last_capturer_not_a_basra",
        f"{SCORING}::test_leftovers_go_to_the_player_who_captured_on_the_last_play",
        f"{SCORING}::test_leftovers_count_for_majority_and_special_cards",
    ),
    "hand.unclaimed": (f"{SCORING}::test_leftovers_belong_to_nobody_when_nobody_captured",),
    "score.cards": (
        f"{SCORING}::test_each_jack_and_ace_is_one_two_of_clubs_two_ten_of_diamonds_three_basra_ten",
        f"{VECTORS}::test_score_vector_engine",
    ),
    "score.majority": (
        f"{SCORING}::test_majority_needs_27_cards",
        f"{SCORING}::test_tie_broken_takes_30_plus_the_whole_carry_and_the_carry_returns_to_0",
    ),
    "score.tie": (
        f"{SCORING}::test_26_26_tie_carries_30",
        f"{SCORING}::test_repeated_ties_accumulate_carry",
    ),
    "score.no-majority": (f"{SCORING}::test_nobody_at_27_without_a_26_26_tie_keeps_the_carry",),
    "score.totals": (f"{SCORING}::test_hand_scores_add_to_running_totals",),
    "end.target": (
        f"{SCORING}::test_one_player_at_121_or_more_wins",
        f"{SCORING}::test_120_is_not_enough",
        f"{SCORING}::test_both_over_121_higher_wins",
        f"{SCORING}::test_exact_tie_over_121_plays_another_hand",
        f"{SCORING}::test_target_is_checked_only_after_a_complete_hand",
    ),
    "end.over": (
        f"{SCORING}::test_no_move_is_accepted_once_the_match_is_over",
        f"{PROPERTIES}::test_random_matches_keep_every_property",
    ),
    "determinism.seed": (
        f"{DETERMINISM}::test_document_vector_matches_the_engine_deal",
        f"{DETERMINISM}::test_nothing_depends_on_process_state",
        f"{DETERMINISM}::test_same_seed_and_actions_give_identical_results",
    ),
    "action.forms": (
        f"{PLAY}::test_card_without_plan_trails_with_no_choice_a_trail_request_or_an_empty_capture",
        f"{PLAY}::test_unknown_plan_ids_are_refused",
        f"{REFUSALS}::test_invalid_action",
        f"{LEGAL}::test_every_spelling_of_a_listed_action_plays_the_same",
    ),
    "action.check-order": (f"{SPEC}::test_the_first_failing_check_is_the_one_reported",),
    "input.seed": (f"{REFUSALS}::test_invalid_seed",),
    "input.labels": (f"{REFUSALS}::test_invalid_labels",),
    "input.seat": (f"{REFUSALS}::test_invalid_seat",),
    "events.order": (
        f"{SPEC}::test_every_action_reports_its_events_in_the_documented_order",
        f"{PLAY}::test_events_of_a_capture_come_in_order",
    ),
    "events.seat": (f"{PROPERTIES}::test_seat_view_never_shows_what_the_seat_may_not_see",),
    "state.check": (
        f"{REFUSALS}::test_invalid_state",
        f"{REFUSALS}::test_invalid_state_first_problem_is_named",
        f"{REFUSALS}::test_first_dealer_check_uses_the_seed",
    ),
    "view.seat": (
        f"{PROPERTIES}::test_seat_view_never_shows_what_the_seat_may_not_see",
        f"{GOLDEN}::test_every_recorded_view_shows_the_seat_what_the_state_allows_and_no_more",
    ),
    "plans.reported": (
        f"{SPEC}::test_a_plan_reports_the_first_collection_found_and_its_rank_part",
    ),
    "plans.work-bound": (
        f"{REFUSALS}::test_state_too_complex",
        f"{SPEC}::test_only_a_search_can_pass_the_work_bound",
        f"{BRUTE}::test_floors_of_a_reachable_shape_are_never_too_complex",
    ),
}

# Sections of docs/rules.md that define words or explain the engine rather than state rules.
EXPLAINING = frozenset(
    {
        "Terms",
        "How the engine computes the rules",
        "The game's facts (`facts.py`)",
        "Memoisation and the plan table",
    }
)

PAGE = RULES_PAGE.read_text(encoding="utf-8")


def test_every_rule_the_page_states_has_a_proof_and_every_proof_a_rule() -> None:
    """The ids of docs/rules.md and of PROOFS are the same set, each stated once."""
    stated = stated_rules(PAGE)
    assert len(stated) >= 40
    assert sorted(i for i in set(stated) if stated.count(i) > 1) == []
    assert sorted(set(stated) - set(PROOFS)) == [], "rules with no proof"
    assert sorted(set(PROOFS) - set(stated)) == [], "proofs of rules the page does not state"


def test_every_rule_the_page_cites_is_stated() -> None:
    """A rule named in plain brackets is one the page states."""
    assert sorted(set(cited_rules(PAGE)) - set(stated_rules(PAGE))) == []


def test_every_section_states_a_rule_or_is_listed_as_explaining() -> None:
    """A new section of rules cannot be added without ids (nor an id-less one go unnoticed)."""
    found = sections(PAGE)
    assert set(found) >= EXPLAINING
    without = [heading for heading, body in found.items() if not stated_rules(body)]
    assert sorted(without) == sorted(EXPLAINING)


def _defined_tests(path: str) -> set[str]:
    tree = ast.parse((REPO / path).read_text(encoding="utf-8"))
    return {
        node.name
        for node in tree.body
        if isinstance(node, ast.FunctionDef) and node.name.startswith("test_")
    }


def test_every_proof_names_a_test_that_exists() -> None:
    """Each `path::function` of PROOFS is a test function defined at the top of that file."""
    missing = [
        proof
        for proofs in PROOFS.values()
        for proof in proofs
        if proof.split("::")[1] not in _defined_tests(proof.split("::")[0])
    ]
    assert missing == []


def test_the_page_and_the_proofs_name_only_files_of_the_repository() -> None:
    """The specification is this repository's: no path outside it, no file the repo lacks."""
    assert "../" not in PAGE
    for path in {proof.split("::")[0] for proofs in PROOFS.values() for proof in proofs}:
        assert (REPO / path).is_file(), path
    for name in re.findall(r"`((?:tests|engine|benchmarks|service)/[\w/.]+\.\w+)`", PAGE):
        assert (REPO / name).is_file(), name


# --- rules proved here ----------------------------------------------------------------------


def _crafted_floor_state(card: str) -> State:
    """The seat to move holds `card` on a floor of every card from A to 8 (32 cards)."""
    floor = [r + s for r in ("A", "2", "3", "4", "5", "6", "7", "8") for s in "CDHS"]
    return build((["KD"], [card]), floor, dealer=0, rest_to=0, last_capturer=0)


def test_the_first_failing_check_is_the_one_reported() -> None:
    """Each action fails two checks at once; the earlier check of the documented order wins."""
    over = play_match(b"check-order", random.Random(3)).states[-1]
    mid = scene(["7H", "KC"], ["3C", "4D", "4S"])  # seat 1 to move; 7H has two plans
    other = mid.hands[0][0]  # a card the seat to move does not hold
    crafted = _crafted_floor_state("10H")
    ten = parse_card("10H")
    cases: list[tuple[State, Action, Reason]] = [
        (replace(over, seq=over.seq + 1), Action(5, 99), Reason.INVALID_STATE),
        (over, Action(5, 99), Reason.MATCH_OVER),
        (mid, Action(5, 99), Reason.INVALID_SEAT),
        (mid, Action(0, 99), Reason.NOT_YOUR_TURN),
        (mid, Action(1, 99), Reason.INVALID_CARD),
        (mid, Action(1, other, capture=(99,)), Reason.INVALID_CARD),
        (mid, Action(1, other, plan_id=1, trail=True), Reason.CARD_NOT_IN_HAND),
        (crafted, Action(1, ten, plan_id=1, trail=True), Reason.STATE_TOO_COMPLEX),
        (mid, Action(1, parse_card("7H"), plan_id=9, trail=True), Reason.INVALID_ACTION),
        (mid, Action(1, parse_card("7H"), plan_id=9), Reason.UNKNOWN_PLAN),
    ]
    for state, action, reason in cases:
        assert refusal(state, action).reason is reason, (action, reason)


# One letter per event type; an action's events must spell a word of ACTION_EVENTS.
LETTERS: dict[type[Event], str] = {
    CardPlayed: "P",
    Trailed: "T",
    Captured: "C",
    Swept: "W",
    BasraScored: "B",
    CardsDealt: "D",
    LeftoversAwarded: "L",
    HandScored: "S",
    MatchOver: "M",
    HandStarted: "H",
    FloorFixed: "F",
}
OPENING = "HDDDF*"
ACTION_EVENTS = re.compile(rf"P(?:T|CW?B?)(?:DD|L?S(?:M|{OPENING}))?")


def _check_deals(events: tuple[Event, ...], dealer: int) -> None:
    """Round deals go to the non-dealer, then the dealer; a hand's first, then to the floor."""
    seats = [e.seat for e in events if isinstance(e, CardsDealt)]
    assert seats in ([], [1 - dealer, dealer], [1 - dealer, dealer, None])


def test_every_action_reports_its_events_in_the_documented_order() -> None:
    """Whole matches: every action's events, and every hand's opening, in the page's order."""
    seen: set[str] = set()
    for seed in (b"events-1", b"events-2", b"events-3"):
        played = play_match(seed, random.Random(seed))
        opening = "".join(LETTERS[type(e)] for e in played.events[0])
        assert re.fullmatch(OPENING, opening), opening
        _check_deals(played.events[0], played.states[0].dealer)
        for before, after, events in zip(
            played.states[:-1], played.states[1:], played.events[1:], strict=True
        ):
            word = "".join(LETTERS[type(e)] for e in events)
            assert ACTION_EVENTS.fullmatch(word), word
            dealer = after.dealer if "H" in word else before.dealer
            _check_deals(events[word.find("D") :] if "D" in word else (), dealer)
            floor = set(before.floor)
            if isinstance(events[1], Trailed):
                floor.add(events[1].card)
            elif isinstance(events[1], Captured):
                floor -= set(events[1].cards)
            assert ("L" in word) == ("S" in word and bool(floor))
            seen.update(word)
            seen.update(opening)
    assert seen == set(LETTERS.values())  # every kind of event was met in these matches


def test_a_plan_reports_the_first_collection_found_and_its_rank_part() -> None:
    """Groups tried from the lowest undecided card in canonical order; sweeps report none."""
    cases = [
        ("2D", ["AC", "AD", "AH", "AS"], [["AC", "AD"], ["AH", "AS"]], []),
        ("7H", ["AC", "2C", "3C", "4C", "5C", "6C"], [
            ["AC", "6C"], ["2C", "5C"], ["3C", "4C"],
        ], []),
        ("6H", ["6C", "AC", "5D", "3S", "3D"], [["AC", "5D"], ["3D", "3S"]], ["6C"]),
        ("JS", ["5C", "QD", "6C"], [], []),
        ("7D", ["AC", "6C", "7S"], [], []),
    ]  # fmt: skip
    for card, floor, groups, same_rank in cases:
        plan = plans_for(parse_card(card), mask_of(parse_cards(floor)))[0]
        assert [codes(g) for g in plan.groups] == groups, card
        assert codes(plan.same_rank) == same_rank, card
        assert plan.sweep == (card[0] == "J" or card == "7D")


def test_the_examples_of_the_plan_rules_are_what_the_engine_offers() -> None:
    """The page's own examples of section 3: the plans listed, in the order listed."""
    examples = [
        ("6C", ["AC", "2D", "3H", "4S", "5D", "QS"], [
            ["AC", "2D", "4S", "5D"], ["AC", "2D", "3H"],
        ]),
        ("7H", ["AC", "2C", "3C", "4C", "5C", "6C"], [
            ["AC", "2C", "3C", "4C", "5C", "6C"], ["AC", "2C", "4C"],
        ]),
        ("2D", ["AC", "AD", "AH", "AS"], [["AC", "AD", "AH", "AS"]]),
        ("8C", ["4D", "5H", "KS"], []),
        ("10H", ["5C", "5D", "2S", "3S"], [["2S", "3S", "5C"], ["2S", "3S", "5D"], ["5C", "5D"]]),
        ("10C", ["10S", "4H", "6C", "QD"], [["4H", "6C", "10S"]]),
    ]  # fmt: skip
    for card, floor, offered in examples:
        plans = plans_for(parse_card(card), mask_of(parse_cards(floor)))
        assert [codes(p.cards) for p in plans] == offered


def test_only_a_search_can_pass_the_work_bound() -> None:
    """On a floor past the bound for a 10, the J, the 7D, a Q and a K are still answered."""
    small = [r + s for r in ("A", "2", "3", "4", "5", "6", "8") for s in "CDHS"]
    floor = mask_of(parse_cards(small))
    with pytest.raises(RuleError) as info:
        plans_for(parse_card("10H"), floor)
    assert info.value.reason is Reason.STATE_TOO_COMPLEX
    for card in ("JC", "7D"):
        (sweep,) = plans_for(parse_card(card), floor)
        assert sweep.sweep and sweep.mask == floor
    assert plans_for(parse_card("QH"), floor) == plans_for(parse_card("KH"), floor) == ()
