"""SIGTERM with calls in flight: what each client sees, and that the server's log and counts say
the same.

- Calls that reach a worker after its stop began (or wait in grpc's queue when it begins) are
  ended CANCELLED by grpc's core without reaching the service: no log line has them, and a
  client whose retry policy covers CANCELLED as well as UNAVAILABLE loses none of them.
- A call still running when the grace ends is cut (its client sees UNAVAILABLE); its log line
  and its count say UNAVAILABLE too, and come before the worker's end.
"""

from __future__ import annotations

import json
import signal
import statistics
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
from basra.v1 import rules_pb2 as pb
from basra.v1 import rules_pb2_grpc
from prometheus_client import CollectorRegistry
from prometheus_client.multiprocess import MultiProcessCollector

from service.server import HANDLERS_SECONDS
from testkit import harness
from testkit.harness import ServedProcess

# The published service config, whose retry policy docs/service.md asks of clients
# ("Shutdown"): UNAVAILABLE and CANCELLED among the codes retried.
SERVICE_CONFIG = Path(__file__).resolve().parents[2] / "deploy" / "grpc-service-config.json"
# Answers before SIGTERM and after it, so that the signal lands in a stream of calls.
BEFORE, AFTER = 300, 300
WAIT_SECONDS = 60.0


@dataclass
class Burst:
    """Threads making NewMatch calls, each with its own request id, until told to stop (or,
    when `until_failure`, until their first failure); every outcome by request id."""

    stub_of: Callable[[], Any]
    until_failure: bool
    outcomes: dict[str, grpc.StatusCode] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    stopping: threading.Event = field(default_factory=threading.Event)
    threads: list[threading.Thread] = field(default_factory=list)

    def run(self, index: int) -> None:
        """Call until stopped."""
        stub = self.stub_of()
        for n in range(1_000_000):
            if self.stopping.is_set():
                return
            request_id = f"burst-{index}-{n}"
            try:
                stub.NewMatch(
                    pb.NewMatchRequest(seed=b"shutdown"),
                    timeout=10,
                    metadata=(("x-request-id", request_id),),
                )
                code = grpc.StatusCode.OK
            except grpc.RpcError as error:
                code = error.code()
            with self.lock:
                self.outcomes[request_id] = code
            if code is not grpc.StatusCode.OK and self.until_failure:
                return

    def start(self, count: int) -> None:
        """Start `count` threads."""
        for index in range(count):
            thread = threading.Thread(target=self.run, args=(index,), daemon=True)
            thread.start()
            self.threads.append(thread)

    def wait_for(self, answers: int) -> None:
        """Wait until this many calls have ended."""
        deadline = time.monotonic() + WAIT_SECONDS
        while len(self.outcomes) < answers:
            assert time.monotonic() < deadline, f"{len(self.outcomes)} in {WAIT_SECONDS} s"
            time.sleep(0.01)

    def stop(self) -> None:
        """Stop every thread and wait for it."""
        self.stopping.set()
        for thread in self.threads:
            thread.join(WAIT_SECONDS)
        assert not any(t.is_alive() for t in self.threads)


def logged_codes(server: ServedProcess) -> dict[str, str]:
    """The code of each call's log line, by request id."""
    return {
        line["request_id"]: line["code"]
        for line in server.find("rpc")
        if line.get("request_id") is not None
    }


def test_calls_cancelled_at_sigterm_never_reached_the_service() -> None:
    """Clients that do not retry see OK, or UNAVAILABLE/CANCELLED once the worker stops; the
    calls that failed have no log line (nothing ran), and the others' lines say OK."""
    server = harness.start(["--workers", "1"])
    try:
        target = server.target
        burst = Burst(
            lambda: rules_pb2_grpc.RulesServiceStub(  # type: ignore[no-untyped-call]
                grpc.insecure_channel(target, options=[("grpc.use_local_subchannel_pool", 1)])
            ),
            until_failure=True,
        )
        burst.start(8)
        burst.wait_for(BEFORE)
        server.process.send_signal(signal.SIGTERM)
        burst.stop()
        assert server.wait(WAIT_SECONDS) == 0
    finally:
        server.kill()
    logged = logged_codes(server)
    failed = {rid: code for rid, code in burst.outcomes.items() if code is not grpc.StatusCode.OK}
    assert set(failed.values()) <= {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED}
    assert not set(failed) & set(logged), "a call that failed at SIGTERM had reached the service"
    answered = {rid for rid, code in burst.outcomes.items() if code is grpc.StatusCode.OK}
    assert answered <= set(logged) and {logged[rid] for rid in answered} == {"OK"}


def test_a_client_retrying_unavailable_and_cancelled_loses_no_call_across_sigterm() -> None:
    """Two servers behind one round_robin channel with the published service config: SIGTERM
    to one of them mid-burst, and every call is answered."""
    published = json.loads(SERVICE_CONFIG.read_text(encoding="utf-8"))
    retried = published["methodConfig"][0]["retryPolicy"]["retryableStatusCodes"]
    assert {"UNAVAILABLE", "CANCELLED"} <= set(retried)
    first = harness.start(["--workers", "1"])
    second = harness.start(["--workers", "1"])
    try:
        config = {**published, "loadBalancingConfig": [{"round_robin": {}}]}
        target = f"ipv4:{first.target},{second.target}"
        options = [
            ("grpc.service_config", json.dumps(config)),
            ("grpc.use_local_subchannel_pool", 1),
        ]
        burst = Burst(
            lambda: rules_pb2_grpc.RulesServiceStub(  # type: ignore[no-untyped-call]
                grpc.insecure_channel(target, options=options)
            ),
            until_failure=False,
        )
        burst.start(8)
        burst.wait_for(BEFORE)
        first.process.send_signal(signal.SIGTERM)
        assert first.wait(WAIT_SECONDS) == 0
        burst.wait_for(len(burst.outcomes) + AFTER)
        burst.stop()
    finally:
        first.kill()
        second.stop()
    assert Counter(burst.outcomes.values()) == {grpc.StatusCode.OK: len(burst.outcomes)}
    assert logged_codes(first) and logged_codes(second)


# The long call must still run when the grace ends and be done within the seconds a worker
# gives a cut handler (server.HANDLERS_SECONDS), so that its log line and count come before
# the worker's end. No fixed budget stays in that window: the search's cost per deal changes
# with the code and the machine, and a loaded machine stretches the wall time tenfold or more.
# So the budget is measured on the same server just before: calls of CALIBRATION_DEALS say how
# many deals last LONG_SECONDS, which is far from both ends of the window (GRACE_SECONDS and
# HANDLERS_SECONDS past it) even if the load changes by a factor of 4 from the measure.
GRACE_SECONDS = 0.1
LONG_SECONDS = HANDLERS_SECONDS / 4
CALIBRATION_DEALS = 1000
CALIBRATIONS = 3
# Deals, not nodes, bound the calls: a deal visits about a hundred nodes at a match's start.
NODES_PER_DEAL = 1000
MAX_DEALS = 100_000
MAX_NODES = MAX_DEALS * NODES_PER_DEAL
LONG_FLAGS = ["--bot-max-deals", str(MAX_DEALS), "--bot-max-nodes", str(MAX_NODES)]


def _suggestion(stub: rules_pb2_grpc.RulesServiceStub, deals: int) -> pb.SuggestMoveRequest:
    begun = stub.NewMatch(pb.NewMatchRequest(seed=b"long"), timeout=10)
    budget = pb.BotWork(deals=deals, nodes=deals * NODES_PER_DEAL)
    return pb.SuggestMoveRequest(
        state=begun.state, seat=begun.state.to_move, level=pb.BOT_LEVEL_STRONG, budget=budget
    )


def _long_deals(stub: rules_pb2_grpc.RulesServiceStub) -> tuple[int, float]:
    """The deals of a suggestion lasting about LONG_SECONDS on this server now, and the median
    wall time of the CALIBRATION_DEALS calls they were scaled from."""
    request = _suggestion(stub, CALIBRATION_DEALS)
    seconds = []
    for n in range(CALIBRATIONS):
        start = time.monotonic()
        stub.SuggestMove(request, timeout=60, metadata=(("x-request-id", f"calibration-{n}"),))
        seconds.append(time.monotonic() - start)
    measured = statistics.median(seconds)
    return min(MAX_DEALS, max(10, round(CALIBRATION_DEALS * LONG_SECONDS / measured))), measured


def _long_call(stub: rules_pb2_grpc.RulesServiceStub, deals: int) -> Any:
    request = _suggestion(stub, deals)
    return stub.SuggestMove.future(request, timeout=60, metadata=(("x-request-id", "long"),))


def _wait_until_running(stub: rules_pb2_grpc.RulesServiceStub) -> dict[str, str]:
    """Probe with short calls until the long one surely runs; the probes' outcomes by id.

    A probe answered on the same connection comes after the long call was handed to a thread.
    """
    outcomes: dict[str, str] = {}
    for n in range(200):
        request_id = f"probe-{n}"
        try:
            stub.NewMatch(
                pb.NewMatchRequest(seed=b"probe"),
                timeout=10,
                metadata=(("x-request-id", request_id),),
            )
            outcomes[request_id] = "OK"
        except grpc.RpcError as error:
            outcomes[request_id] = error.code().name
        if outcomes[request_id] == "OK":
            return outcomes
    raise AssertionError(f"the long call never seemed to run: {outcomes}")


def _handled(directory: Path, method: str) -> dict[str, float]:
    """grpc_server_handled_total of one method by code, from the workers' multiprocess files
    (the series declared at 0 left out)."""
    registry = CollectorRegistry()
    MultiProcessCollector(registry, path=str(directory))  # type: ignore[no-untyped-call]
    found: dict[str, float] = {}
    for family in registry.collect():
        for sample in family.samples:
            if sample.name == "grpc_server_handled_total" and (
                sample.labels.get("grpc_method") == method and sample.value
            ):
                found[sample.labels["grpc_code"]] = sample.value
    return found


def test_a_call_running_at_the_end_of_the_grace_is_logged_and_counted_as_its_client_saw_it(
    tmp_path: Path,
) -> None:
    """SIGTERM with a call of about a second running and a grace of 0.1 s: the server cuts it
    (its client sees UNAVAILABLE), and its log line and its count carry that code, written
    before the worker's end; so do the probes'."""
    metrics_dir = tmp_path / "metrics"
    flags = ["--workers", "1", "--grace-seconds", str(GRACE_SECONDS)]
    server = harness.start([*flags, "--metrics-dir", str(metrics_dir), *LONG_FLAGS])
    try:
        with grpc.insecure_channel(server.target) as channel:
            stub = rules_pb2_grpc.RulesServiceStub(channel)  # type: ignore[no-untyped-call]
            deals, measured = _long_deals(stub)
            long_call = _long_call(stub, deals)
            probes = _wait_until_running(stub)
            server.process.send_signal(signal.SIGTERM)
            try:
                long_call.result()
                seen = "OK"
            except grpc.RpcError as error:
                seen = error.code().name
        assert server.wait(WAIT_SECONDS) == 0
    finally:
        server.kill()
    calibrated = f"{deals} deals, from {measured:.3f} s per {CALIBRATION_DEALS}"
    assert seen == "UNAVAILABLE", f"the long call ({calibrated}) ended {seen}"
    logged = logged_codes(server)
    assert logged.get("long") == seen, calibrated
    assert {logged[f"calibration-{n}"] for n in range(CALIBRATIONS)} == {"OK"}
    for request_id, code in probes.items():
        assert logged.get(request_id, code) == code, request_id
    events = [line.get("event") for line in server.log_lines()]
    long_line = next(
        i for i, line in enumerate(server.log_lines()) if line.get("request_id") == "long"
    )
    assert long_line < events.index("worker stopped"), calibrated
    assert _handled(metrics_dir, "SuggestMove") == {"OK": float(CALIBRATIONS), seen: 1.0}
