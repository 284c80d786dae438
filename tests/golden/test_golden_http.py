"""The golden corpus over HTTP/JSON: the same answers as gRPC, in the proto3 JSON mapping.

One server per corpus profile (built as tests/golden/test_golden_wire.py builds them), each
behind its own basra-gateway; every case whose request has a JSON form is sent as that JSON
(json_format.MessageToJson of the recorded request) to the RPC's route. An answer must be the
recorded gRPC answer: the same message (compared by deterministic serialization) and the same
JSON value as json_format's canonical proto3 JSON of it (values, not text: protojson varies its
whitespace on purpose). A refusal must be the recorded one: the same code (by the HTTP status
grpc-gateway maps it to, and by the JSON Status's code), message, ErrorInfo reason, domain and
metadata. The cases without a JSON form are the requests whose bytes do not parse (the wire
cases): they are counted, and gRPC alone can carry them. BatchApply too: the recorded Apply
requests in batches, each item the recorded unary answer or refusal.
"""

from __future__ import annotations

import io
import json
from collections import Counter
from collections.abc import Iterator
from contextlib import ExitStack

import pytest
from basra.v1 import rules_pb2 as pb
from google.protobuf import json_format
from google.rpc import error_details_pb2  # type: ignore[import-untyped]

from service.interceptors import CallObserver
from service.logs import make_logger
from service.server import build_server
from service.servicer import METHODS
from testkit.golden import OK, Case, Outcome, load_cases, load_profiles
from testkit.http_calls import CODE_BY_NUMBER, HttpCaller, refusal
from testkit.http_gateway import gateway


@pytest.fixture(scope="module")
def callers() -> Iterator[dict[str, HttpCaller]]:
    """An HTTP caller for every profile of the corpus: its server behind its own gateway."""
    observer = CallObserver(None, make_logger("warning", "json", io.StringIO()))
    with ExitStack() as stack:
        made: dict[str, HttpCaller] = {}
        for name, profile in load_profiles().items():
            server = build_server(profile.config, observer, 0, profile.handlers())
            server.start()
            stack.callback(server.stop, 0)
            assert server.port > 0
            base = stack.enter_context(gateway(f"127.0.0.1:{server.port}"))
            made[name] = stack.enter_context(HttpCaller(base))
        yield made


def _request_json(case: Case) -> str | None:
    """The recorded request in the proto3 JSON mapping (None: its bytes do not parse)."""
    if case.data["request"]["json"] is None:
        return None
    request_type = METHODS[case.rpc][0]
    return json_format.MessageToJson(request_type.FromString(case.request))


def _differs(case: Case, caller: HttpCaller, body: str) -> str:
    """What differs between the HTTP answer to a case and its recorded gRPC one ("" if none)."""
    answer = caller.call(case.rpc, body)
    expected = case.expected
    if expected.code == OK:
        if answer.status != 200:
            return f"HTTP {answer.status}: {answer.body[:300]!r}"
        response_type = METHODS[case.rpc][1]
        wanted = response_type.FromString(expected.body)
        got = json_format.Parse(answer.body, response_type())  # unknown fields refused
        if got.SerializeToString(deterministic=True) != wanted.SerializeToString(
            deterministic=True
        ):
            return "another message"
        if answer.json() != json.loads(json_format.MessageToJson(wanted)):
            return "not the canonical proto3 JSON of the answer"
        return ""
    read = refusal(answer)
    actual = Outcome(
        read.code.name,
        b"",
        read.message,
        read.reason,
        read.domain,
        tuple(sorted(read.metadata.items())),
    )
    return "" if actual == expected else f"refused as {actual}"


@pytest.mark.parametrize("signed", [False, True], ids=["unsigned", "signed"])
def test_every_case_gets_the_recorded_answer_over_http(
    callers: dict[str, HttpCaller], signed: bool
) -> None:
    """Each case as JSON: the recorded message as canonical JSON, or the recorded refusal."""
    cases = [c for c in load_cases() if c.profile.startswith("signed") == signed]
    sent: Counter[str] = Counter()
    without_json = []
    differing = []
    for case in cases:
        body = _request_json(case)
        if body is None:
            without_json.append(case.id)
            continue
        sent["answered" if case.expected.code == OK else "refused"] += 1
        found = _differs(case, callers[case.profile], body)
        if found:
            differing.append((case.id, found))
    assert differing == []
    # Calls flowed, answers and refusals alike, and only the unparsable requests stayed out.
    assert sent["answered"] > 100 and sent["refused"] > 50, sent
    assert all(i.split("/")[0].endswith("-wire") for i in without_json), without_json
    assert len(without_json) < len(cases) // 10


ITEMS = 64  # the default --max-batch-items: the profiles' servers run the default


def _item_outcome(result: pb.ApplyResult) -> Outcome:
    """A batch item's outcome, as the unary call's is compared."""
    if result.WhichOneof("result") == "response":
        return Outcome(OK, result.response.SerializeToString(deterministic=True))
    (detail,) = result.status.details
    info = error_details_pb2.ErrorInfo()
    assert detail.Unpack(info), detail
    metadata = tuple(sorted(info.metadata.items()))
    code = CODE_BY_NUMBER[result.status.code].name
    return Outcome(code, b"", result.status.message, info.reason, info.domain, metadata)


@pytest.mark.parametrize("profile", ["unsigned", "signed"])
def test_every_recorded_apply_gets_its_answer_in_a_batch_over_http(
    callers: dict[str, HttpCaller], profile: str
) -> None:
    """The profile's Apply cases in batches of 64, as JSON: each item the recorded answer (the
    same message) or the recorded refusal (code, message, reason, domain, metadata)."""
    cases = [
        c
        for c in load_cases()
        if c.profile == profile and c.rpc == "Apply" and c.data["request"]["json"] is not None
    ]
    assert len(cases) > 100
    differing = []
    for chunk in (cases[i : i + ITEMS] for i in range(0, len(cases), ITEMS)):
        batch = pb.BatchApplyRequest(
            requests=[pb.ApplyRequest.FromString(c.request) for c in chunk]
        )
        answer = callers[profile].call("BatchApply", json_format.MessageToJson(batch))
        assert answer.status == 200, answer.body[:300]
        results = json_format.Parse(answer.body, pb.BatchApplyResponse()).results
        assert len(results) == len(chunk)
        for case, result in zip(chunk, results, strict=True):
            expected = case.expected
            if expected.code == OK:
                body = pb.ApplyResponse.FromString(expected.body).SerializeToString(
                    deterministic=True
                )
                expected = Outcome(OK, body)
            if _item_outcome(result) != expected:
                differing.append((case.id, _item_outcome(result)))
    assert differing == []
