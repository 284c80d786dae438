"""Engine speed benchmark: plan generation, legal moves, apply, crafted worst cases.

Run from the repository root, pinned to one core:
    taskset -c 1 .venv/bin/python -m benchmarks.engine_bench --hands 10000
    taskset -c 1 .venv/bin/python -m benchmarks.engine_bench --wide   # 30,000 cases, 400 matches

--wide times cold plan generation on cases drawn from many matches (fewer repeats than one
long simulation), from empty memos without and with the plan table a worker installs.

Floors come from simulated hands with random legal choices. Every figure is the median (and
tail) of per-call timings with time.perf_counter_ns, timer overhead included; the samples
are moved out of the garbage collector's view (gc.freeze) once collected. Memoised plans
are cleared before each measured pass, so "cold" passes start from an empty memo, as a fresh
worker would.
"""

from __future__ import annotations

import argparse
import gc
import platform
import random
import statistics
import sys
import time
from collections.abc import Sequence

from benchmarks.measure import finish, header, now, percentile, summary, timings
from engine import (
    Action,
    RuleError,
    State,
    Status,
    apply,
    legal_moves,
    new_match,
    plans_for,
)
from engine.cards import NUMERIC_MASK, code, codes, mask_of
from engine.plans import plan_work
from engine.plans.memo import clear_caches, install_plan_table
from service import plan_table as plan_table_file
from testkit import brute
from testkit.actions import play_match, random_action


def simulate(
    hands: int, seed: int
) -> tuple[list[tuple[int, int]], list[tuple[State, Action]], list[State]]:
    """Play random legal matches until `hands` hands are done; collect what the benchmark times."""
    rnd = random.Random(seed)
    plan_samples: list[tuple[int, int]] = []
    applies: list[tuple[State, Action]] = []
    four_card: list[State] = []
    done = 0
    match = 0
    while done < hands:
        state, _ = new_match(f"bench-{seed}-{match}".encode())
        match += 1
        while state.status is Status.IN_PROGRESS and done < hands:
            assert state.to_move is not None
            floor = state.floor_mask
            hand = state.hands[state.to_move]
            plan_samples.extend((card, floor) for card in hand)
            if len(hand) == 4:
                four_card.append(state)
            action = random_action(state, rnd)
            applies.append((state, action))
            before = state.hand_number
            state, _ = apply(state, action)
            if state.hand_number != before or state.status is Status.OVER:
                done += 1
    return plan_samples, applies, four_card


def row(name: str, s: dict[str, float]) -> str:
    """One markdown table row."""
    return (
        f"| {name} | {int(s['n'])} | {s['median']:.2f} | {s['p90']:.2f} | {s['p99']:.2f} "
        f"| {s['max']:.1f} | {s['mean']:.2f} |"
    )


def crafted_floors(rnd: random.Random) -> list[tuple[str, int, int]]:
    """Worst cases: floors of 16 to 40 numeric cards, with the played cards that stress them."""
    cases: list[tuple[str, int, int]] = []
    for size in (16, 20, 24, 28, 32, 36, 40):
        for _ in range(6):
            floor = rnd.sample(range(40), size)
            mask = mask_of(floor)
            free = [c for c in range(40) if not mask >> c & 1 and c >> 2 >= 2]
            for played in sorted(free, reverse=True)[:4] or [40]:
                cases.append((f"random {size}", played, mask))
        low = [c for c in range(4 * (size // 4 + 1)) if c < 36][:size]
        for played in (39, 35):
            cases.append((f"lowest {size}", played, mask_of(low) & NUMERIC_MASK))
    return cases


def wide_cases(matches: int, cases: int, seed: int) -> list[tuple[int, int]]:
    """`cases` (card, floor) pairs drawn at random from every decision of `matches` matches."""
    rnd = random.Random(seed)
    found: list[tuple[int, int]] = []
    for number in range(matches):
        for state in play_match(f"wide-{seed}-{number}".encode(), rnd).states:
            if state.to_move is not None:
                found += [(card, state.floor_mask) for card in state.hands[state.to_move]]
    return rnd.sample(found, min(cases, len(found)))


def wide(args: argparse.Namespace, argv: Sequence[str] | None) -> int:
    """--wide: cold plan generation on a wide corpus, without and with the shipped table."""
    started = now()
    cases = wide_cases(args.matches, args.cases, args.seed)
    gc.collect()
    gc.freeze()
    print(f"# {header('engine_bench', started, argv)}")
    print(
        f"# python {platform.python_version()}, {len(cases)} (card, floor) cases drawn from "
        f"every decision of {args.matches} random matches; per row the memos start empty"
    )
    print("| measure | calls | median µs | p90 µs | p99 µs | max µs | mean µs |")
    print("|---|---|---|---|---|---|---|")
    install_plan_table(b"")
    clear_caches()
    print(
        row("plan generation, wide corpus, empty memo, no table", summary(timings(cases, _plans)))
    )
    print(row("same cases again (memo warm)", summary(timings(cases, _plans))))
    began = time.perf_counter()
    shapes = plan_table_file.install()
    loaded = time.perf_counter() - began
    clear_caches()
    print(
        row(
            "plan generation, wide corpus, empty memo, table installed",
            summary(timings(cases, _plans)),
        )
    )
    print(f"# table: {shapes} shapes installed in {loaded * 1000:.0f} ms")
    finish(None, started, argv, {})
    return 0


def _plans(case: tuple[int, int]) -> object:
    return plans_for(case[0], case[1])


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark and print markdown rows for BENCHMARKS.md."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--hands", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--brute-samples", type=int, default=20_000)
    parser.add_argument(
        "--gc-off",
        action="store_true",
        help="disable the cyclic GC while timing (shows its pauses)",
    )
    parser.add_argument(
        "--wide", action="store_true", help="cold plan generation on a wide corpus instead"
    )
    parser.add_argument("--matches", type=int, default=400, help="--wide: random matches")
    parser.add_argument("--cases", type=int, default=30_000, help="--wide: cases drawn")
    args = parser.parse_args(argv)
    if args.wide:
        return wide(args, argv)

    started = now()
    began = time.perf_counter()
    samples, applies, four_card = simulate(args.hands, args.seed)
    sim_seconds = time.perf_counter() - began
    # The benchmark's own millions of samples would make each full GC pass long; freezing
    # them keeps those pauses out of the figures (a worker's heap is small).
    gc.collect()
    gc.freeze()
    if args.gc_off:
        gc.disable()
    floors = [mask.bit_count() for _, mask in samples]
    print(f"# {header('engine_bench', started, argv)}")
    print(f"# python {platform.python_version()} on {platform.machine()}, {args.hands} hands")
    print(
        f"# simulated in {sim_seconds:.1f} s: {len(samples)} plan generations, "
        f"{len(applies)} applies; floor size median {statistics.median(floors)}, "
        f"90th {percentile(sorted(floors), 0.9)}, max {max(floors)}"
    )
    print(f"# max plan-search work on simulated floors: {max(plan_work(c, f) for c, f in samples)}")
    print("| measure | calls | median µs | p90 µs | p99 µs | max µs | mean µs |")
    print("|---|---|---|---|---|---|---|")

    clear_caches()
    cold = summary(timings(samples, lambda s: plans_for(s[0], s[1])))
    print(row("plan generation, one card, all simulated floors, from an empty memo", cold))
    warm = summary(timings(samples, lambda s: plans_for(s[0], s[1])))
    print(row("plan generation, one card, second pass (memo warm)", warm))

    rnd = random.Random(args.seed)
    subset = rnd.sample(samples, min(args.brute_samples, len(samples)))
    texts = [(code(c), codes(c2 for c2 in range(52) if f >> c2 & 1)) for c, f in subset]
    clear_caches()
    engine_subset = summary(timings(subset, lambda s: plans_for(s[0], s[1])))
    brute_subset = summary(timings(texts, lambda t: brute.plans(t[0], t[1])))
    print(row("plan generation on a random subset, engine from an empty memo", engine_subset))
    print(row("same subset, brute-force enumerator of the tests", brute_subset))
    print(
        "# brute/engine ratio on the same floors: "
        f"median {brute_subset['median'] / engine_subset['median']:.1f}x, "
        f"mean {brute_subset['mean'] / engine_subset['mean']:.1f}x"
    )

    clear_caches()
    four = four_card[:20_000]
    print(row("legal moves, 4-card hand, from an empty memo", summary(timings(four, legal_moves))))
    some = applies[:: max(1, len(applies) // 50_000)]
    clear_caches()
    print(
        row("apply one action, state check included", summary(timings(some, lambda p: apply(*p))))
    )

    worst: list[int] = []
    refused = 0
    for _name, played, mask in crafted_floors(random.Random(args.seed)):
        clear_caches()
        start = time.perf_counter_ns()
        try:
            plans_for(played, mask)
        except RuleError:
            refused += 1
        worst.append(time.perf_counter_ns() - start)
    print(
        row(
            f"crafted floors of 16-40 numeric cards ({refused} refused STATE_TOO_COMPLEX)",
            summary(worst),
        )
    )
    finish(None, started, argv, {})
    return 0


if __name__ == "__main__":
    sys.exit(main())
