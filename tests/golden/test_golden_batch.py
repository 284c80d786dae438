"""The golden corpus through BatchApply: every recorded Apply, sent in batches, gets its recorded
answer item for item (the corpus pins the unary answers; a batch embeds those very bytes)."""

from __future__ import annotations

from collections.abc import Iterator

import grpc
import pytest
from google.rpc import status_pb2  # type: ignore[import-untyped]

from service import batch, errors
from service.admission import Admission
from service.interceptors import CallObserver
from service.logs import make_logger
from testkit.golden import (
    OK,
    Case,
    Outcome,
    in_process_runners,
    load_cases,
    load_profiles,
)

ITEMS = 64
CALL_BYTES = 1 << 24


class NoDeadline:
    """The context of a call without a deadline (the batch asks nothing else of it)."""

    def time_remaining(self) -> None:
        """No deadline."""


def _cases() -> Iterator[tuple[str, list[Case]]]:
    by_profile: dict[str, list[Case]] = {}
    for case in load_cases():
        if case.rpc == "Apply":
            by_profile.setdefault(case.profile, []).append(case)
    yield from sorted(by_profile.items())


def _item_outcome(result: bytes) -> Outcome:
    item = batch.ResultWire.FromString(result)
    if item.WhichOneof("result") == "response":
        return Outcome(OK, item.response)
    rich = status_pb2.Status.FromString(item.status)
    code = next(c for c in grpc.StatusCode if c.value[0] == rich.code)
    return Outcome.refused(code, rich.message, [(errors.DETAILS_KEY, item.status)])


@pytest.mark.parametrize(("profile", "cases"), list(_cases()), ids=lambda v: str(v)[:20])
def test_every_recorded_apply_gets_its_answer_in_a_batch(profile: str, cases: list[Case]) -> None:
    """Each batch item's outcome is the unary path's for its bytes, which is the recorded one."""
    config = load_profiles()[profile]
    unary = in_process_runners()[profile]
    runner = batch.BatchApply(
        config.handlers(),
        admission=Admission(0),
        observer=CallObserver(None, make_logger("warning")),
        max_items=ITEMS,
        max_item_bytes=config.config.max_message_bytes,
        max_response_bytes=CALL_BYTES,
    )
    assert len(cases) > 10
    for chunk in (cases[i : i + ITEMS] for i in range(0, len(cases), ITEMS)):
        request = batch.RequestWire(requests=[case.request for case in chunk])
        answer = batch.ResponseWire.FromString(runner(request, NoDeadline()))  # type: ignore[arg-type]
        assert len(answer.results) == len(chunk)
        for case, result in zip(chunk, answer.results, strict=True):
            seen = _item_outcome(result)
            assert seen == unary("Apply", case.request), case.id
            assert seen.code == case.expected.code and seen.reason == case.expected.reason, case.id
