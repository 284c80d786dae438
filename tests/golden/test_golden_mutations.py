"""The corpus catches a wrong reader or writer: each mutation of service/writing.py or
service/reading.py fails the check.

Each mutation is applied to the source text of its module, the result is loaded as a fresh
module, the handlers are pointed at it, and the whole corpus is run in process: at least one
case must come out different. Each mutation must match exactly one place of the source, so a
rewrite of those modules breaks this test (and the list gets updated) instead of letting a
mutation silently stop applying. An unchanged copy of each loaded the same way must pass the
corpus, which shows that the loading itself changes nothing.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import pytest

import service.handlers
from service import reading, writing
from testkit.golden import in_process_runners, load_cases, mismatches

# The modules the handlers read requests and write answers with, by their name there.
MODULES: dict[str, ModuleType] = {"reading": reading, "writing": writing}


@dataclass(frozen=True)
class Mutation:
    """One small wrong change to a module: exactly one occurrence of `old` becomes `new`."""

    name: str
    module: str
    old: str
    new: str

    def source(self) -> str:
        """The module's source text, unchanged."""
        return Path(MODULES[self.module].__file__ or "").read_text(encoding="utf-8")


MUTATIONS = (
    Mutation(
        "the seats' scores of a hand swapped",
        "writing",
        '"seats": [_seat_score(s) for s in event.seats],',
        '"seats": [_seat_score(s) for s in event.seats[::-1]],',
    ),
    Mutation(
        "hand and captured swapped in a state's seat",
        "writing",
        '"hand": [CODES[c] for c in hands[seat]],\n'
        '                "captured": [CODES[c] for c in piles[seat]],',
        '"hand": [CODES[c] for c in piles[seat]],\n'
        '                "captured": [CODES[c] for c in hands[seat]],',
    ),
    Mutation(
        "cards and same_rank swapped in the Captured event",
        "writing",
        '"cards": _codes(event.cards),\n            "same_rank": _codes(event.same_rank),',
        '"cards": _codes(event.same_rank),\n            "same_rank": _codes(event.cards),',
    ),
    Mutation(
        "basras and total swapped in a state's seat",
        "writing",
        '"basras": basras[seat],\n                "total": totals[seat],',
        '"basras": totals[seat],\n                "total": basras[seat],',
    ),
    Mutation(
        "replacements and returned swapped in FloorFixed",
        "writing",
        '"returned": _codes(event.returned),',
        '"returned": _codes(event.replacements),',
    ),
    Mutation(
        "the last card of the deck dropped",
        "writing",
        '"deck": [CODES[c] for c in state.deck],',
        '"deck": [CODES[c] for c in state.deck[:-1]],',
    ),
    Mutation(
        "the last legal move dropped",
        "writing",
        "            for m in moves\n",
        "            for m in moves[:-1]\n",
    ),
    Mutation(
        "carry before and after swapped in HandScored",
        "writing",
        '"carry_before": event.carry_before,',
        '"carry_before": event.carry_after,',
    ),
    Mutation(
        "a plan's sweep flag taken from its Basra flag",
        "writing",
        '"sweep": plan.sweep,',
        '"sweep": plan.basra,',
    ),
    Mutation(
        "the views' hand sizes given to the wrong seats",
        "writing",
        '"hand_size": view.hand_sizes[seat],',
        '"hand_size": view.hand_sizes[1 - seat],',
    ),
    Mutation(
        "the final totals reversed in MatchOver",
        "writing",
        '"totals": list(event.totals)',
        '"totals": list(event.totals[::-1])',
    ),
    Mutation(
        "the last capturer left out of the state",
        "writing",
        '"last_capturer": state.last_capturer,',
        '"last_capturer": None,',
    ),
    Mutation(
        "a hidden deal's count replaced by its seat",
        "writing",
        '"count": event.count',
        '"count": event.seat',
    ),
    Mutation(
        "a Replay's refused index left out",
        "writing",
        "refused_index=refused_index,",
        "refused_index=None,",
    ),
    Mutation(
        "dealer and hand number swapped in the state",
        "writing",
        '"dealer": state.dealer,\n        "hand_number": state.hand_number,',
        '"dealer": state.hand_number,\n        "hand_number": state.dealer,',
    ),
    Mutation(
        "a seat's list shows the other seat's dealt cards",
        "writing",
        "for e in seat_events(events, seat)]",
        "for e in events]",
    ),
    Mutation(
        "the signed state left out of NewMatch and Apply answers",
        "writing",
        "state=state, seed_commitment=seed_commitment, signed_state=signed_state",
        "state=state, seed_commitment=seed_commitment, signed_state=None",
    ),
    Mutation(
        "the received totals read from the wrong seats",
        "reading",
        "        totals=(seat0.total, seat1.total),",
        "        totals=(seat1.total, seat0.total),",
    ),
)


def _load(source: str, name: str, path: str) -> ModuleType:
    """A fresh module built from this source text, not registered anywhere."""
    spec = importlib.util.spec_from_loader(name, loader=None)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    exec(compile(source, path, "exec"), module.__dict__)
    return module


@contextmanager
def _handlers_using(name: str, module: ModuleType) -> Iterator[None]:
    """Point the handlers at another module of that name for the duration."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(service.handlers, name, module)
        yield


def test_each_mutation_matches_exactly_one_place_of_its_module() -> None:
    """A mutation that no longer applies must be updated, not skipped."""
    for mutation in MUTATIONS:
        assert mutation.source().count(mutation.old) == 1, mutation.name
    assert len({m.name for m in MUTATIONS}) == len(MUTATIONS) >= 6
    assert {m.module for m in MUTATIONS} == set(MODULES)


@pytest.mark.parametrize("name", sorted(MODULES))
def test_an_unchanged_copy_loaded_the_same_way_passes_the_corpus(name: str) -> None:
    """The loading and patching alone change no answer."""
    module = MODULES[name]
    path = module.__file__ or ""
    copy = _load(Path(path).read_text(encoding="utf-8"), f"{name}_unchanged_copy", path)
    with _handlers_using(name, copy):
        assert mismatches(load_cases(), in_process_runners()) == []


@pytest.mark.parametrize("mutation", MUTATIONS, ids=[m.name for m in MUTATIONS])
def test_the_corpus_catches_a_mutated_module(mutation: Mutation) -> None:
    """With the mutated reader or writer, at least one recorded answer comes out different."""
    source = mutation.source()
    assert source.count(mutation.old) == 1, mutation.name
    path = MODULES[mutation.module].__file__ or ""
    mutant = _load(source.replace(mutation.old, mutation.new), f"{mutation.module}_mutant", path)
    with _handlers_using(mutation.module, mutant):
        caught = mismatches(load_cases(), in_process_runners(), stop_at_first=True)
    assert caught, f"no case of the corpus notices: {mutation.name}"
