"""What readable cards cost on the hot path: plan generation, legal moves, apply, conversion.

Cards are canonical indices (ints) inside the engine. Printing them as their codes (`7D`,
not `25`) in engine errors and test failures can be done in the values that hold cards (a
`__repr__` of their own, paid only when printed) or in the card itself (an int subclass
whose 52 instances print as codes, which every operation on a card then handles). This
times the calls that cards flow through, for one checkout or for several side by side:

    taskset -c 1 .venv/bin/python benchmarks/card_print_bench.py --hands 1000 --rounds 15
    taskset -c 1 .venv/bin/python benchmarks/card_print_bench.py --trees /tmp/other-checkout .

Every checkout given is loaded in this one process (its engine/, service/ and testkit/
under their own module objects; the generated protobuf code of this checkout's gen/ and
the tests' brute force are shared), plays the same simulated hands, and the checkouts'
timed passes alternate, measure by measure, round after round, in alternating order. So
machine noise falls on all of them alike, and the ratios to the first checkout are read
within one run. A figure is nanoseconds per call: the median over the rounds of one pass
over the whole sample list.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import platform
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
# Packages loaded once per checkout; everything else (protobuf, grpc, the generated basra.v1
# code, the tests' brute force) is loaded once and shared.
PER_CHECKOUT = ("engine", "service", "testkit", "clients", "benchmarks")


def _forget_checkout_modules() -> None:
    for name in list(sys.modules):
        if name.split(".")[0] in PER_CHECKOUT:
            del sys.modules[name]


def load_checkout(root: Path) -> dict[str, ModuleType]:
    """Import the modules the measures use from `root`, as objects of their own."""
    _forget_checkout_modules()
    sys.path[:0] = [str(root), str(ROOT / "gen"), str(root / "tests" / "engine")]
    try:
        # Checkouts before the split of service/convert.py read and convert with it.
        split = not (root / "service" / "convert.py").exists()
        conversion = ("service.reading", "clients.messages") if split else ("service.convert",)
        names = ("engine", "engine.plans", *conversion, "service.handlers")
        modules = {name: importlib.import_module(name) for name in names}
        modules["reading"] = modules[conversion[0]]
        modules["messages"] = modules[conversion[-1]]
        modules["actions"] = importlib.import_module("testkit.actions")
        modules["engine_bench"] = importlib.import_module("benchmarks.engine_bench")
        for module in modules.values():
            assert root in Path(str(module.__file__)).parents, f"{module} is not from {root}"
    finally:
        del sys.path[:3]
        _forget_checkout_modules()
    return modules


@dataclass
class Measure:
    """One measure of one checkout: a pass over its samples, and what runs before a pass."""

    name: str
    calls: int
    run: Callable[[], object]
    before: Callable[[], object]


def measures(modules: dict[str, ModuleType], hands: int, seed: int) -> list[Measure]:
    """Simulate `hands` hands with a checkout's engine and build its timed passes."""
    engine: Any = modules["engine"]
    reading: Any = modules["reading"]
    convert: Any = modules["messages"]
    samples, applies, four_card = modules["engine_bench"].simulate(hands, seed)
    states = [state for state, _ in applies]
    messages = [convert.state_to_proto(state) for state in states]
    events = [engine.apply(state, action)[1] for state, action in applies]
    handlers = modules["service.handlers"].Handlers()
    pb = reading.pb
    to_proto = modules["actions"].action_to_proto
    # The whole handler costs ~100 us a call: every eighth apply keeps a pass near a second.
    requests = [
        pb.ApplyRequest(state=message, action=to_proto(action))
        for message, (_, action) in list(zip(messages, applies, strict=True))[::8]
    ]
    plans_for, legal_moves, apply = engine.plans_for, engine.legal_moves, engine.apply

    def plans() -> None:
        for card, floor in samples:
            plans_for(card, floor)

    def moves() -> None:
        for state in four_card:
            legal_moves(state)

    def applied() -> None:
        for state, action in applies:
            apply(state, action)

    def states_out() -> None:
        for state in states:
            convert.state_to_proto(state)

    def states_in() -> None:
        for message in messages:
            reading.state_from_proto(message)

    def events_out() -> None:
        for produced in events:
            convert.events_to_proto(produced)

    def handled() -> None:
        for request in requests:
            handlers.apply(request)

    def printed() -> None:
        for state in states:
            repr(state)

    def keep() -> None:
        return None

    plans()  # fills the memo: the service's steady state
    return [
        Measure("plan generation, memo warm", len(samples), plans, keep),
        Measure("plan generation, memo empty", len(samples), plans, engine.plans.clear_caches),
        Measure("legal moves, 4-card hand, memo warm", len(four_card), moves, keep),
        Measure("apply, state check included, memo warm", len(applies), applied, keep),
        Measure("service state_to_proto", len(states), states_out, keep),
        Measure("service state_from_proto", len(messages), states_in, keep),
        Measure("service events_to_proto, one apply's events", len(events), events_out, keep),
        Measure("service Apply handler, request to response", len(requests), handled, keep),
        Measure("repr of a state (paid only when printed)", len(states), printed, keep),
    ]


def timed_pass(measure: Measure) -> float:
    """One pass of a measure, in ns per call."""
    measure.before()
    start = time.perf_counter_ns()
    measure.run()
    return (time.perf_counter_ns() - start) / measure.calls


def main() -> int:
    """Load the checkouts, run alternating passes, print one markdown table."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--trees", nargs="+", type=Path, default=[ROOT], metavar="CHECKOUT")
    parser.add_argument("--hands", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()

    trees = [tree.resolve() for tree in args.trees]
    per_tree = [measures(load_checkout(tree), args.hands, args.seed) for tree in trees]
    gc.collect()
    gc.freeze()
    results: list[list[list[float]]] = [[[] for _ in per_tree[0]] for _ in trees]
    for round_number in range(args.rounds):
        order = list(range(len(trees)))
        if round_number % 2:
            order.reverse()
        for index in range(len(per_tree[0])):
            for tree in order:
                results[tree][index].append(timed_pass(per_tree[tree][index]))

    names = [tree.name for tree in trees]
    print(f"# python {platform.python_version()}, {args.hands} hands, {args.rounds} rounds")
    print(f"# checkouts: {', '.join(names)}; ratio = checkout / {names[0]}, per measure")
    heads = " | ".join(f"{name} ns/call" for name in names)
    ratios = " | ".join(f"{name} ratio" for name in names[1:])
    print(f"| measure | calls per pass | {heads}" + (f" | {ratios} |" if ratios else " |"))
    print("|---|---|" + "---|" * (2 * len(names) - 1))
    for index, measure in enumerate(per_tree[0]):
        medians = [statistics.median(results[tree][index]) for tree in range(len(trees))]
        cells = " | ".join(f"{m:.0f}" for m in medians)
        shares = " | ".join(f"{m / medians[0]:.3f}" for m in medians[1:])
        tail = f" | {shares} |" if shares else " |"
        print(f"| {measure.name} | {measure.calls} | {cells}{tail}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
