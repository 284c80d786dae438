"""The in-process fuzzer, in short: its requests all end as the rules say (long runs: see
testkit/fuzz.py and RELIABILITY.md)."""

from __future__ import annotations

from testkit.fuzz import fuzz

REQUESTS = 3000


def test_fuzzed_requests_end_as_answers_that_read_back_or_clean_refusals() -> None:
    """No unexpected outcome; every method answered and refused; the run reached the rules."""
    run = fuzz(REQUESTS, seed=1)
    assert run.unexpected == [] and run.unexpected_count == 0
    assert run.requests == REQUESTS
    for rpc in ("NewMatch", "Apply", "LegalMoves", "PlayerView", "Replay"):
        assert run.outcomes[f"{rpc} OK"] > 0, rpc
        assert any(k.startswith(f"{rpc} ") and not k.endswith(" OK") for k in run.outcomes), rpc
    assert {"INVALID_STATE", "MALFORMED_REQUEST", "NOT_YOUR_TURN"} <= set(run.reasons)
