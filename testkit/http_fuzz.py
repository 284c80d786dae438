"""Fuzzing the HTTP/JSON port: the fuzzers' requests as JSON, and JSON, bodies and headers broken.

Five kinds of input, each one POST (or another method) to basra-gateway in front of a real
server:
- structured: a request of testkit.fuzz (the in-process fuzzer's mix: mutated states, random
  actions, legal actions, batches, raw random bytes, valid requests with bytes flipped) that
  parses as its RPC's request, sent as its proto3 JSON; its answer must be what the handlers
  in this process give the same message (testkit.fuzz_calls.Worker): the same answer, or the
  same code and reason. One that does not parse goes as the body itself (garbage for JSON);
- json: a valid request's JSON with one change: a value of the wrong type, an unknown field,
  a number out of range, an unknown enum name, bad base64, a duplicate key, a top level that
  is no object, deep nesting, invalid UTF-8, trailing data, a comment, a truncation;
- bytes: a valid request's JSON text with one to three bytes changed;
- headers: a valid request with a bad Content-Type, Grpc-Timeout, traceparent, tracestate or
  X-Request-Id, another method, or another path;
- huge: a body just past the gateway's --max-body-bytes, with a Content-Length or chunked.

Every answer must be a 200 whose body parses as the response message, or a refusal: the
JSON google.rpc.Status with one ErrorInfo (domain basra.v1, a reason of the service's or of
the gateway's own) under the HTTP status its code maps to (the gateway's reasons: theirs).
Never a 5xx but a deadline's 504 (DEADLINE_EXPIRED, the call's own time running out, counted),
never a connection closed without an answer.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import grpc
from basra.v1 import rules_pb2 as pb
from google.protobuf import json_format
from google.protobuf.message import DecodeError, Message

from service import errors
from testkit import fuzz
from testkit.fuzz_calls import BATCH, Worker, batch_view, reason
from testkit.http_calls import GATEWAY_REASONS, HttpCaller, refusal, route
from testkit.http_gateway import Answer
from testkit.rpcs import methods

MAX_BODY_BYTES = 4 << 20  # basra-gateway's default --max-body-bytes
KNOWN = frozenset(errors.known_reasons()) | frozenset(GATEWAY_REASONS)
DEADLINE = grpc.StatusCode.DEADLINE_EXCEEDED
MAX_SAMPLES = 20
KINDS = ("structured", "json", "bytes", "headers", "huge")
KIND_WEIGHTS = (50, 25, 10, 14, 1)


@dataclass(frozen=True)
class Input:
    """One HTTP request to send and, for a structured one, the message it carries."""

    kind: str
    rpc: str
    body: bytes
    headers: dict[str, str] = field(default_factory=lambda: {"Content-Type": "application/json"})
    method: str = "POST"
    path: str = ""
    message: Message | None = None
    """The request as parsed (structured inputs): the answer must be the handlers' to it."""
    chunked: bool = False


@dataclass
class Tally:
    """Inputs sent, by kind and outcome; the findings."""

    inputs: int = 0
    outcomes: Counter[str] = field(default_factory=Counter)
    reasons: Counter[str] = field(default_factory=Counter)
    findings: list[str] = field(default_factory=list)
    finding_count: int = 0

    def finding(self, text: str) -> None:
        """Record a finding (a sample of them kept)."""
        self.finding_count += 1
        if len(self.findings) < MAX_SAMPLES:
            self.findings.append(text[:2000])

    def report(self) -> dict[str, Any]:
        """The tally as JSON."""
        return {
            "inputs": self.inputs,
            "outcomes": dict(sorted(self.outcomes.items())),
            "reasons": dict(sorted(self.reasons.items())),
            "findings": self.finding_count,
            "finding_samples": self.findings,
        }


class HttpFuzzer:
    """Inputs made from a seed, sent through one caller, each held to the rules above."""

    def __init__(self, caller: HttpCaller, seed: int, matches: int = 6) -> None:
        self.caller = caller
        self.rnd = random.Random(seed)
        self.pool = fuzz.state_pool(matches)
        self.worker = Worker()
        self.tally = Tally()

    # ---- making inputs ----

    def next_input(self) -> Input:
        """One input of a kind drawn by KIND_WEIGHTS."""
        kind = self.rnd.choices(KINDS, KIND_WEIGHTS)[0]
        if kind == "structured":
            return self.structured()
        rpc, valid = self.valid_json()
        if kind == "json":
            return Input(kind, rpc, json_mutation(self.rnd, valid))
        if kind == "bytes":
            return Input(kind, rpc, fuzz.flipped(self.rnd, valid))
        if kind == "headers":
            return header_mutation(self.rnd, rpc, valid)
        return huge(self.rnd, rpc)

    def structured(self) -> Input:
        """A request of the in-process fuzzer: its JSON, or its bytes when they do not parse."""
        request = fuzz.requests(self.rnd, self.pool)
        kind = methods()[request.method][0]
        try:
            message = kind.FromString(request.body)
        except DecodeError:
            return Input("raw", request.method, request.body)
        body = json_format.MessageToJson(message, indent=None).encode()
        return Input("structured", request.method, body, message=message)

    def valid_json(self) -> tuple[str, bytes]:
        """A well-formed request of a random RPC, as proto3 JSON text."""
        rpc = self.rnd.choice(sorted(methods()))
        state = pb.State.FromString(self.rnd.choice(self.pool))
        message = methods()[rpc][0].FromString(fuzz.valid(rpc, state, self.rnd))
        return rpc, json_format.MessageToJson(message, indent=None).encode()

    # ---- sending and checking ----

    def send(self, item: Input) -> Answer | None:
        """Send one input; check its answer; tally it. The answer (None: none came)."""
        self.tally.inputs += 1
        path = item.path or route(item.rpc)
        try:
            answer = self.caller.send(
                item.method, path, item.body, item.headers, chunked=item.chunked
            )
        except OSError as error:  # closed without an answer, or no answer in time
            self.tally.outcomes[f"{item.kind} no answer"] += 1
            self.tally.finding(f"{item.kind} {item.rpc}: no answer ({error!r})")
            return None
        problems = self.check(item, answer)
        for problem in problems:
            self.tally.finding(
                f"{item.kind} {item.method} {path} {item.headers}: {problem}; "
                f"body {item.body[:300]!r}; answer {answer.status} {answer.body[:300]!r}"
            )
        return answer

    def check(self, item: Input, answer: Answer) -> list[str]:
        """The rules an answer breaks (none: [])."""
        if answer.status == 200:
            self.tally.outcomes[f"{item.kind} 200"] += 1
            if len(item.body) > MAX_BODY_BYTES:
                return ["a body past the bound answered"]
            return self._answered(item, answer)
        try:
            read = refusal(answer)
        except (AssertionError, ValueError, KeyError, json_format.ParseError) as error:
            self.tally.outcomes[f"{item.kind} {answer.status} unreadable"] += 1
            return [f"not a refusal: {error!r}"]
        self.tally.outcomes[f"{item.kind} {answer.status} {read.reason}"] += 1
        self.tally.reasons[read.reason] += 1
        problems = []
        if read.domain != "basra.v1" or read.reason not in KNOWN:
            problems.append(f"an unknown refusal {read.domain} {read.reason}")
        if answer.status >= 500 and read.code is not DEADLINE:
            problems.append(f"a {answer.status}")
        if len(item.body) > MAX_BODY_BYTES:  # refused by the gateway, whatever it holds
            if read.reason != "BODY_TOO_LARGE":
                problems.append(f"a body past the bound refused {read.reason}")
        elif item.message is not None and read.code is not DEADLINE:
            expected = self.worker.call(item.rpc, item.message.SerializeToString())
            if expected.code is grpc.StatusCode.OK:
                problems.append(f"refused ({read.reason}) what the handlers answer")
            elif (expected.code, reason(expected)) != (read.code, read.reason):
                problems.append(f"refused {read.reason}, the handlers {reason(expected)}")
        return problems

    def _answered(self, item: Input, answer: Answer) -> list[str]:
        response_type = methods()[item.rpc][1]
        try:
            got = json_format.Parse(answer.body, response_type())
        except json_format.ParseError as error:
            return [f"a 200 whose body is no {response_type.__name__}: {error}"]
        if item.message is None:
            return []
        expected = self.worker.call(item.rpc, item.message.SerializeToString())
        if expected.code is not grpc.StatusCode.OK:
            return [f"answered what the handlers refuse ({reason(expected)})"]
        if item.rpc == "NewMatch" and not item.message.seed:  # type: ignore[attr-defined]
            return []  # the server drew the seed: not comparable
        if item.rpc == BATCH:
            same = batch_view(got.SerializeToString()) == batch_view(expected.body)
        else:
            same = got == response_type.FromString(expected.body)
        return [] if same else ["another answer than the handlers'"]


# ---- JSON mutations ----

WRONG_VALUES: tuple[Any, ...] = (
    True,
    False,
    None,
    0,
    -1,
    1.5,
    1e300,
    "x",
    "",
    [],
    {},
    [1],
    {"a": 1},
)
BIG_NUMBERS = ("18446744073709551616", "-9223372036854775809", "1e400", "1.5", "-0", "0x10", "NaN")
TEXT_CHANGES = (
    lambda t: t[: len(t) // 2],  # truncated
    lambda t: t + b"garbage",  # trailing data
    lambda t: t + b"{}",  # a second value
    lambda t: b"// a comment\n" + t,
    lambda t: t.replace(b'"', b"'"),  # single quotes
    lambda t: t[:-1] + b",}" if t.endswith(b"}") else t + b",",  # a trailing comma
    lambda t: b"\xef\xbb\xbf" + t,  # a byte-order mark
    lambda t: t.replace(b'":', b'":\xff', 1),  # invalid UTF-8
)
TOP_LEVELS = (b"[]", b"1", b'"text"', b"null", b"true", b"", b"   ", b"{", b"}", b"\x00")


def json_mutation(rnd: random.Random, valid: bytes) -> bytes:
    """A valid request's JSON with one change (see the module's docstring)."""
    roll = rnd.random()
    if roll < 0.1:
        return rnd.choice(TOP_LEVELS)
    if roll < 0.2:
        changed: bytes = rnd.choice(TEXT_CHANGES)(valid)
        return changed
    if roll < 0.25:
        depth = rnd.choice((64, 1000, 20000))
        return b'{"state":' + b"[" * depth + b"]" * depth + b"}"
    if roll < 0.3:
        key = valid[2 : valid.index(b'"', 2)] if valid.startswith(b'{"') else b"seq"
        return b'{"' + key + b'":1,' + valid[1:]  # a duplicate key (or one more)
    data = json.loads(valid)
    nodes = list(_nodes(data))
    if not nodes:
        return json.dumps({"unknownField": 1}).encode()
    holder, key = rnd.choice(nodes)
    if roll < 0.5:
        holder[key] = rnd.choice(WRONG_VALUES)
    elif roll < 0.65:
        target = holder if isinstance(holder, dict) else data
        target[rnd.choice(("unknownField", "to_moves", "@type", "", "Seq", "x" * 100))] = 1
    elif roll < 0.8:
        return _raw_value(data, holder, key, rnd.choice(BIG_NUMBERS)).encode()
    elif roll < 0.9:
        holder[key] = rnd.choice(("STATUS_NOPE", "BOT_LEVEL_ULTRA", "!!!not base64", "AC AC", "🂡"))
    else:
        holder[key] = "x" * rnd.choice((1000, 100_000))
    return json.dumps(data, ensure_ascii=rnd.random() < 0.5).encode()


def _nodes(data: Any) -> Any:
    """Every (holder, key) of a JSON value's members and elements."""
    if isinstance(data, dict):
        for key, value in data.items():
            yield data, key
            yield from _nodes(value)
    elif isinstance(data, list):
        for index, value in enumerate(data):
            yield data, index
            yield from _nodes(value)


def _raw_value(data: Any, holder: Any, key: Any, raw: str) -> str:
    """The JSON text of `data` with one member's value written as `raw` (a number JSON cannot
    hold, or a spelling of one that it can)."""
    marker = "\u0001marker\u0001"
    holder[key] = marker
    return json.dumps(data, ensure_ascii=False).replace(json.dumps(marker, ensure_ascii=False), raw)


# ---- bad headers, methods and paths ----

CONTENT_TYPES = (
    None,
    "",
    "text/plain",
    "application/xml",
    "application/x-www-form-urlencoded",
    "multipart/form-data; boundary=x",
    "application/json; charset=utf-8",
    "application/json; charset=latin-1",
    "APPLICATION/JSON",
    "application/jsonx",
    "application/grpc",
    "application/grpc-web+json",
    "garbage;;;=",
    "application/json; charset=utf-8; x=y",
)
TIMEOUTS = ("", "abc", "-1S", "0S", "1n", "1u", "99999999H", "1.5S", "1S1S", "100000000000M", "5Q")
METHODS = ("GET", "PUT", "DELETE", "PATCH", "OPTIONS")
PATHS = (
    "/",
    "/basra.v1.RulesService/Nope",
    "/basra.v1.Other/Apply",
    "/basra.v1.RulesService/Apply/extra",
    "/basra.v1.RulesService/apply",
    "//basra.v1.RulesService/Apply",
    "/basra.v1.RulesService/Apply?x=1&y",
    "/basra.v1.RulesService/" + "A" * 5000,
)


def junk(rnd: random.Random, longest: int = 200) -> str:
    """Printable ASCII junk, sometimes with Latin-1 bytes (allowed in HTTP field values)."""
    alphabet = [chr(c) for c in range(0x20, 0x7F)]
    if rnd.random() < 0.3:
        alphabet += [chr(c) for c in range(0xA0, 0x100)]
    return "".join(rnd.choice(alphabet) for _ in range(rnd.randint(0, longest))).strip()


def header_mutation(rnd: random.Random, rpc: str, body: bytes) -> Input:
    """A valid request with one thing about its headers, method or path wrong."""
    headers = {"Content-Type": "application/json"}
    roll = rnd.random()
    if roll < 0.2:
        chosen = rnd.choice(CONTENT_TYPES)
        del headers["Content-Type"]
        if chosen is not None:
            headers["Content-Type"] = chosen
    elif roll < 0.4:
        headers["Grpc-Timeout"] = rnd.choice((*TIMEOUTS, junk(rnd, 20)))
    elif roll < 0.6:
        trace = f"00-{rnd.randbytes(16).hex()}-{rnd.randbytes(8).hex()}-01"
        headers["traceparent"] = rnd.choice(
            (trace, "00-" + "0" * 32 + "-" + "0" * 16 + "-01", junk(rnd), "x" * 8000)
        )
    elif roll < 0.7:
        headers["tracestate"] = junk(rnd, 2000)
    elif roll < 0.8:
        headers["X-Request-Id"] = rnd.choice((junk(rnd), "r" * 8000))
    elif roll < 0.9:
        return Input("headers", rpc, body, headers, method=rnd.choice(METHODS))
    else:
        return Input("headers", rpc, body, headers, path=rnd.choice(PATHS))
    return Input("headers", rpc, body, headers)


def huge(rnd: random.Random, rpc: str) -> Input:
    """A body just past the gateway's bound: a label, as JSON, or one long run of spaces."""
    size = MAX_BODY_BYTES + rnd.choice((1, 100, 1 << 20))
    if rnd.random() < 0.5:
        head = b'{"labels":["'
        body = head + b"x" * (size - len(head) - 3) + b'"]}'
    else:
        body = b"{" + b" " * (size - 2) + b"}"
    return Input("huge", rpc, body, chunked=rnd.random() < 0.5)


def run(caller: HttpCaller, count: int, seed: int, check_every: int = 100) -> Tally:
    """Send `count` inputs made from `seed`; every `check_every`, a valid Apply must still be
    answered (nothing lost). The tally."""
    fuzzer = HttpFuzzer(caller, seed)
    for n in range(count):
        fuzzer.send(fuzzer.next_input())
        if n % check_every == check_every - 1:
            still(fuzzer)
    still(fuzzer)
    return fuzzer.tally


def still(fuzzer: HttpFuzzer) -> None:
    """A valid Apply, answered as the handlers answer it (a finding if not)."""
    state = pb.State.FromString(fuzzer.pool[0])
    request = fuzz.legal_apply(random.Random(0), state)
    item = Input("check", "Apply", json_format.MessageToJson(request).encode(), message=request)
    answer = fuzzer.send(item)
    if answer is None or answer.status != 200:
        fuzzer.tally.finding(f"a valid Apply after the inputs: {answer}")
