"""The coverage-guided fuzz targets (testkit/atheris_target.py), every RPC of the contract, in
short runs; the replay of their seeds and of the corpus kept in tests/fuzz/corpus; and the
oracle they share catching what it must (long runs: RELIABILITY.md)."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc
import pytest
from basra.v1 import rules_pb2 as pb

from service import batch
from service.servicer import serve
from testkit import atheris_target
from testkit.fuzz_calls import Context, Worker, check, item_outcome, reason
from testkit.fuzz_inputs import CORPUS, REPO, corpus_inputs, replay, seeds
from testkit.golden import load_cases
from testkit.rpcs import methods

RUNS = 500  # executions of each target, its seeds and the kept corpus first
SECONDS = 8  # each target's guard on its time (libFuzzer's -max_total_time)


@pytest.mark.parametrize("method", list(methods()))
def test_the_target_of_each_rpc_fuzzes_from_its_seeds_with_nothing_unexpected(
    method: str, tmp_path: Path
) -> None:
    """libFuzzer read the seeds and the kept corpus, ran inputs past them, and ended with no
    crash, leak, timeout or finding (each would be an artifact and a non-zero exit)."""
    done = atheris_target.run(
        method,
        [
            f"-runs={RUNS}",
            f"-max_total_time={SECONDS}",
            f"-artifact_prefix={tmp_path}/",
            str(tmp_path / "corpus"),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-4000:]
    assert [p.name for p in tmp_path.iterdir() if p.name != "corpus"] == []
    loaded = re.search(r"seed corpus: files: (\d+)", out)
    assert loaded is not None, out[-2000:]
    kept = sum(1 for _ in corpus_inputs(method, [CORPUS]))
    # (libFuzzer runs the empty input anyway, and counts no empty file among the seeds.)
    assert int(loaded.group(1)) == sum(1 for data in seeds(method) if data) + kept
    ran = re.search(r"Done (\d+) runs", out)
    assert ran is not None and int(ran.group(1)) >= int(loaded.group(1)), out[-2000:]
    assert "INITED cov:" in out  # the instrumented code reported coverage


def test_the_seeds_and_the_kept_corpus_replay_with_nothing_unexpected() -> None:
    counts, found = replay([CORPUS])
    assert found == []
    for method in methods():
        assert counts[method] >= len(seeds(method)) > 0, method


def test_the_kept_corpus_is_of_the_contracts_rpcs() -> None:
    """tests/fuzz/corpus holds a directory for each RPC at most, named as the contract does."""
    assert {p.name for p in CORPUS.iterdir() if p.is_dir()} <= set(methods())


def test_the_seeds_are_the_golden_requests_and_batches_of_them() -> None:
    golden = {case.request for case in load_cases() if case.rpc == "Apply"}
    assert set(seeds("Apply")) == golden
    counts = []
    for data in seeds("BatchApply"):
        items = batch.RequestWire.FromString(data[4:]).requests
        assert set(items) <= golden
        counts.append(len(items))
    assert {0, 1, 64, 65} <= set(counts)  # at, under and over the item bound


# ---- the oracle finds what it must ----


def _apply_bytes() -> bytes:
    return next(c.request for c in load_cases() if c.rpc == "Apply" and c.expected.code == "OK")


def _answering(worker: Worker, method: str, behaviour: Callable[[Any, Any], bytes]) -> None:
    """Register `behaviour` as the worker's handler of `method` (its request reader kept)."""
    registered: Any = worker.registered[method]  # a namedtuple, whatever grpc's stubs say
    worker.registered[method] = registered._replace(unary_unary=behaviour)


def test_an_exception_of_a_handler_is_a_finding() -> None:
    """Through the servicer's own path (`serve`): INTERNAL; out of the handler: escaping."""
    worker = Worker()
    _answering(worker, "Apply", lambda request, context: serve(None, _raise, request, context))
    found = check(worker, "Apply", _apply_bytes())[1]
    assert found == ["Apply ended INTERNAL"]
    _answering(worker, "Apply", _raise)
    found = check(worker, "Apply", _apply_bytes())[1]
    assert found == ["Apply raised KeyError: 'a bug'"]


def _raise(request: object, facts: object) -> bytes:
    raise KeyError("a bug")


def test_an_answer_for_a_state_the_engine_refuses_is_a_finding() -> None:
    worker = Worker()
    request = pb.ApplyRequest.FromString(_apply_bytes())
    request.state.floor.append(request.state.deck[0])  # a card twice
    answer = worker.call("Apply", _apply_bytes()).body
    _answering(worker, "Apply", lambda request, context: answer)
    found = check(worker, "Apply", request.SerializeToString())[1]
    assert len(found) == 1 and "state the engine refuses" in found[0]


def test_a_batch_item_unlike_its_unary_apply_is_a_finding() -> None:
    worker = Worker()
    good = _apply_bytes()
    refusal = worker.call("Apply", b"").status
    body = batch.RequestWire(requests=[good, good]).SerializeToString()
    wrong = batch.ResponseWire(
        results=[
            batch.ResultWire(response=worker.call("Apply", good).body).SerializeToString(),
            batch.ResultWire(status=refusal).SerializeToString(),
        ]
    ).SerializeToString()
    _answering(worker, "BatchApply", lambda request, context: wrong)
    found = check(worker, "BatchApply", body)[1]
    assert found and "item 1 ended otherwise than its unary Apply" in found[0]


def test_batch_only_refusals_are_findings_only_where_they_may_not_be() -> None:
    """A deadline that runs out part-way and a bound with little room are the batch's own
    refusals, no finding; an item refused OVERLOADED by a worker with no bound is one."""
    worker = Worker()
    items = [c.request for c in load_cases() if c.rpc == "Apply"][:40]
    body = batch.RequestWire(requests=items).SerializeToString()
    ended, found = check(worker, "BatchApply", body, Context(0.006, 0.002), admission=(8, 5))
    assert found == [] and ended is not None and ended.code is grpc.StatusCode.OK
    results = list(batch.ResponseWire.FromString(ended.body).results)
    reasons = [reason(item_outcome(result)) for result in results]
    assert reasons[3:] == ["OVERLOADED"] * (len(items) - 3)  # the call's unit and the 2 left
    assert reasons[:3] == ["", "DEADLINE_EXPIRED", "DEADLINE_EXPIRED"]  # time ran out after one
    overloaded = batch.ResponseWire(results=results[3:]).SerializeToString()
    _answering(worker, "BatchApply", lambda request, context: overloaded)
    found = check(worker, "BatchApply", batch.RequestWire(requests=items[3:]).SerializeToString())[
        1
    ]
    assert len(found) == 1 and "item 0 refused OVERLOADED without a bound" in found[0]
