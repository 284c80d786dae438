"""Structured fuzzing through the gRPC layer against a real `basra-rules serve` process.

Valid states with mutated fields, random actions, random requests of every RPC and raw random
bytes as request bodies. Every answer must be a correct result (the same one the handlers
give in this process, from an accepted state only) or a refusal with an allowed code and
exactly one ErrorInfo; never UNKNOWN, INTERNAL or a hang, and the server stays healthy.

Huge strings can carry a request past the 1 MiB message limit: it must then be refused with
REQUEST_TOO_LARGE (tests/trust checks the limit at and just past its value).

Budget: BASRA_FUZZ_EXAMPLES examples per test (default 60); BASRA_FUZZ_REPORT names a JSON
file that receives the count of inputs sent per RPC and outcome (see RELIABILITY.md).
"""

from __future__ import annotations

import json
import os
import random
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

import grpc
import pytest
from basra.v1 import rules_pb2 as pb
from google.protobuf.message import Message
from google.rpc import error_details_pb2  # type: ignore[import-untyped]
from grpc_health.v1 import health_pb2, health_pb2_grpc
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import engine
from clients.refusals import error_infos
from engine import State, Status
from service import batch, reading
from service.config import Config
from testkit import harness, messages
from testkit.actions import action_to_proto, random_action, spellings
from testkit.fuzz import ZONE_OPS, ZONES, zone, zone_op
from testkit.fuzz_calls import ALLOWED, Ended, Worker, batch_view, reason
from testkit.rpcs import methods
from wire.actions import action_from_proto

EXAMPLES = int(os.environ.get("BASRA_FUZZ_EXAMPLES", "60"))
# The suite's 300 s guard against a hang is sized for the default budget; a long run (the
# documented 20,000 examples) gets time in proportion, Replay's examples being the slowest.
pytestmark = pytest.mark.timeout(max(300.0, EXAMPLES * 0.1))
REPORT = os.environ.get("BASRA_FUZZ_REPORT")
CALL_TIMEOUT = 10.0
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        # stays_healthy checks the server once per test, after all its examples, on purpose.
        HealthCheck.function_scoped_fixture,
    ],
    database=None,
)


# ---- a pool of valid states from deterministic random matches ----


def _pool() -> list[State]:
    states: list[State] = []
    for n in range(4):
        rnd = random.Random(n)
        state, _ = engine.new_match(f"fuzz-{n}".encode())
        step = 0
        while True:
            if step % 9 == 0 or state.status is Status.OVER:
                states.append(state)
            if state.status is Status.OVER:
                break
            state, _ = engine.apply(state, random_action(state, rnd))
            step += 1
    return states


POOL = _pool()
CODES = [engine.code(c) for c in range(52)]
INT32 = st.integers(-(2**31), 2**31 - 1)
UINT32 = st.integers(0, 2**32 - 1)
SMALL = st.integers(-3, 200)
USMALL = st.integers(0, 200)
TRICKY = st.sampled_from(["", "AC", "10D", "1D", "0C", "11S", "ac", " KS", "JS\0", "🂡", "10DD"])
# Huge strings are built by repetition: drawing them character by character is slow.
HUGE = st.builds(
    lambda piece, count: piece * count,
    st.sampled_from(["x", "\0", "é", "🂡", "\n", "AC"]),
    st.integers(1_000, 100_000),
)
TEXT = st.one_of(st.text(max_size=80), TRICKY, HUGE)
CARDLIKE = st.one_of(st.sampled_from(CODES), st.text(max_size=20), TRICKY)


# ---- mutations of a valid state ----


@st.composite
def mutation(draw: st.DrawFn) -> Callable[[pb.State], None]:
    """One change to a state message: a field, a card zone, the seats or the seed."""
    kind = draw(
        st.sampled_from(
            ["scalar", "optional", "status", "seat_field", "label", "zone", "seats", "seed"]
        )
    )
    value: Any
    if kind == "scalar":
        name = draw(st.sampled_from(["seq", "hand_number", "carry"]))
        value = draw(st.one_of(USMALL, UINT32))
        return lambda m: setattr(m, name, value)
    if kind == "optional":
        name = draw(st.sampled_from(["to_move", "winner", "last_capturer", "dealer"]))
        value = draw(st.one_of(st.none(), SMALL, INT32))
        if value is None and name != "dealer":
            return lambda m: m.ClearField(name)
        return lambda m: setattr(m, name, value or 0)
    if kind == "status":
        value = draw(st.one_of(st.integers(-2, 5), INT32))
        return lambda m: setattr(m, "status", value)
    if kind == "seat_field":
        seat, name = draw(st.integers(0, 1)), draw(st.sampled_from(["basras", "total"]))
        value = draw(st.one_of(USMALL, UINT32))
        return lambda m: setattr(m.seats[seat], name, value) if len(m.seats) > seat else None
    if kind == "label":
        seat, value = draw(st.integers(0, 1)), draw(TEXT)
        return lambda m: setattr(m.seats[seat], "label", value) if len(m.seats) > seat else None
    if kind == "seats":
        count = draw(st.integers(0, 4))

        def resize(m: pb.State) -> None:
            kept = list(m.seats)[:count]
            del m.seats[:]
            m.seats.extend(kept + [pb.SeatState()] * (count - len(kept)))

        return resize
    if kind == "seed":
        value = draw(st.binary(max_size=80))
        return lambda m: setattr(m, "seed", value)
    return draw(zone_mutation())


@st.composite
def zone_mutation(draw: st.DrawFn) -> Callable[[pb.State], None]:
    """Duplicate, drop, move, insert or replace cards in one zone."""
    name, other = draw(st.sampled_from(ZONES)), draw(st.sampled_from(ZONES))
    op = draw(st.sampled_from(ZONE_OPS))
    index, text = draw(st.integers(0, 60)), draw(CARDLIKE)
    order = draw(st.randoms(use_true_random=False))

    def change(m: pb.State) -> None:
        if len(m.seats) < 2:
            return
        zone_op(zone(m, name), zone(m, other), op, index, text=text, order=order)

    return change


@st.composite
def state_message(draw: st.DrawFn) -> pb.State:
    """A valid state, or one with one to three mutations."""
    message = messages.state_to_proto(draw(st.sampled_from(POOL)))
    for change in draw(st.lists(mutation(), max_size=3)):
        change(message)
    return message


@st.composite
def action_message(draw: st.DrawFn, state: pb.State | None = None) -> pb.Action:
    """A random action; often a card of the state's hands, sometimes anything."""
    message = pb.Action()
    seat = draw(st.one_of(st.none(), st.integers(0, 1), SMALL, INT32))
    if seat is not None:
        message.seat = seat
    held: list[str] = [c for s in (state.seats if state else []) for c in s.hand]
    from_hand = bool(held) and draw(st.booleans())
    message.card = draw(st.sampled_from(held)) if from_hand else draw(CARDLIKE)
    choice = draw(st.sampled_from(["none", "plan_id", "capture", "trail"]))
    if choice == "plan_id":
        message.plan_id = draw(st.one_of(st.integers(0, 14), UINT32))
    elif choice == "capture":
        floor = list(state.floor) if state else []
        pick = st.sampled_from(floor) if floor else CARDLIKE
        message.capture.cards.extend(draw(st.lists(st.one_of(pick, CARDLIKE), max_size=8)))
    elif choice == "trail":
        message.trail = draw(st.booleans())
    return message


@st.composite
def legal_action(draw: st.DrawFn, state: State) -> pb.Action:
    """An action the engine accepts, written one of the ways the contract allows."""
    action = draw(st.sampled_from(list(engine.legal_actions(state))))
    spelled = draw(st.sampled_from(spellings(state, action)))
    if spelled.capture:
        spelled = replace(spelled, capture=tuple(draw(st.permutations(spelled.capture))))
    return action_to_proto(spelled)


# ---- the server, the oracle and the tally ----


@pytest.fixture(scope="module")
def server() -> Iterator[harness.ServedProcess]:
    """`basra-rules serve` (one worker, default limits) as a child process on loopback."""
    served = harness.start(["--workers", "1"])
    yield served
    served.stop()


@pytest.fixture(scope="module")
def channel(server: harness.ServedProcess) -> Iterator[grpc.Channel]:
    """One channel to the server, shared by the module."""
    with grpc.insecure_channel(server.target) as opened:
        yield opened


@pytest.fixture(autouse=True)
def stays_healthy(server: harness.ServedProcess, channel: grpc.Channel) -> Iterator[None]:
    """After each test: both health names SERVING, no worker died, no UNKNOWN/INTERNAL call."""
    yield
    stub = health_pb2_grpc.HealthStub(channel)
    for name in ("", "basra.v1.RulesService"):
        reply = stub.Check(health_pb2.HealthCheckRequest(service=name), timeout=CALL_TIMEOUT)
        assert reply.status == health_pb2.HealthCheckResponse.SERVING
    assert server.process.poll() is None
    assert server.find("worker died, replacing it") == []
    assert len(server.workers()) == 1
    with server.arrived:
        bad = [line for line in server.lines if line.get("code") in ("UNKNOWN", "INTERNAL")]
    assert bad == []


@pytest.fixture(scope="module")
def tally() -> Iterator[Counter[str]]:
    """Inputs sent, per RPC and outcome; written to BASRA_FUZZ_REPORT when it is set."""
    counts: Counter[str] = Counter()
    yield counts
    if REPORT:
        previous: dict[str, int] = {}
        if os.path.exists(REPORT):
            with open(REPORT) as existing:
                previous = json.load(existing)
        merged = Counter(previous) + counts
        with open(REPORT, "w") as out:
            json.dump(dict(sorted(merged.items())), out, indent=2)


WORKER = Worker()  # the same handlers in this process, every RPC of the contract
RPCS = sorted(methods())


def _expected(method: str, body: bytes) -> Ended:
    """What the handlers registered in this process answer to the same request bytes."""
    ended = WORKER.call(method, body)
    assert ended.code is not grpc.StatusCode.INTERNAL, f"{method} failed INTERNAL here"
    return ended


def check_call(channel: grpc.Channel, tally: Counter[str], method: str, body: bytes) -> Any:
    """Send raw request bytes; check the answer against the rules above; return the response."""
    # No serializers: the bytes go on the wire exactly as given, and come back as bytes.
    call = channel.unary_unary(f"/basra.v1.RulesService/{method}", None, None)
    response_type = methods()[method][1]
    expected = _expected(method, body)
    try:
        answer = call(body, timeout=CALL_TIMEOUT)
    except grpc.RpcError as error:
        code = error.code()
        tally[f"{method} {code.name}"] += 1
        assert code in ALLOWED, f"{method} ended with {code.name}: {error.details()}"
        infos = error_infos(error.trailing_metadata())
        assert len(infos) == 1, f"{method} refusal carries {len(infos)} ErrorInfo details"
        info = infos[0]
        assert info.domain == "basra.v1" and info.reason
        tally[f"reason {info.reason}"] += 1
        assert expected.code is not grpc.StatusCode.OK, (
            f"{method} refused ({info.reason}) what the handlers accept"
        )
        assert (code, info.reason) == (expected.code, reason(expected))
        return None
    tally[f"{method} OK"] += 1
    assert expected.code is grpc.StatusCode.OK, (
        f"{method} accepted what the handlers refuse ({reason(expected)})"
    )
    response: Any = response_type.FromString(answer)
    if method == "NewMatch" and not pb.NewMatchRequest.FromString(body).seed:
        assert len(response.state.seed) == 32  # drawn by the server, so not comparable
    elif method == "BatchApply":
        assert batch_view(answer) == batch_view(expected.body)
    else:
        assert answer == expected.body or response == response_type.FromString(expected.body)
    return response


def _accepted_state(message: pb.State) -> None:
    """A state the server acted on must be one the engine finds consistent."""
    engine.check_state(reading.state_from_proto(message))


# ---- the properties ----


@FUZZ
@given(data=st.data())
def test_apply_on_mutated_states_with_random_actions(
    channel: grpc.Channel, tally: Counter[str], data: st.DataObject
) -> None:
    state = data.draw(state_message())
    request = pb.ApplyRequest(state=state, action=data.draw(action_message(state)))
    if data.draw(st.booleans()):
        request.expected_seq = data.draw(st.one_of(st.just(state.seq), UINT32))
    if check_call(channel, tally, "Apply", request.SerializeToString()) is not None:
        _accepted_state(state)


@FUZZ
@given(data=st.data())
def test_legal_moves_and_player_view_on_mutated_states(
    channel: grpc.Channel, tally: Counter[str], data: st.DataObject
) -> None:
    state = data.draw(state_message())
    if check_call(
        channel, tally, "LegalMoves", pb.LegalMovesRequest(state=state).SerializeToString()
    ):
        _accepted_state(state)
    view = pb.PlayerViewRequest(state=state)
    seat = data.draw(st.one_of(st.none(), st.integers(0, 1), INT32))
    if seat is not None:
        view.seat = seat
    if check_call(channel, tally, "PlayerView", view.SerializeToString()) is not None:
        _accepted_state(state)


@FUZZ
@given(data=st.data())
def test_legal_actions_on_valid_states_always_succeed(
    channel: grpc.Channel, tally: Counter[str], data: st.DataObject
) -> None:
    """The refusal side is not all there is: legal input always gets its result."""
    state = data.draw(st.sampled_from([s for s in POOL if s.status is Status.IN_PROGRESS]))
    action = data.draw(legal_action(state))
    request = pb.ApplyRequest(state=messages.state_to_proto(state), action=action)
    assert check_call(channel, tally, "Apply", request.SerializeToString()) is not None


@FUZZ
@given(data=st.data())
def test_suggest_move_on_mutated_states_with_random_fields(
    channel: grpc.Channel, tally: Counter[str], data: st.DataObject
) -> None:
    """Every field of SuggestMove at random, states mutated: an answer or a clean refusal,
    and the same one as the handlers in this process give (budgets kept small, so that
    accepted ones stay quick)."""
    state = data.draw(state_message())
    request = pb.SuggestMoveRequest(state=state)
    seat = data.draw(st.one_of(st.none(), st.integers(0, 1), INT32))
    if seat is not None:
        request.seat = seat
    request.level = data.draw(st.one_of(st.integers(0, 3), INT32))  # type: ignore[assignment]
    request.bot_seed = data.draw(st.binary(max_size=80))
    if data.draw(st.booleans()):
        deals = data.draw(st.one_of(st.integers(0, 8), UINT32))
        nodes = data.draw(st.one_of(st.integers(0, 800), UINT32))
        request.budget.CopyFrom(pb.BotWork(deals=deals, nodes=nodes))
    if check_call(channel, tally, "SuggestMove", request.SerializeToString()) is not None:
        _accepted_state(state)


@FUZZ
@given(
    seed=st.binary(max_size=80),
    labels=st.lists(TEXT, max_size=3),
)
def test_new_match_with_random_seeds_and_labels(
    channel: grpc.Channel, tally: Counter[str], seed: bytes, labels: list[str]
) -> None:
    request = pb.NewMatchRequest(seed=seed, labels=labels)
    check_call(channel, tally, "NewMatch", request.SerializeToString())


@FUZZ
@given(data=st.data())
def test_replay_with_random_seeds_and_actions(
    channel: grpc.Channel, tally: Counter[str], data: st.DataObject
) -> None:
    state = data.draw(st.sampled_from(POOL))
    request = pb.ReplayRequest(
        seed=data.draw(st.one_of(st.just(state.seed), st.binary(max_size=80)))
    )
    message = messages.state_to_proto(state)
    request.actions.extend(data.draw(st.lists(action_message(message), max_size=12)))
    request.labels.extend(data.draw(st.lists(TEXT, max_size=3)))
    check_call(channel, tally, "Replay", request.SerializeToString())


@FUZZ
@given(method=st.sampled_from(RPCS), body=st.binary(max_size=3000))
def test_raw_random_bytes_as_request_bodies(
    channel: grpc.Channel, tally: Counter[str], method: str, body: bytes
) -> None:
    check_call(channel, tally, method, body)


@FUZZ
@given(method=st.sampled_from(RPCS), data=st.data())
def test_valid_requests_with_flipped_bytes(
    channel: grpc.Channel, tally: Counter[str], method: str, data: st.DataObject
) -> None:
    """Bodies one damaged byte away from a valid request: the hardest to tell apart."""
    state = messages.state_to_proto(data.draw(st.sampled_from(POOL)))
    valid: dict[str, Message] = {
        "NewMatch": pb.NewMatchRequest(seed=state.seed, labels=["a", "b"]),
        "Apply": pb.ApplyRequest(state=state, action=pb.Action(seat=0, card="AC")),
        "LegalMoves": pb.LegalMovesRequest(state=state),
        "PlayerView": pb.PlayerViewRequest(state=state, seat=1),
        "Replay": pb.ReplayRequest(seed=state.seed, actions=[pb.Action(seat=0, card="AC")]),
        "SuggestMove": pb.SuggestMoveRequest(
            state=state, seat=state.to_move, level=pb.BOT_LEVEL_GREEDY, bot_seed=b"fuzz"
        ),
        "BatchApply": pb.BatchApplyRequest(
            requests=[pb.ApplyRequest(state=state, action=pb.Action(seat=0, card="AC"))] * 2
        ),
    }
    body = bytearray(valid[method].SerializeToString())
    for _ in range(data.draw(st.integers(1, 3))):
        index = data.draw(st.integers(0, len(body) - 1))
        body[index] = data.draw(st.integers(0, 255))
    check_call(channel, tally, method, bytes(body))


@FUZZ
@given(data=st.data())
def test_batch_apply_of_mixed_items_answers_each_as_its_unary_apply(
    channel: grpc.Channel, tally: Counter[str], data: st.DataObject
) -> None:
    """Item counts at, under and over the bound, valid, mutated and unparsable items, two moves
    of one match: the batch answers as the handlers here do, and each item as a unary Apply of
    it over the same channel."""
    items: list[bytes] = []
    count = data.draw(st.one_of(st.integers(0, 8), st.sampled_from([63, 64, 65])))
    for _ in range(count):
        kind = data.draw(st.sampled_from(["legal", "mutated", "bytes", "next"]))
        if kind == "bytes":
            items.append(data.draw(st.binary(max_size=300)))
            continue
        if kind == "mutated":
            state = data.draw(state_message())
            request = pb.ApplyRequest(state=state, action=data.draw(action_message(state)))
            items.append(request.SerializeToString())
            continue
        playing = [s for s in POOL if s.status is Status.IN_PROGRESS]
        engine_state = data.draw(st.sampled_from(playing))
        action = data.draw(legal_action(engine_state))
        items.append(apply_bytes(engine_state, action))
        if kind == "next":  # the next move of the same match, in the same batch
            after, _ = engine.apply(engine_state, action_from_proto(action))
            if after.status is Status.IN_PROGRESS:
                items.append(apply_bytes(after, data.draw(legal_action(after))))
    body = batch.RequestWire(requests=items).SerializeToString()
    response = check_call(channel, tally, "BatchApply", body)
    if response is None:
        assert len(items) > Config().max_batch_items
        return
    apply = channel.unary_unary("/basra.v1.RulesService/Apply", None, None)
    assert len(response.results) == len(items)
    for item, result in zip(items, response.results, strict=True):
        try:
            unary = pb.ApplyResponse.FromString(apply(item, timeout=CALL_TIMEOUT))
        except grpc.RpcError as error:
            (info,) = error_infos(error.trailing_metadata())
            assert result.WhichOneof("result") == "status"
            assert result.status.code == error.code().value[0]
            packed = [error_details_pb2.ErrorInfo() for _ in result.status.details]
            assert all(d.Unpack(i) for d, i in zip(result.status.details, packed, strict=True))
            assert packed == [info]  # the same ErrorInfo, the only detail of this refusal
            tally["BatchApply item refused"] += 1
        else:
            assert result.response == unary
            tally["BatchApply item OK"] += 1


def apply_bytes(state: State, action: pb.Action) -> bytes:
    """An Apply request's bytes: `action` on `state`."""
    return pb.ApplyRequest(state=messages.state_to_proto(state), action=action).SerializeToString()
