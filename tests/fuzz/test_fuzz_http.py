"""Fuzzing the HTTP/JSON port: a real `basra-rules serve` behind basra-gateway takes the in-process
fuzzer's requests as JSON, broken JSON, flipped bytes, bad headers and huge bodies
(testkit/http_fuzz.py says which and the rules each answer keeps): every one ends in a 200
that reads back as the handlers' answer or a clean refusal, never a 500; the server and the
gateway stay up, a valid call still works, and no call ended INTERNAL or UNKNOWN (the server's
log lines and its grpc_server_handled_total counters).

Budget: BASRA_HTTP_FUZZ_INPUTS inputs (default 600); BASRA_HTTP_FUZZ_REPORT names a JSON file
that receives the counts by kind, HTTP status and reason (RELIABILITY.md).
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator

import grpc
import pytest

from service.servicer import SERVICE_NAME
from testkit import harness
from testkit.calls import scrape_until
from testkit.http_calls import GATEWAY_REASONS, HTTP_STATUS, HttpCaller
from testkit.http_fuzz import run
from testkit.http_gateway import RunningGateway, binary, running

INPUTS = int(os.environ.get("BASRA_HTTP_FUZZ_INPUTS", "600"))
REPORT = os.environ.get("BASRA_HTTP_FUZZ_REPORT")
SEED = int(os.environ.get("BASRA_HTTP_FUZZ_SEED", "43"))
pytestmark = pytest.mark.timeout(max(300.0, INPUTS * 0.2))
HANDLED = "grpc_server_handled_total"


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[harness.ServedProcess, RunningGateway]]:
    """`basra-rules serve` (one worker, the defaults, /metrics on) behind basra-gateway."""
    server = harness.start(["--workers", "1"], metrics=True)
    try:
        with running(server.target) as front:
            yield server, front
    finally:
        server.stop()


def _handled(samples: dict[str, float], *codes: str) -> float:
    """The RulesService calls the server counted as ended, with one of `codes` (all: none
    given), every transport (all come through the gateway, the valid Applies too)."""
    total = 0.0
    for name, value in samples.items():
        if not name.startswith(HANDLED + "{") or f'grpc_service="{SERVICE_NAME}"' not in name:
            continue
        if not codes or any(f'grpc_code="{code}"' in name for code in codes):
            total += value
    return total


def test_fuzzed_http_inputs_end_in_answers_or_clean_refusals(
    served: tuple[harness.ServedProcess, RunningGateway],
) -> None:
    """No finding; every kind of input sent and refused, the structured ones answered too;
    the server and the gateway up after, and nothing ended INTERNAL or UNKNOWN."""
    server, front = served
    with HttpCaller(front.url) as caller:
        tally = run(caller, INPUTS, SEED)
    if REPORT:
        with open(REPORT, "w") as out:
            json.dump(tally.report(), out, indent=1)
    assert tally.findings == [] and tally.finding_count == 0
    assert tally.inputs > INPUTS  # the inputs and the valid calls between them
    kinds = {key.split()[0] for key in tally.outcomes}
    assert {"structured", "raw", "json", "bytes", "headers", "check"} <= kinds, kinds
    assert tally.outcomes["structured 200"] > 0 and tally.outcomes["check 200"] > INPUTS // 100
    # The gateway's own refusals and the server's, both reached.
    assert {"MALFORMED_JSON", "UNKNOWN_FIELD", "INVALID_VALUE"} <= set(tally.reasons)
    assert {"INVALID_STATE", "MALFORMED_REQUEST"} & set(tally.reasons), tally.reasons
    # Both processes up; nothing of ours failed.
    assert server.process.poll() is None and front.process.poll() is None
    assert len(server.workers()) == 1 and server.find("worker died, replacing it") == []
    with server.arrived:
        bad = [line for line in server.lines if line.get("code") in ("UNKNOWN", "INTERNAL")]
    assert bad == []
    assert not [line for line in front.text if "panic" in line.lower()]
    answered = tally.outcomes["structured 200"] + tally.outcomes["check 200"]
    samples = scrape_until(server, lambda s: _handled(s) >= answered)
    assert _handled(samples) >= answered
    assert _handled(samples, "INTERNAL", "UNKNOWN") == 0
    # Counted as HTTP calls, in the one outcome path (the gateway's transport label).
    http = sum(v for k, v in samples.items() if 'transport="http"' in k and k.startswith(HANDLED))
    assert http == _handled(samples), samples  # the health checks are the only gRPC calls


def test_the_gateway_refusals_known_here_are_the_gateways() -> None:
    """The fuzzer's table of the gateway's own reasons and their HTTP statuses, and its code
    mapping, are what `basra-gateway --describe` says the binary does (DEADLINE_EXPIRED is
    the server's reason too, known here from the service)."""
    described = json.loads(
        subprocess.run(
            [str(binary()), "--describe"], check=True, capture_output=True, text=True, timeout=30
        ).stdout
    )
    statuses = {r["reason"]: r["http"] for r in described["reasons"]}
    statuses.pop("DEADLINE_EXPIRED")
    assert set(statuses) == set(GATEWAY_REASONS)
    for reason, http_status in statuses.items():
        code = grpc.StatusCode[
            next(r["code"] for r in described["reasons"] if r["reason"] == reason)
        ]
        assert (GATEWAY_REASONS[reason] or HTTP_STATUS[code]) == http_status, reason
    assert described["codes"] == {code.name: status for code, status in HTTP_STATUS.items()}
