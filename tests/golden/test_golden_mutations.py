"""The corpus catches a wrong converter: each mutation of service/convert.py fails the check.

Each mutation is applied to the source text of service/convert.py, the result is loaded as a
fresh module, the handlers are pointed at it, and the whole corpus is run in process: at least
one case must come out different. Each mutation must match exactly one place of the source,
so a rewrite of convert.py breaks this test (and the list gets updated) instead of letting a
mutation silently stop applying. An unchanged copy loaded the same way must pass the corpus,
which shows that the loading itself changes nothing.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import pytest

import service.convert
import service.handlers
from tests.golden.golden_corpus import in_process_runners, load_cases, mismatches

SOURCE_PATH = Path(service.convert.__file__)


@dataclass(frozen=True)
class Mutation:
    """One small wrong change: exactly one occurrence of `old` becomes `new`."""

    name: str
    old: str
    new: str


MUTATIONS = (
    Mutation(
        "jacks and aces swapped in a hand score",
        "            integer(3, score.jacks),\n            integer(4, score.aces),",
        "            integer(3, score.aces),\n            integer(4, score.jacks),",
    ),
    Mutation(
        "hand and captured swapped in a state's seat",
        'b"".join([_HAND[c] for c in hand])\n        + b"".join([_PILE[c] for c in pile])',
        'b"".join([_HAND[c] for c in pile])\n        + b"".join([_PILE[c] for c in hand])',
    ),
    Mutation(
        "cards and same_rank swapped in the Captured event",
        "        + _cards(4, event.cards)\n        + _cards(5, event.same_rank)",
        "        + _cards(4, event.same_rank)\n        + _cards(5, event.cards)",
    ),
    Mutation(
        "basras and total swapped in a state's seat",
        "        + integer(3, basras)\n        + integer(4, total)",
        "        + integer(3, total)\n        + integer(4, basras)",
    ),
    Mutation(
        "replacements and returned swapped in FloorFixed",
        "_cards(1, event.returned) + _cards(2, event.replacements)",
        "_cards(1, event.replacements) + _cards(2, event.returned)",
    ),
    Mutation(
        "the last card of the deck dropped",
        'b"".join([_DECK[c] for c in state.deck]),',
        'b"".join([_DECK[c] for c in state.deck[:-1]]),',
    ),
    Mutation(
        "the last legal move dropped",
        "            for m in moves\n",
        "            for m in moves[:-1]\n",
    ),
    Mutation(
        "carry before and after swapped in HandScored",
        "        + integer(3, event.carry_before)\n        + integer(4, event.carry_after),",
        "        + integer(3, event.carry_after)\n        + integer(4, event.carry_before),",
    ),
    Mutation(
        "a plan's sweep flag taken from its Basra flag",
        "        + boolean(6, plan.sweep)",
        "        + boolean(6, plan.basra)",
    ),
    Mutation(
        "the view's hand sizes given to the wrong seats",
        "        if view.seat == 0\n",
        "        if view.seat == 1\n",
    ),
    Mutation(
        "the final totals reversed in MatchOver",
        "wire.packed(2, event.totals)",
        "wire.packed(2, event.totals[::-1])",
    ),
    Mutation(
        "the last capturer left out of the state",
        "            optional_int(12, state.last_capturer),",
        "            optional_int(12, None),",
    ),
    Mutation(
        "the received totals read from the wrong seats",
        "        totals=(seat0.total, seat1.total),",
        "        totals=(seat1.total, seat0.total),",
    ),
    Mutation(
        "a hidden deal's count replaced by its seat",
        "integer(2, event.count)",
        "integer(2, event.seat)",
    ),
)


def _load(source: str, name: str) -> ModuleType:
    """A fresh module built from this source text, not registered anywhere."""
    spec = importlib.util.spec_from_loader(name, loader=None)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    exec(compile(source, str(SOURCE_PATH), "exec"), module.__dict__)
    return module


@contextmanager
def _handlers_using(module: ModuleType) -> Iterator[None]:
    """Point the handlers at another convert module for the duration."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(service.handlers, "convert", module)
        yield


def test_each_mutation_matches_exactly_one_place_of_convert() -> None:
    """A mutation that no longer applies must be updated, not skipped."""
    source = SOURCE_PATH.read_text(encoding="utf-8")
    for mutation in MUTATIONS:
        assert source.count(mutation.old) == 1, mutation.name
    assert len({m.name for m in MUTATIONS}) == len(MUTATIONS) >= 6


def test_an_unchanged_copy_of_convert_loaded_the_same_way_passes_the_corpus() -> None:
    """The loading and patching alone change no answer."""
    copy = _load(SOURCE_PATH.read_text(encoding="utf-8"), "convert_unchanged_copy")
    with _handlers_using(copy):
        assert mismatches(load_cases(), in_process_runners()) == []


@pytest.mark.parametrize("mutation", MUTATIONS, ids=[m.name for m in MUTATIONS])
def test_the_corpus_catches_a_mutated_converter(mutation: Mutation) -> None:
    """With the mutated converter, at least one recorded answer comes out different."""
    source = SOURCE_PATH.read_text(encoding="utf-8")
    assert source.count(mutation.old) == 1, mutation.name
    mutant = _load(source.replace(mutation.old, mutation.new), "convert_mutant")
    with _handlers_using(mutant):
        caught = mismatches(load_cases(), in_process_runners(), stop_at_first=True)
    assert caught, f"no case of the corpus notices: {mutation.name}"
