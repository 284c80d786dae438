"""The engine's pure parts stand alone: the facts, cards, events, scoring and plans can be used
without loading the state, the match flow, the random stream of the deal or the state check
(a player program that must not see the deal relies on it)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ENGINE = Path(__file__).resolve().parents[2] / "engine"
MACHINERY = {"engine.state", "engine.match", "engine.rng", "engine.validate", "engine.replay"}

# Loads the named modules under bare packages (`engine` without engine/__init__.py, which
# gathers everything for callers, and likewise the packages named in argv[2]) and prints
# every engine module that got loaded.
PROBE = """
import json, pathlib, sys, types
for name in ["engine", *filter(None, sys.argv[2].split(","))]:
    package = types.ModuleType(name)
    package.__path__ = [str(pathlib.Path(sys.argv[1], *name.split(".")[1:]))]
    sys.modules[name] = package
for name in sys.argv[3:]:
    __import__(name)
print(json.dumps(sorted(m for m in sys.modules if m.startswith("engine."))))
"""


def loaded_by(*modules: str, bare: tuple[str, ...] = ()) -> set[str]:
    """The engine modules that importing `modules` loads, in a fresh interpreter, with the
    packages `bare` (beside `engine`) loaded without their __init__."""
    run = subprocess.run(
        [sys.executable, "-c", PROBE, str(ENGINE), ",".join(bare), *modules],
        capture_output=True,
        text=True,
        check=True,
    )
    return set(json.loads(run.stdout))


def test_facts_import_nothing_of_the_engine() -> None:
    """engine.facts is the first thing stated: it depends on no other engine module."""
    assert loaded_by("engine.facts") == {"engine.facts"}


@pytest.mark.parametrize(
    "module",
    [
        "engine.cards",
        "engine.events",
        "engine.scoring",
        "engine.plans",
        "engine.plans.table",
        "engine.errors",
    ],
)
def test_pure_parts_do_not_reach_the_match_machinery(module: str) -> None:
    """Cards, events, scoring and plans load none of state, match, rng, validate, replay."""
    loaded = loaded_by(module)
    assert module in loaded
    assert not loaded & MACHINERY, f"{module} loads {sorted(loaded & MACHINERY)}"


@pytest.mark.parametrize("module", ["engine.plans.search", "engine.plans.table"])
def test_the_search_and_the_table_format_stand_below_the_memos_and_the_rule(module: str) -> None:
    """The plan search and the plan table's format load neither the memos nor the rule, so
    the table can be built and read without them."""
    loaded = loaded_by(module, bare=("engine.plans",))
    assert module in loaded
    assert not loaded & {"engine.plans.memo", "engine.plans.rule"}


def test_the_package_of_plans_loads_its_rule_and_memos() -> None:
    """The check can fail: the package's own __init__ loads the rule and the memos."""
    assert {"engine.plans.rule", "engine.plans.memo"} <= loaded_by("engine.plans")


def test_the_probe_sees_the_machinery_where_it_is_used() -> None:
    """The check can fail: loading the match flow is seen to load the state and the rng."""
    assert {"engine.state", "engine.rng", "engine.validate"} <= loaded_by("engine.match")


# Prints every module of the named top-level packages loaded by importing argv[2:].
LOADED = """
import json, sys
for name in sys.argv[2:]:
    __import__(name)
tops = set(sys.argv[1].split(","))
print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] in tops)))
"""


def loaded_of(tops: tuple[str, ...], *modules: str) -> set[str]:
    """The modules of the packages `tops` that importing `modules` loads, in a fresh
    interpreter."""
    run = subprocess.run(
        [sys.executable, "-c", LOADED, ",".join(tops), *modules],
        capture_output=True,
        text=True,
        check=True,
        cwd=ENGINE.parent,
    )
    return set(json.loads(run.stdout))


CLIENTS = ("play", "load", "verify", "channels", "messages", "refusals")


def test_the_clients_load_nothing_of_the_server() -> None:
    """Every client module but the command (whose `serve` is the server) stands without
    service/: what both need is wire's."""
    loaded = loaded_of(("service", "clients"), *(f"clients.{name}" for name in CLIENTS))
    assert {f"clients.{name}" for name in CLIENTS} <= loaded
    assert not {m for m in loaded if m.split(".")[0] == "service"}


def test_the_rules_load_nothing_of_the_wire() -> None:
    """wire stands beside the rules: the engine and its bot load none of it, while the
    server does (the check can fail)."""
    rules = loaded_of(("engine", "wire"), "engine", "engine.bot")
    assert "engine.bot" in rules
    assert not {m for m in rules if m.startswith("wire")}
    assert "wire.actions" in loaded_of(("wire",), "service.handlers")
