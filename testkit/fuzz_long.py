"""The long coverage-guided run: the atheris target of every RPC of the contract for its share of
the executions (BatchApply's a quarter of another's: its inputs are batches of Apply requests),
two at a time, each into a corpus of its own under --work; then a summary.

    nice -n 10 .venv/bin/python -m testkit.fuzz_long --runs 1000000 --work /tmp/fuzz-long

prints (and writes to WORK/summary.json) each RPC's executions, seconds, coverage (libFuzzer's
edge count) and exit status, and the unexpected outcomes: crash, leak, timeout or out-of-memory
artifacts and non-zero exits; it exits 1 on any. The lines of engine/, wire/ and service/ the
corpus reaches are measured by replaying it under coverage.py (RELIABILITY.md has the command).
With --keep, it only adds to the repository's corpus, tests/fuzz/corpus, the inputs of WORK's
that reach lines the seeds and the inputs kept there do not (coverage.py).
"""

from __future__ import annotations

import argparse
import json
import math
import re
import shutil
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from testkit import atheris_target
from testkit.fuzz_calls import BATCH, Worker
from testkit.fuzz_inputs import CORPUS, REPO, corpus_inputs, run_input, seeds
from testkit.rpcs import methods

LANES = 2
KEPT_BYTES = 64 * 1024  # larger inputs (padded to the request bound) stay out of the repository
# A BatchApply input holds up to 64 Apply requests, each also sent alone to compare: it gets a
# quarter of another RPC's share of the executions, so that its lane ends with the other's.
BATCH_WEIGHT = 0.25


def one(method: str, runs: int, work: Path) -> dict[str, Any]:
    """Run one RPC's target for `runs` executions; its figures from libFuzzer's log."""
    corpus, artifacts = work / "corpus" / method, work / "artifacts" / method
    corpus.mkdir(parents=True, exist_ok=True)
    artifacts.mkdir(parents=True, exist_ok=True)
    log = work / f"{method}.log"
    began = time.monotonic()
    with log.open("w") as out:
        args = [f"-runs={runs}", f"-artifact_prefix={artifacts}/", "-print_final_stats=1"]
        done = atheris_target.run(method, [*args, str(corpus)], cwd=REPO, stdout=out, stderr=out)
    text = log.read_text(errors="replace")
    ran = re.search(r"stat::number_of_executed_units: (\d+)", text)
    cov = re.findall(r"cov: (\d+)", text)
    return {
        "runs": int(ran.group(1)) if ran else 0,
        "seconds": round(time.monotonic() - began, 1),
        "coverage_edges": int(cov[-1]) if cov else 0,
        "corpus": sum(1 for _ in corpus.iterdir()),
        "exit": done.returncode,
        "artifacts": sorted(p.name for p in artifacts.iterdir()),
    }


def keep(method: str, work: Path) -> int:
    """Add to the repository's corpus (tests/fuzz/corpus/<RPC>/) the inputs of the run's corpus
    of `method` that reach lines of engine/, wire/ or service/ which the seeds and the inputs
    kept so far do not, the smallest first; return how many were added."""
    import coverage  # only here: the fuzz targets themselves do without it

    worker = Worker()
    measure = coverage.Coverage(data_file=None, source=["engine", "wire", "service"])

    def lines(inputs: Sequence[bytes]) -> set[tuple[str, int]]:
        measure.erase()
        measure.start()
        for data in inputs:
            run_input(worker, method, data)
        measure.stop()
        measured = measure.get_data()
        return {(f, n) for f in measured.measured_files() for n in measured.lines(f) or ()}

    kept = CORPUS / method
    known = lines([*seeds(method), *(data for _, data in corpus_inputs(method, [CORPUS]))])
    found = sorted((work / "corpus" / method).iterdir(), key=lambda p: (p.stat().st_size, p.name))
    added = 0
    for path in found:
        new = lines([path.read_bytes()]) - known
        if new and path.stat().st_size <= KEPT_BYTES:
            kept.mkdir(parents=True, exist_ok=True)
            shutil.copy(path, kept / path.name)
            known |= new
            added += 1
    return added


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: run every target, print the summary; 1 on any unexpected outcome."""
    parser = argparse.ArgumentParser(prog="python -m testkit.fuzz_long")
    parser.add_argument("--runs", type=int, default=1_000_000, help="executions in all")
    parser.add_argument("--work", type=Path, required=True, help="corpora, artifacts, logs")
    parser.add_argument(
        "--keep",
        action="store_true",
        help="only keep WORK's new lines' inputs in tests/fuzz/corpus",
    )
    args = parser.parse_args(argv)
    if args.keep:
        print(json.dumps({m: keep(m, args.work) for m in methods()}))
        return 0
    rpcs = sorted(methods(), key=lambda m: m != BATCH)  # the slowest first: lanes end together
    weights = {m: BATCH_WEIGHT if m == BATCH else 1.0 for m in rpcs}
    shares = {m: math.ceil(args.runs * w / sum(weights.values())) for m, w in weights.items()}
    began = time.monotonic()
    with ThreadPoolExecutor(LANES) as lanes:
        ran = lanes.map(lambda m: one(m, shares[m], args.work), rpcs)
        results = dict(zip(rpcs, ran, strict=True))
    unexpected = sum(len(r["artifacts"]) + (r["exit"] != 0) for r in results.values())
    summary = {
        "runs": sum(r["runs"] for r in results.values()),
        "seconds": round(time.monotonic() - began, 1),
        "unexpected": unexpected,
        "per_rpc": results,
    }
    print(json.dumps(summary, indent=1))
    (args.work / "summary.json").write_text(json.dumps(summary, indent=1))
    return 1 if unexpected else 0


if __name__ == "__main__":
    sys.exit(main())
