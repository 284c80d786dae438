"""The examples of the two source documents, played on the engine (tests/data/seeds/examples.json).

Each example keeps the sentence of the source it comes from, the ids of the docs/rules.md rules
it illustrates, and checks: a play (the plans offered, the refusal, or what it takes, leaves,
sweeps and scores), a hand's scoring, or the comparison of totals at the end of a hand. An
example with no check is a rule statement without a position of its own; the tests that
docs/rules.md maps to its rules prove it (tests/engine/test_rules_spec.py). Where the source
documents lie beside the repository (this project's CI), every sentence kept must be theirs,
word for word.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from engine import (
    BasraScored,
    Captured,
    Reason,
    Swept,
    Trailed,
    codes,
    legal_moves,
    match_winner,
    parse_card,
    parse_cards,
    score_hand,
)
from engine.cards import mask_of
from testkit.rule_sources import RULES_PAGE, SEED_EXAMPLES, stated_rules
from testkit.states import act, refused_play, scene

DATA = json.loads(SEED_EXAMPLES.read_text(encoding="utf-8"))
EXAMPLES: list[dict[str, Any]] = DATA["examples"]
SOURCES = SEED_EXAMPLES.parent
OUTCOMES = frozenset({"refused", "taken", "floor_after", "sweep", "basra"})
PLAY_KEYS = OUTCOMES | {"play", "hand", "floor", "choice", "plans", "plan_count"}


def _checks() -> list[Any]:
    return [
        pytest.param(check, id=f"{example['id']}-{n}")
        for example in EXAMPLES
        for n, check in enumerate(example["checks"], start=1)
    ]


def test_the_examples_come_from_both_sources_and_name_rules_the_page_states() -> None:
    """Every example cites one of the two sources and at least one rule of docs/rules.md."""
    stated = set(stated_rules(RULES_PAGE.read_text(encoding="utf-8")))
    ids = [example["id"] for example in EXAMPLES]
    assert len(ids) == len(set(ids)) >= 40
    assert {example["source"] for example in EXAMPLES} == set(DATA["sources"])
    for example in EXAMPLES:
        assert example["quote"].strip(), example["id"]
        assert example["rules"], example["id"]
        assert set(example["rules"]) <= stated, example["id"]
    assert sum(len(example["checks"]) for example in EXAMPLES) >= 60


def test_every_kept_sentence_is_the_source_documents_word_for_word() -> None:
    """Each quote is in its source document (line breaks and runs of spaces aside)."""
    texts = {
        name: " ".join((SOURCES / name).read_text(encoding="utf-8").split())
        for name in DATA["sources"]
    }
    wrong = [e["id"] for e in EXAMPLES if " ".join(e["quote"].split()) not in texts[e["source"]]]
    assert wrong == []


def _check_play(check: dict[str, Any]) -> None:
    assert set(check) <= PLAY_KEYS, sorted(set(check) - PLAY_KEYS)
    card = check["play"]
    state = scene(check.get("hand", [card]), check["floor"])
    (move,) = [m for m in legal_moves(state) if m.card == parse_card(card)]
    if "plans" in check:
        assert [codes(p.cards) for p in move.plans] == check["plans"]
    if "plan_count" in check:
        assert len(move.plans) == check["plan_count"]
    if not OUTCOMES & set(check):
        return  # the plans offered are the example
    choice = dict(check.get("choice", {}))
    if "refused" in check:
        assert refused_play(state, card, **choice).reason is Reason(check["refused"])
        return
    after, events = act(state, card, **choice)
    captured = [e for e in events if isinstance(e, Captured)]
    if "taken" in check:
        taken = codes(captured[0].cards) if captured else []
        assert taken == check["taken"]
        assert any(isinstance(e, Trailed) for e in events) == (not check["taken"])
    if "floor_after" in check:
        assert codes(after.floor) == check["floor_after"]
    if "sweep" in check:
        assert any(isinstance(e, Swept) for e in events) == check["sweep"]
    if "basra" in check:
        assert any(isinstance(e, BasraScored) for e in events) == check["basra"]
        assert after.basras[1] - state.basras[1] == int(check["basra"])


def _check_score(check: dict[str, Any]) -> None:
    assert set(check) == {"score", "points", "carry_after"}
    given = check["score"]
    piles = (mask_of(parse_cards(given["captured"][0])), mask_of(parse_cards(given["captured"][1])))
    basras = (given["basras"][0], given["basras"][1])
    scored = score_hand(1, piles, basras, given["carry"], (0, 0))
    assert [seat.hand_total for seat in scored.seats] == check["points"]
    assert scored.carry_after == check["carry_after"]


def _check_end(check: dict[str, Any]) -> None:
    assert set(check) == {"end", "winner"}
    totals = (check["end"][0], check["end"][1])
    assert match_winner(totals) == check["winner"]


@pytest.mark.parametrize("check", _checks())
def test_the_engine_gives_each_example_the_outcome_the_sources_give(check: dict[str, Any]) -> None:
    """One check of one example: a play, a hand's scoring or the end-of-hand comparison."""
    kinds = {"play", "score", "end"} & set(check)
    assert len(kinds) == 1, check
    {"play": _check_play, "score": _check_score, "end": _check_end}[kinds.pop()](check)
