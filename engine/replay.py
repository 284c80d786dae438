"""Replay: rebuild a match from its seed and its actions."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from engine.errors import RuleError
from engine.events import Event
from engine.facts import DEFAULT_WORK_LIMIT
from engine.match import Action, apply, new_match
from engine.state import State


@dataclass(frozen=True, slots=True)
class ReplayResult:
    """The state after the last accepted action, every event, and the first refusal if any."""

    state: State
    events: tuple[Event, ...]
    refused_index: int | None
    """0-based index of the first refused action, None when all were accepted."""
    error: RuleError | None


def replay(
    seed: bytes,
    actions: Iterable[Action],
    labels: tuple[str, str] = ("", ""),
    work_limit: int = DEFAULT_WORK_LIMIT,
) -> ReplayResult:
    """Create the match from `seed` and apply `actions` in order, stopping at the first refusal."""
    state, first = new_match(seed, labels)
    events: list[Event] = list(first)
    for index, action in enumerate(actions):
        try:
            state, produced = apply(state, action, work_limit=work_limit, check=False)
        except RuleError as error:
            return ReplayResult(state, tuple(events), index, error)
        events.extend(produced)
    return ReplayResult(state, tuple(events), None, None)
