"""`basra-rules serve` as its own process: workers, /metrics, SIGTERM under load, `play`."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import grpc
import pytest
from basra.v1 import rules_pb2 as pb
from basra.v1 import rules_pb2_grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from service.metrics import FLUSH_SECONDS, multiprocess_registry
from service.worker_probes import socket_directory
from testkit import harness
from testkit.calls import REPO, scrape, scrape_until
from testkit.harness import ServedProcess, command
from testkit.ports import reserved_port

SEED = b"process-tests"
CLEAN_ENDINGS = {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED}
# Deadlines for counts the tests wait for, generous for a busy 2-core machine: they bound a
# wait, they are not a speed the tests require.
SPREAD_SECONDS = 60.0
BURST_SECONDS = 60.0
# Answers of the burst before SIGTERM, so that the signal lands while calls are in flight.
BURST_CALLS = 200


def _stub(port: int) -> tuple[grpc.Channel, rules_pb2_grpc.RulesServiceStub]:
    # A local subchannel pool gives each channel its own connection, so that connections are
    # spread over the workers instead of being shared through grpc's global pool.
    options = [("grpc.use_local_subchannel_pool", 1)]
    channel = grpc.insecure_channel(f"127.0.0.1:{port}", options=options)
    return channel, rules_pb2_grpc.RulesServiceStub(channel)  # type: ignore[no-untyped-call]


UNARY = 'grpc_method="{}",grpc_service="basra.v1.RulesService",grpc_type="UNARY",transport="grpc"'


def _handled(samples: dict[str, float], *methods: str) -> float:
    return sum(
        samples.get(f'grpc_server_handled_total{{grpc_code="OK",{UNARY.format(m)}}}', 0.0)
        for m in methods
    )


def _calls(server: ServedProcess, channels: int, matches_each: int) -> int:
    """Start matches and play a few moves on several connections; return the number of calls."""
    made = 0
    for n in range(channels):
        channel, stub = _stub(server.port)
        with channel:
            for m in range(matches_each):
                result = stub.NewMatch(pb.NewMatchRequest(seed=SEED + bytes([n, m])), timeout=5)
                move = result.legal_moves.moves[0]
                action = pb.Action(seat=result.legal_moves.seat, card=move.card)
                if move.plans:
                    action.plan_id = 1
                stub.Apply(pb.ApplyRequest(state=result.state, action=action), timeout=5)
                made += 2
    return made


def _rpc_workers(server: ServedProcess) -> set[int]:
    return {line["worker"] for line in server.log_lines() if line.get("event") == "rpc"}


def test_metrics_are_aggregated_across_workers(served: ServedProcess) -> None:
    """/metrics on the parent holds the sums of both workers' series, histogram included."""
    before = scrape(served)
    made = 0
    # The kernel spreads connections over the workers by a hash; connect until both served
    # (the log lines that say so are read in the background, hence a deadline, not a count).
    deadline = time.monotonic() + SPREAD_SECONDS
    while True:
        made += _calls(served, channels=2, matches_each=2)
        if len(_rpc_workers(served)) == 2:
            break
        assert time.monotonic() < deadline, "both workers should have served connections"
        time.sleep(0.05)  # the log reader may not have caught up yet
    methods = ("NewMatch", "Apply")
    handled_before = _handled(before, *methods)
    after = scrape_until(served, lambda now: _handled(now, *methods) - handled_before >= made)
    unary = UNARY

    def delta(name: str) -> float:
        return after.get(name, 0.0) - before.get(name, 0.0)

    started = sum(delta(f"grpc_server_started_total{{{unary.format(m)}}}") for m in methods)
    handled = sum(
        delta(f'grpc_server_handled_total{{grpc_code="OK",{unary.format(m)}}}') for m in methods
    )
    assert started == handled == made
    assert delta(f"grpc_server_handling_seconds_count{{{unary.format('Apply')}}}") == made / 2
    # Each NewMatch and each Apply times the plans of the cards of the seat to move next.
    assert delta("basra_plan_generation_seconds_count") >= made * 3
    assert 'basra_plan_generation_seconds_bucket{le="1e-06"}' in after
    assert 'basra_plan_generation_seconds_bucket{le="0.1"}' in after


def test_refusals_are_counted_by_reason(served: ServedProcess) -> None:
    """A refused call shows up in basra_refusals_total under its reason."""
    name = 'basra_refusals_total{grpc_method="Apply",reason="SEQ_MISMATCH"}'
    before = scrape(served).get(name, 0.0)
    channel, stub = _stub(served.port)
    with channel:
        result = stub.NewMatch(pb.NewMatchRequest(seed=SEED), timeout=5)
        action = pb.Action(seat=result.legal_moves.seat, card=result.legal_moves.moves[0].card)
        stale = pb.ApplyRequest(state=result.state, action=action, expected_seq=3)
        with pytest.raises(grpc.RpcError) as raised:
            stub.Apply(stale, timeout=5)
    assert raised.value.code() is grpc.StatusCode.ABORTED
    after = scrape_until(served, lambda now: now.get(name, 0.0) > before)
    assert after.get(name, 0.0) == before + 1


def _multiprocess_samples(directory: Path) -> dict[str, float]:
    """What /metrics would show from the values the workers wrote to `directory`."""
    registry = multiprocess_registry(str(directory))
    samples: dict[str, float] = {}
    for family in registry.collect():
        for sample in family.samples:
            labels = ",".join(f'{k}="{v}"' for k, v in sorted(sample.labels.items()))
            samples[f"{sample.name}{{{labels}}}" if labels else sample.name] = sample.value
    return samples


def _wait_for_files(directory: Path, done: Callable[[dict[str, float]], bool]) -> dict[str, float]:
    """Read the workers' values until `done` holds (they write them every FLUSH_SECONDS)."""
    deadline = time.monotonic() + 10 * FLUSH_SECONDS + 5
    samples = _multiprocess_samples(directory)
    while not done(samples) and time.monotonic() < deadline:
        time.sleep(FLUSH_SECONDS / 10)
        samples = _multiprocess_samples(directory)
    return samples


def test_every_call_is_counted_exactly_once_and_none_is_lost_on_sigterm(tmp_path: Path) -> None:
    """N calls over two workers: exactly N in /metrics within the flush interval; the calls
    made just before SIGTERM are in the workers' values after they stop."""
    directory = tmp_path / "metrics"
    server = harness.start(["--workers", "2", "--metrics-dir", str(directory)])
    try:
        first = 0
        for _ in range(64):  # until both workers have served calls
            first += _calls(server, channels=2, matches_each=2)
            time.sleep(0.05)  # let the log reader catch up
            if len(_rpc_workers(server)) == 2:
                break
        assert len(_rpc_workers(server)) == 2
        samples = _wait_for_files(
            directory, lambda now: _handled(now, "NewMatch", "Apply") >= first
        )
        assert _handled(samples, "NewMatch", "Apply") == first
        second = _calls(server, channels=6, matches_each=2)
        assert server.stop(30) == 0  # SIGTERM right after the calls
    finally:
        server.kill()
    final = _multiprocess_samples(directory)
    assert _handled(final, "NewMatch", "Apply") == first + second
    started = sum(
        final.get(f"grpc_server_started_total{{{UNARY.format(m)}}}", 0.0)
        for m in ("NewMatch", "Apply")
    )
    assert started == first + second
    # Each NewMatch and each Apply times the plans of the four or so cards of the seat to move.
    assert final["basra_plan_generation_seconds_count"] >= 3 * (first + second)


def _basra(*args: str) -> subprocess.CompletedProcess[str]:
    """Run the `basra-rules` command from the repository root; its output as text."""
    return subprocess.run(
        [*command(), *args], capture_output=True, text=True, timeout=60, cwd=REPO, check=False
    )


def test_play_finishes_a_match_against_the_server(served: ServedProcess) -> None:
    """`basra-rules play` plays a whole match and prints it, ending with the winner."""
    done = _basra("play", "--target", f"127.0.0.1:{served.port}", "--seed", "0badc0de")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("Seed commitment ")
    assert any(line.startswith("== Hand 1:") for line in lines)
    assert sum(" plays " in line for line in lines) >= 48
    assert "wins" in lines[-2]


def test_play_reveals_the_seed_and_records_a_match_that_verify_accepts(
    served: ServedProcess, tmp_path: Path
) -> None:
    """`play --record FILE` keeps seat 0's record; the seed printed at the end is the one
    committed to at the start, and `basra-rules verify FILE` finds the match honest."""
    record = tmp_path / "match.json"
    target = f"127.0.0.1:{served.port}"
    played = _basra("play", "--target", target, "--seed", "5eed", "--record", str(record))
    assert played.returncode == 0, played.stderr
    lines = played.stdout.splitlines()
    commitment = lines[0].removeprefix("Seed commitment ")
    assert hashlib.sha256(bytes.fromhex("5eed")).hexdigest() == commitment
    assert lines[-1] == "Seed revealed 5eed: its SHA-256 is the commitment above"
    kept = json.loads(record.read_text())
    assert set(kept) == {"seed", "seedCommitment", "seat", "events", "actions"}
    assert base64.b64decode(kept["seed"]) == bytes.fromhex("5eed")
    assert base64.b64decode(kept["seedCommitment"]).hex() == commitment
    assert sum(" plays " in line for line in lines) == len(kept["actions"])
    checked = _basra("verify", str(record))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert checked.stdout.startswith("honest: ")
    assert f"actions replayed: {len(kept['actions'])} (match over)" in checked.stdout
    assert "deal events seat 0 received that match: " in checked.stdout


def test_the_shipped_example_record_is_what_play_records_for_its_seed(
    served: ServedProcess, tmp_path: Path
) -> None:
    """docs/example-record.json is `play --seed 6578616d706c65 --record`, byte for byte."""
    record = tmp_path / "example-record.json"
    target = f"127.0.0.1:{served.port}"
    played = _basra("play", "--target", target, "--seed", "6578616d706c65", "--record", str(record))
    assert played.returncode == 0, played.stderr
    assert record.read_text() == (REPO / "docs" / "example-record.json").read_text()


def test_play_names_the_reason_of_a_refused_call(served: ServedProcess) -> None:
    """A seed the server refuses ends `play` with exit 1 and the refusal's code and reason."""
    done = _basra("play", "--target", f"127.0.0.1:{served.port}", "--seed", "ab" * 65)
    assert done.returncode == 1
    assert done.stderr.startswith("call failed: INVALID_ARGUMENT INVALID_SEED: ")


def test_a_dead_worker_is_replaced(served: ServedProcess) -> None:
    """Killing a worker: the parent logs it, starts another, and the service keeps answering."""
    serving = served.wait_for("serving")
    victim = serving["pids"][0]
    os.kill(victim, signal.SIGKILL)
    died = served.wait_for("worker died, replacing it", pid=victim)
    assert died["exit_code"] == -signal.SIGKILL
    replaced = served.wait_for("worker replaced", timeout=60)
    assert replaced["pid"] not in serving["pids"]
    assert _calls(served, channels=4, matches_each=1) == 8


def test_a_reserved_port_is_kept_from_others_until_the_server_binds_it() -> None:
    """While held, no bind(0) is given the port and a plain bind fails; the server takes it."""
    with reserved_port() as port:
        for _ in range(200):
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as other:
                other.bind(("127.0.0.1", 0))
                assert other.getsockname()[1] != port
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as other, pytest.raises(OSError):
            other.bind(("127.0.0.1", port))
        server = harness.start(["--port", str(port), "--metrics-port", "0"], cwd=REPO)
    try:
        assert server.port == port
        assert _calls(server, channels=1, matches_each=1) == 2
    finally:
        assert server.stop() == 0


def test_configuration_errors_stop_the_command() -> None:
    """A bad setting exits 2 naming it; a port held by someone else exits 1."""
    bad = subprocess.run(
        [*command(), "serve", "--workers", "0"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert bad.returncode == 2 and "--workers" in bad.stderr
    env_bad = subprocess.run(
        [*command(), "serve"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
        env={**os.environ, "BASRA_LOG_FORMAT": "xml"},
    )
    assert env_bad.returncode == 2 and "BASRA_LOG_FORMAT" in env_bad.stderr
    with harness.taken_port() as port:
        taken = subprocess.run(
            harness.serve_command(port=port),
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    assert taken.returncode == 1 and "cannot reserve the gRPC port" in taken.stdout


def test_a_served_port_is_not_shared_and_no_start_leaves_a_metrics_directory_behind(
    served: ServedProcess, tmp_path: Path
) -> None:
    """A second server on a port already served (or a taken metrics port) exits 1 saying why;
    the default metrics directory (a fresh one under TMPDIR) is gone after such a start, and
    after a clean stop."""
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    env = {**os.environ, "TMPDIR": str(scratch)}
    for flags in (
        ["--port", str(served.port), "--metrics-port", "0"],
        ["--port", "0", "--metrics-port", str(served.metrics_port)],
    ):
        failed = subprocess.run(
            [*command(), "serve", "--host", "127.0.0.1", *flags],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
            env=env,
        )
        assert failed.returncode == 1, failed.stdout
        assert "cannot" in failed.stdout
        assert list(scratch.iterdir()) == [], flags
    server = harness.start(["--workers", "1"], env={"TMPDIR": str(scratch)}, metrics=True)
    try:
        # The metrics directory, and the one of the worker probes' sockets where TMPDIR's path
        # leaves room for a socket's (service.worker_probes.socket_directory: else /tmp's).
        made = sorted(p.name.split("-")[:2] for p in scratch.iterdir())
        room = len(str(scratch / "basra-probes-12345678" / "worker-1000.sock")) <= 107
        assert made == [["basra", "metrics"], *([["basra", "probes"]] if room else [])]
    finally:
        assert server.stop() == 0
    assert list(scratch.iterdir()) == []


@dataclass
class Burst:
    """Threads calling the server until it is gone, each on its own connection."""

    port: int
    outcomes: list[grpc.StatusCode] = field(default_factory=list)
    wrong: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    threads: list[threading.Thread] = field(default_factory=list)

    def run(self, thread_index: int) -> None:
        """Play moves until a call fails; record how every call ended."""
        channel, stub = _stub(self.port)
        seed = SEED + bytes([thread_index])
        with channel:
            result: pb.NewMatchResponse | pb.ApplyResponse | None = None
            for _ in range(100_000):
                try:
                    if result is None or result.state.status == pb.STATUS_OVER:
                        result = stub.NewMatch(pb.NewMatchRequest(seed=seed), timeout=5)
                    else:
                        move = result.legal_moves.moves[-1]
                        action = pb.Action(seat=result.legal_moves.seat, card=move.card)
                        if move.plans:
                            action.plan_id = 1
                        request = pb.ApplyRequest(
                            state=result.state, action=action, expected_seq=result.state.seq
                        )
                        after = stub.Apply(request, timeout=5)
                        if after.state.seq != result.state.seq + 1:
                            self.wrong.append(f"seq {after.state.seq} after {result.state.seq}")
                        result = after
                    code = grpc.StatusCode.OK
                except grpc.RpcError as error:
                    code = error.code()
                with self.lock:
                    self.outcomes.append(code)
                if code is not grpc.StatusCode.OK:
                    return

    def start(self, count: int) -> None:
        """Start `count` calling threads."""
        for n in range(count):
            thread = threading.Thread(target=self.run, args=(n,), daemon=True)
            thread.start()
            self.threads.append(thread)

    def join(self, timeout: float) -> None:
        """Wait for every thread to stop."""
        deadline = time.monotonic() + timeout
        for thread in self.threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        assert not any(t.is_alive() for t in self.threads), "calls still running"


def test_sigterm_during_a_burst_drains_cleanly() -> None:
    """SIGTERM mid-burst: health turns NOT_SERVING, calls complete or fail cleanly, exit 0."""
    server = harness.start(["--workers", "2", "--grace-seconds", "5"])
    try:
        watch_channel = grpc.insecure_channel(f"127.0.0.1:{server.port}")
        stub = health_pb2_grpc.HealthStub(watch_channel)
        watch = stub.Watch(health_pb2.HealthCheckRequest(service=""), timeout=30)
        statuses = [next(watch).status]
        burst = Burst(server.port)
        burst.start(4)
        # SIGTERM once the burst is well under way: a count of answers, however long they take.
        deadline = time.monotonic() + BURST_SECONDS
        while len(burst.outcomes) < BURST_CALLS:
            assert time.monotonic() < deadline, f"{len(burst.outcomes)} in {BURST_SECONDS} s"
            time.sleep(0.01)
        server.process.send_signal(signal.SIGTERM)
        statuses.append(next(watch).status)
        watch.cancel()
        watch_channel.close()
        burst.join(30)
        code = server.wait(30)
    finally:
        server.kill()
    serving = health_pb2.HealthCheckResponse
    assert statuses == [serving.SERVING, serving.NOT_SERVING]
    assert code == 0
    assert not burst.wrong
    succeeded = burst.outcomes.count(grpc.StatusCode.OK)
    failures = [c for c in burst.outcomes if c is not grpc.StatusCode.OK]
    assert succeeded >= BURST_CALLS
    assert set(failures) <= CLEAN_ENDINGS, failures
    events = [line.get("event") for line in server.log_lines()]
    assert events.count("worker stopping") == 2 and events.count("worker stopped") == 2
    assert events[-1] == "stopped"


def test_the_probe_sockets_go_under_tmp_when_tmpdir_is_too_long(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A TMPDIR whose path leaves no room for a unix socket's (108 bytes) would keep every
    worker from starting: the probe sockets' directory is made under /tmp then, mode 0700."""
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True)
    monkeypatch.setattr(tempfile, "tempdir", str(deep))
    made = socket_directory()
    try:
        assert Path(made).parent == Path("/tmp"), made
        assert os.stat(made).st_mode & 0o777 == 0o700
        assert list(deep.iterdir()) == []
    finally:
        os.rmdir(made)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    made = socket_directory()
    room = len(str(tmp_path / "basra-probes-12345678" / "worker-1000.sock")) <= 107
    assert Path(made).parent == (tmp_path if room else Path("/tmp")), made
    os.rmdir(made)
