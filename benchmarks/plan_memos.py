"""What each memo level of plan generation saves: plans_for with one level bypassed at a time.

Run from the repository root:
    .venv/bin/python -m benchmarks.plan_memos                   # counted instructions
    taskset -c 1 .venv/bin/python -m benchmarks.plan_memos --time

Two workloads, from empty memos with the shipped plan table installed, as in a fresh worker:
"stream" is every card of the hand to move at every decision of simulated hands, in play
order, the memos kept throughout; "wide" is engine_bench --wide's corpus (cases drawn from
400 matches: far more cold misses). Each configuration computes one memo level
(engine.plans.memo) through its function instead of its cache, the others as shipped, and
must give the same plans. By default each pass runs under valgrind's callgrind, and a
figure is the instructions of that run less those of the same run without the pass: they
do not depend on other work on the machine. --time instead times the passes in this
process (thread CPU time), the configurations in turn, and gives medians over --repeats.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from pathlib import Path
from typing import Any

from benchmarks.engine_bench import simulate, wide_cases
from benchmarks.measure import finish, header, now, scratch
from engine.plans import clear_caches, memo, rule
from service import plan_table

Case = tuple[int, int]
Generate = Callable[[int, int], object]


def _without_plans_memo() -> Generate:
    """plans_for computing the rule on every call (the lower levels as shipped)."""

    def plans(key: int) -> Any:
        return rule._kind_plans(*memo._fields(key))

    return rule._generation(plans, "plans_for", "")


@contextmanager
def _bypassed(name: str) -> Iterator[None]:
    """engine.plans.memo's cache `name` replaced by its function for the block."""
    cached = getattr(memo, name)
    setattr(memo, name, cached.__wrapped__)
    try:
        yield
    finally:
        setattr(memo, name, cached)


# Per configuration: what it bypasses (a context), and the plans_for it calls.
CONFIGURATIONS: dict[str, tuple[Callable[[], AbstractContextManager[Any]], Callable[[], Any]]] = {
    "as shipped": (nullcontext, lambda: rule.plans_for),
    "no plans memo": (nullcontext, _without_plans_memo),
    "no shape memo": (lambda: _bypassed("_shape_plans"), lambda: rule.plans_for),
}


def one_pass(cases: Sequence[Case], name: str) -> list[object]:
    """The plans of every case, in configuration `name`, from empty memos."""
    context, generation = CONFIGURATIONS[name]
    clear_caches()
    with context():
        generate = generation()
        return [generate(card, floor) for card, floor in cases]


def workloads(hands: int, seed: int) -> dict[str, list[Case]]:
    """The stream and the wide corpus."""
    return {"stream": simulate(hands, seed)[0], "wide": wide_cases(400, 30_000, seed)}


def hit_rates(cases: Sequence[Case]) -> str:
    """How often each level answered from its cache in a shipped pass over `cases`."""
    one_pass(cases, "as shipped")
    rates = []
    for cache in (rule._plans_cached, memo._shape_plans):
        info = cache.cache_info()
        rates.append(f"{info.hits / max(1, info.hits + info.misses):.0%}")
    return " / ".join(rates)


def _child(path: str, name: str) -> int:
    """Under callgrind: load the cases, install the table, run one pass (name "none": no pass)."""
    cases = [(card, floor) for card, floor in json.loads(Path(path).read_text())]
    gc.collect()
    gc.freeze()
    plan_table.install()
    if name != "none":
        one_pass(cases, name)
    return 0


def _instructions(path: Path, name: str) -> int:
    """Instructions counted by callgrind in a child process running `_child(path, name)`."""
    run = subprocess.run(
        [
            "valgrind",
            "--tool=callgrind",
            "--callgrind-out-file=/dev/null",
            sys.executable,
            "-m",
            "benchmarks.plan_memos",
            "--child",
            str(path),
            name,
        ],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONHASHSEED": "0"},
    )
    found = re.search(r"Collected : (\d+)", run.stderr)
    assert found, run.stderr[-2000:]
    return int(found.group(1))


def count(loads: dict[str, list[Case]]) -> None:
    """Instructions per call of each configuration, by callgrind."""
    directory = Path(scratch("plan-memos-"))
    print("| workload | configuration | instructions per call | / as shipped | cache hits |")
    print("|---|---|---|---|---|")
    for workload, cases in loads.items():
        path = directory / f"{workload}.json"
        path.write_text(json.dumps(cases))
        base = _instructions(path, "none")
        per_call = {n: (_instructions(path, n) - base) / len(cases) for n in CONFIGURATIONS}
        hits = hit_rates(cases)
        for name, figure in per_call.items():
            ratio = figure / per_call["as shipped"]
            shown = hits if name == "as shipped" else ""
            print(f"| {workload} | {name} | {figure:,.0f} | {ratio:.2f} | {shown} |")


def clock(loads: dict[str, list[Case]], repeats: int) -> None:
    """Thread CPU time per call of each configuration: medians of passes taken in turn."""
    gc.collect()
    gc.freeze()
    print("| workload | configuration | µs per call (median) | / as shipped | cache hits |")
    print("|---|---|---|---|---|")
    for workload, cases in loads.items():
        spent: dict[str, list[float]] = {name: [] for name in CONFIGURATIONS}
        for _ in range(repeats):
            for name in CONFIGURATIONS:
                began = time.thread_time_ns()
                one_pass(cases, name)
                spent[name].append((time.thread_time_ns() - began) / len(cases) / 1000)
        shipped = statistics.median(spent["as shipped"])
        hits = hit_rates(cases)
        for name, figures in spent.items():
            median = statistics.median(figures)
            shown = hits if name == "as shipped" else ""
            print(f"| {workload} | {name} | {median:.2f} | {median / shipped:.2f} | {shown} |")


def main(argv: Sequence[str] | None = None) -> int:
    """Measure each configuration on both workloads and print a markdown table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hands", type=int, default=1000, help="simulated hands (stream)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--time", action="store_true", help="time passes instead of counting")
    parser.add_argument("--repeats", type=int, default=7, help="--time: passes of each")
    parser.add_argument(
        "--child", nargs=2, metavar=("CASES", "CONFIGURATION"), help=argparse.SUPPRESS
    )
    args = parser.parse_args(argv)
    if args.child:
        return _child(*args.child)
    started = now()
    loads = workloads(args.hands, args.seed)
    shapes = plan_table.install()
    for name in CONFIGURATIONS:  # every configuration gives the same plans
        for cases in loads.values():
            assert one_pass(cases, name) == one_pass(cases, "as shipped"), name
    print(f"# {header('plan_memos', started, argv)}")
    print(
        f"# plan table installed ({shapes} shapes); {len(loads['stream'])} stream calls "
        f"({args.hands} hands), {len(loads['wide'])} wide; each pass from empty memos"
    )
    if args.time:
        clock(loads, args.repeats)
    else:
        count(loads)
    finish(None, started, argv, {})
    return 0


if __name__ == "__main__":
    sys.exit(main())
