"""The in-process fuzzer, in short: its requests, of every RPC of the contract, all end as the
rules say (long runs: see testkit/fuzz.py and RELIABILITY.md)."""

from __future__ import annotations

import re
from pathlib import Path

from testkit.fuzz import fuzz
from testkit.rpcs import methods

REQUESTS = 3000
PROTO = Path(__file__).resolve().parents[2] / "proto" / "basra" / "v1" / "rules.proto"


def test_the_fuzzed_methods_are_the_rpcs_of_the_proto() -> None:
    """The list the fuzzers draw from is the contract's, read from the generated descriptor:
    here held against the .proto's own text."""
    written = re.findall(r"^\s*rpc (\w+)\(", PROTO.read_text(encoding="utf-8"), re.MULTILINE)
    assert list(methods()) == written
    assert "BatchApply" in written


def test_fuzzed_requests_end_as_answers_that_read_back_or_clean_refusals() -> None:
    """No unexpected outcome; every method answered and refused; the run reached the rules and
    the batch's own cases."""
    run = fuzz(REQUESTS, seed=1)
    assert run.unexpected == [] and run.unexpected_count == 0
    assert run.requests == REQUESTS
    for rpc in methods():
        assert any(k.startswith(f"{rpc} ") and not k.endswith(" OK") for k in run.outcomes), rpc
        if rpc != "SuggestMove":  # its budgets make mutated requests slow: refusals only here
            assert run.outcomes[f"{rpc} OK"] > 0, rpc
    assert {"INVALID_STATE", "MALFORMED_REQUEST", "NOT_YOUR_TURN"} <= set(run.reasons)
    # The batch's own: refused whole (too many items, too large, unreadable) and item by item.
    assert {"TOO_MANY_ITEMS", "REQUEST_TOO_LARGE", "DEADLINE_EXPIRED"} <= set(run.reasons)
    assert {"item OVERLOADED", "item DEADLINE_EXPIRED", "item INVALID_STATE"} <= set(run.reasons)
    assert run.outcomes["BatchApply item OK"] > 0
