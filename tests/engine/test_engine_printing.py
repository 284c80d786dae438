"""Engine values print their cards as codes (7D, not 25), in errors and test failures alike,
while the cards stay plain ints: equality, hashing and the wire are untouched."""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import pkgutil
import re
from typing import Any

import engine
from engine import (
    Action,
    Captured,
    CardsDealt,
    Trailed,
    apply,
    legal_moves,
    new_match,
    parse_card,
    parse_cards,
    seat_view,
)
from testkit.states import scene

SEVEN_D = parse_card("7D")


def test_an_event_prints_its_card_as_a_code() -> None:
    """The example of a failure that printed `Trailed(seat=1, card=25)`."""
    assert SEVEN_D == 25
    assert repr(Trailed(1, SEVEN_D)) == "Trailed(seat=1, card=7D)"
    assert str(Trailed(1, SEVEN_D)) == "Trailed(seat=1, card=7D)"


def test_nested_cards_print_as_codes_and_other_numbers_as_numbers() -> None:
    """Tuples of cards and groups of cards print as codes; seats, ids and counts stay numbers."""
    captured = Captured(
        0,
        parse_card("6H"),
        3,
        parse_cards(["AC", "5C"]),
        (),
        (parse_cards(["AC", "5C"]),),
    )
    assert repr(captured) == (
        "Captured(seat=0, card=6H, plan_id=3, cards=(AC, 5C), same_rank=(), groups=((AC, 5C),))"
    )
    assert repr(CardsDealt(None, (SEVEN_D,))) == "CardsDealt(seat=None, cards=(7D,))"
    action = Action(1, parse_card("10D"), capture=parse_cards(["4H", "6C"]))
    assert repr(action) == "Action(seat=1, card=10D, plan_id=None, capture=(4H, 6C), trail=False)"


def test_a_value_that_is_not_a_card_prints_as_it_is() -> None:
    """Out-of-range or mistyped cards (as a refused action holds them) are not disguised."""
    assert repr(Action(0, 60)) == "Action(seat=0, card=60, plan_id=None, capture=None, trail=False)"
    assert "card='7D'" in repr(Action(0, "7D"))  # type: ignore[arg-type]
    assert "card=True" in repr(Action(0, True))


def test_states_moves_plans_and_views_print_codes() -> None:
    """A whole state, its legal moves with their plans, and a seat's view show codes only."""
    state = scene(["10D", "KH"], ["4H", "6C", "QD"], seat=0)
    text = repr(state)
    assert "hands=((10D, KH), (AC, AD))" in text
    assert "floor=(4H, 6C, QD)" in text
    assert "basras=(0, 0)" in text  # counts are not cards
    moves = legal_moves(state)
    assert repr(moves[0]).startswith("Move(card=10D, plans=(Plan(id=1, cards=(4H, 6C), ")
    view = repr(seat_view(state, 0))
    assert "hand=(10D, KH)" in view
    assert "floor=(4H, 6C, QD)" in view


def _card_holders() -> list[type[Any]]:
    """Every class of the engine (its subpackages too) with a field annotated as holding
    cards."""
    found: dict[str, type[Any]] = {}
    for module in pkgutil.walk_packages(engine.__path__, "engine."):
        loaded = importlib.import_module(module.name)
        for cls in vars(loaded).values():
            if inspect.isclass(cls) and cls.__module__ == loaded.__name__:
                annotations = getattr(cls, "__annotations__", {})
                if any(re.search(r"\bCard\b", str(kind)) for kind in annotations.values()):
                    found[cls.__qualname__] = cls
    return list(found.values())


def test_every_engine_value_that_holds_cards_prints_them_as_codes() -> None:
    """Found by their annotations, so a new event or value that forgets it fails here."""
    holders = _card_holders()
    names = {cls.__name__ for cls in holders}
    assert {"Trailed", "Captured", "Plan", "Action", "Move", "State", "SeatView"} <= names
    for cls in holders:
        fields = list(cls.__annotations__.items())
        values = [SEVEN_D if re.search(r"\bCard\b", str(kind)) else None for _, kind in fields]
        if dataclasses.is_dataclass(cls):
            instance = object.__new__(cls)
            for (name, _), value in zip(fields, values, strict=True):
                object.__setattr__(instance, name, value)
        else:
            instance = cls._make(values)
        text = repr(instance)
        assert text.startswith(f"{cls.__qualname__}("), text
        assert "25" not in text, text
        assert text.count("=7D") == values.count(SEVEN_D), text


def test_printing_changes_no_value() -> None:
    """Cards inside the values are plain ints; equality and hashing are those of the fields."""
    state, events = new_match(b"printing")
    assert all(type(card) is int for card in (*state.deck, *state.floor, *state.hands[0]))
    again, events_again = new_match(b"printing")
    assert again == state and hash(again) == hash(state)
    assert events_again == events and hash(events_again) == hash(events)
    seat = state.to_move
    assert seat is not None
    move = legal_moves(state)[0]
    action = Action(seat, move.card, plan_id=1 if len(move.plans) > 1 else None)
    after, produced = apply(state, action)
    assert produced[0] == engine.CardPlayed(seat, move.card)
    assert dataclasses.astuple(produced[0]) == (seat, move.card)
    assert after != state
