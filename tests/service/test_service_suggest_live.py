"""SuggestMove against `basra-rules serve` with two workers: the same bytes from every worker,
whatever the cards the seat cannot see, and the work of each call in the metrics."""

from __future__ import annotations

import random
import time
from collections.abc import Callable

import grpc
from basra.v1 import rules_pb2 as pb

from engine import State, Status
from service.handlers import Handlers
from service.outcomes import Facts
from testkit import harness
from testkit.actions import play_match
from testkit.calls import proto, scrape, scrape_until
from testkit.harness import ServedProcess
from testkit.hidden import redistribute_hidden

METHOD = "/basra.v1.RulesService/SuggestMove"
CONNECTIONS = 4
PROTO_LEVELS = (pb.BOT_LEVEL_RANDOM, pb.BOT_LEVEL_GREEDY, pb.BOT_LEVEL_STRONG)

Raw = Callable[[bytes], bytes]


def _raw_callers(port: int) -> tuple[list[grpc.Channel], list[Raw]]:
    """Callers on separate connections (spread over the workers) that return the response
    bytes exactly as the server sent them."""
    channels: list[grpc.Channel] = []
    callers: list[Raw] = []
    for _ in range(CONNECTIONS):
        channel = grpc.insecure_channel(
            f"127.0.0.1:{port}", options=[("grpc.use_local_subchannel_pool", 1)]
        )
        channels.append(channel)
        callers.append(_bytes_of(channel.unary_unary(METHOD, None, None)))
    return channels, callers


def _bytes_of(method: grpc.UnaryUnaryMultiCallable[bytes, bytes]) -> Raw:
    def call(body: bytes) -> bytes:
        return bytes(method(body, timeout=30))

    return call


def _states() -> list[State]:
    played = play_match(b"suggest-live", random.Random(11))
    live = [s for s in played.states if s.status is Status.IN_PROGRESS]
    return live[::25]


def _request(state: State, level: pb.BotLevel, bot_seed: bytes = b"") -> bytes:
    seat = state.to_move
    assert seat is not None
    request = pb.SuggestMoveRequest(state=proto(state), seat=seat, level=level, bot_seed=bot_seed)
    return request.SerializeToString()


def _suggest_workers(server: ServedProcess) -> set[int]:
    return {
        line["worker"]
        for line in server.log_lines()
        if line.get("event") == "rpc" and str(line.get("method", "")).endswith("/SuggestMove")
    }


def test_every_worker_answers_redealt_unseen_cards_with_the_same_bytes(
    served: ServedProcess,
) -> None:
    """Metamorphic over the wire: for each state and level, the response bytes are the same
    on every connection, from both workers, for the state and for two redeals of what the
    seat cannot see, and equal to this process's own handlers' bytes."""
    channels, callers = _raw_callers(served.port)
    handlers = Handlers()
    # The kernel spreads connections over the workers by a hash: connect until both answer.
    deadline = time.monotonic() + 60
    while len(_suggest_workers(served)) < 2 and time.monotonic() < deadline:
        more, extra = _raw_callers(served.port)
        channels += more
        callers += extra
        for caller in extra:
            caller(_request(_states()[0], pb.BOT_LEVEL_GREEDY))
        time.sleep(0.05)  # let the log reader catch up
    assert len(_suggest_workers(served)) == 2
    try:
        for number, state in enumerate(_states()):
            seat = state.to_move
            assert seat is not None
            rnd = random.Random(number)
            variants = [state, *(redistribute_hidden(state, seat, rnd) for _ in range(2))]
            for level in PROTO_LEVELS:
                here = handlers.suggest_move(
                    pb.SuggestMoveRequest.FromString(_request(state, level, b"live")), Facts()
                )
                answers = {
                    caller(_request(variant, level, b"live"))
                    for variant in variants
                    for caller in callers
                }
                assert answers == {here}
    finally:
        for channel in channels:
            channel.close()


def test_each_suggestion_is_timed_and_its_work_counted_by_level() -> None:
    """On a server of its own (the other test's counts are flushed late, up to a second)."""
    served = harness.start(["--workers", "2"], metrics=True)
    try:
        _count_by_level(served)
    finally:
        served.stop()


def _count_by_level(served: ServedProcess) -> None:
    state = _states()[0]
    channels, callers = _raw_callers(served.port)
    before = scrape(served)
    sent = {"STRONG": 0, "GREEDY": 0}
    work = 0
    try:
        for caller in callers:
            strong = pb.SuggestMoveResponse.FromString(caller(_request(state, pb.BOT_LEVEL_STRONG)))
            work += strong.work.nodes
            caller(_request(state, pb.BOT_LEVEL_GREEDY))
            sent["STRONG"] += 1
            sent["GREEDY"] += 1
    finally:
        for channel in channels:
            channel.close()

    def counted(samples: dict[str, float]) -> dict[str, float]:
        return {
            level: samples.get(f'basra_suggest_seconds_count{{level="{level}"}}', 0.0)
            - before.get(f'basra_suggest_seconds_count{{level="{level}"}}', 0.0)
            for level in sent
        }

    after = scrape_until(served, lambda samples: counted(samples) == sent)
    assert counted(after) == sent
    nodes = after['basra_suggest_nodes_sum{level="STRONG"}'] - before.get(
        'basra_suggest_nodes_sum{level="STRONG"}', 0.0
    )
    assert nodes == work > 0
    assert 'basra_suggest_deals_bucket{le="16.0",level="STRONG"}' in after
