"""A backend that vanishes without a reset, measured as a caller meets it (issue 41).

Two `basra-rules serve` processes and the measuring clients run in a network namespace made
for the run (`ip netns add`, lo up, two addresses in 198.18.0.0/15), so the iptables rules that
drop one backend's traffic in both directions (no reset) are the namespace's own and the host's
are never touched; the namespace, its rules and every process go in `finally`. Each client
(`python -m testkit.blackhole client`, run with `ip netns exec`) loads
deploy/grpc-service-config.json whole (round_robin over both servers, health checking,
retries), sends NewMatch at a fixed rate under a deadline, and writes every call's send time
(CLOCK_MONOTONIC, which the namespace shares with the host) and status; one client with the
published settings (clients.channels) and one without keepalive run side by side, so both see
the same loss under the same load.

Run by hand as root: `.venv/bin/python -m testkit.blackhole`
(tests/service/test_keepalive_blackhole.py holds the bound).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from testkit import harness
from testkit.deployment import REPO

SERVICE_CONFIG = REPO / "deploy" / "grpc-service-config.json"
# Two addresses reserved for testing (RFC 2544), on the namespace's own lo.
LIVE = "198.18.0.1"
LOST = "198.18.0.2"
RATE = 50.0
DEADLINE_SECONDS = 1.0
# Calls run this long before the loss (both connections up, warm) and this long after it.
BEFORE_SECONDS = 4.0
AFTER_SECONDS = 14.0
WARM_UP_CALLS = 10
# The clients measured: grpcio with the published settings, the same without keepalive, and
# (on request) the Node.js example lobby's grpc-js channel, with the published settings.
PUBLISHED = "published settings"
WITHOUT_KEEPALIVE = "without keepalive"
GRPC_JS = "grpc-js, published settings"
GRPC_JS_CLIENT = REPO / "tests" / "node" / "blackhole_client.mjs"
GRPC_GO = "grpc-go, published settings"
GO_EXAMPLE = REPO / "examples" / "go"
# The goal (issue 41): all OK again within 10 s of the loss, at most 1% of that minute's calls
# failed.
RECOVERY_GOAL_SECONDS = 10.0
FAILED_GOAL_SHARE = 0.01


@dataclass(frozen=True, slots=True)
class Call:
    """One call: when it was sent (monotonic seconds) and the status it ended with."""

    sent: float
    code: str


@dataclass(frozen=True, slots=True)
class Outcome:
    """What one client saw of the loss."""

    name: str
    calls: tuple[Call, ...]
    lost_at: float
    rate: float

    @property
    def before(self) -> list[Call]:
        """Calls sent more than a deadline before the loss (ended before it could reach them)."""
        return [c for c in self.calls if c.sent < self.lost_at - DEADLINE_SECONDS]

    @property
    def after(self) -> list[Call]:
        """Calls sent from a deadline before the loss on (one sent then could still be waiting
        on the lost backend when its traffic was dropped)."""
        return [c for c in self.calls if c.sent >= self.lost_at - DEADLINE_SECONDS]

    @property
    def failed(self) -> int:
        """Calls of `after` that did not end OK."""
        return sum(1 for c in self.after if c.code != "OK")

    @property
    def minute_share(self) -> float:
        """The failed calls as a share of one minute's calls at the client's rate."""
        return self.failed / (60.0 * self.rate)

    @property
    def recovered_after(self) -> float | None:
        """Seconds from the loss to the first call after which every call ended OK; None when
        calls still failed in the run's last second (not seen to be all OK again)."""
        failed = [c.sent for c in self.calls if c.code != "OK"]
        if not failed:
            return 0.0
        last = max(failed)
        if last > max(c.sent for c in self.calls) - 1.0:
            return None
        return max(0.0, min(c.sent for c in self.calls if c.sent > last) - self.lost_at)

    def summary(self) -> dict[str, object]:
        """The figures, as the docs quote them."""
        recovered = self.recovered_after
        return {
            "client": self.name,
            "calls_before": len(self.before),
            "codes_before": _codes(self.before),
            "calls_after": len(self.after),
            "failed": self.failed,
            "share_of_minute": round(self.minute_share, 4),
            "all_ok_after_s": None if recovered is None else round(recovered, 2),
            "codes_after": _codes(self.after),
        }


def _codes(calls: Sequence[Call]) -> dict[str, int]:
    codes: dict[str, int] = {}
    for call in calls:
        codes[call.code] = codes.get(call.code, 0) + 1
    return codes


# --- the namespace ----------------------------------------------------------------------


def _run(*command: str) -> None:
    subprocess.run(command, check=True, capture_output=True, text=True, timeout=30)


@contextmanager
def namespace() -> Iterator[str]:
    """A network namespace of this run with lo up and the two test addresses; removed after."""
    name = f"basra-blackhole-{os.getpid()}"
    _run("ip", "netns", "add", name)
    try:
        inside = ("ip", "netns", "exec", name)
        _run(*inside, "ip", "link", "set", "lo", "up")
        for address in (LIVE, LOST):
            _run(*inside, "ip", "addr", "add", f"{address}/32", "dev", "lo")
        yield name
    finally:
        # Deleting the namespace takes its iptables rules with it.
        subprocess.run(["ip", "netns", "delete", name], check=False, timeout=30)


def black_hole(netns: str, address: str, port: int) -> None:
    """Drop every packet to and from `address:port` in the namespace (no reset, no ICMP)."""
    inside = ("ip", "netns", "exec", netns, "iptables", "-w", "-A", "INPUT", "-p", "tcp")
    _run(*inside, "-d", address, "--dport", str(port), "-j", "DROP")
    _run(*inside, "-s", address, "--sport", str(port), "-j", "DROP")


# --- the measuring client (runs inside the namespace) -----------------------------------


def client_main(argv: Sequence[str]) -> int:
    """Send NewMatch at `--rate` for `--seconds` after the channel is ready; print the calls."""
    parser = argparse.ArgumentParser(prog="testkit.blackhole client")
    parser.add_argument("target")
    parser.add_argument("--rate", type=float, default=RATE)
    parser.add_argument("--seconds", type=float, required=True)
    parser.add_argument("--no-keepalive", action="store_true")
    args = parser.parse_args(argv)

    import grpc
    from basra.v1 import rules_pb2 as pb
    from basra.v1 import rules_pb2_grpc

    from clients import channels
    from testkit import paced

    config = SERVICE_CONFIG.read_text()
    channel = channels.channel(args.target, service_config=config, keepalive=not args.no_keepalive)
    stub = rules_pb2_grpc.RulesServiceStub(channel)  # type: ignore[no-untyped-call]
    grpc.channel_ready_future(channel).result(timeout=30)
    # Warm up: a few calls round both backends before the measured ones start.
    for n in range(WARM_UP_CALLS):
        stub.NewMatch(pb.NewMatchRequest(seed=n.to_bytes(8, "big")), timeout=10)
    calls: list[tuple[float, str]] = []
    lock = threading.Lock()

    def ended(sent: float, future: Any) -> None:
        code = future.code()
        with lock:
            calls.append((sent, code.name))

    print(json.dumps({"event": "ready", "at": time.monotonic()}), flush=True)
    # Every call has a deadline; give the last ones a few of them to end, all told.
    paced.send_new_matches(
        stub,
        args.rate,
        DEADLINE_SECONDS,
        ended,
        stop=threading.Event(),
        seconds=args.seconds,
        settle=DEADLINE_SECONDS * 5,
    )
    with lock:
        print(json.dumps({"event": "calls", "calls": sorted(calls)}), flush=True)
    channel.close()
    return 0


# --- the measurement --------------------------------------------------------------------


def _client(
    netns: str,
    target: str,
    seconds: float,
    kind: str,
    *,
    js_config: str | None = None,
    go_program: str | None = None,
) -> subprocess.Popen[str]:
    if kind == GRPC_GO:
        assert go_program is not None
        command = [go_program, "-addresses", target.removeprefix("ipv4:")]
        command += ["-service-config", str(SERVICE_CONFIG), "-seconds", str(seconds)]
        command += ["-rate", str(RATE), "-timeout", f"{DEADLINE_SECONDS}s"]
    elif kind == GRPC_JS:
        deadline_ms = str(int(DEADLINE_SECONDS * 1000))
        command = ["node", str(GRPC_JS_CLIENT), target, str(seconds), str(RATE), deadline_ms]
        command += [js_config] if js_config else []
    else:
        command = [sys.executable, "-m", "testkit.blackhole", "client", target]
        command += ["--seconds", str(seconds), "--rate", str(RATE)]
        if kind == WITHOUT_KEEPALIVE:
            command.append("--no-keepalive")
    return subprocess.Popen(
        ["ip", "netns", "exec", netns, *command],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        cwd=REPO,
    )


def _line(process: subprocess.Popen[str], event: str) -> dict[str, object]:
    assert process.stdout is not None
    for text in process.stdout:
        parsed = json.loads(text)
        if parsed.get("event") == event:
            return dict(parsed)
    raise RuntimeError(f"client ended before '{event}': {process.stderr and process.stderr.read()}")


def measure(
    grpc_js: bool = False, js_config: str | None = None, grpc_go: bool = False
) -> list[Outcome]:
    """Lose one of two backends without a reset while a client with the published settings and
    one without keepalive call (and, with `grpc_js`, the Node.js example lobby's channel, with
    the service config file `js_config` if given; with `grpc_go`, the Go example's channel);
    return what each saw."""
    with ExitStack() as stack:
        go_program = None
        if grpc_go:
            built = Path(stack.enter_context(tempfile.TemporaryDirectory())) / "blackhole"
            build = ["go", "build", "-o", str(built), "./cmd/blackhole"]
            subprocess.run(build, cwd=GO_EXAMPLE, check=True, timeout=600)
            go_program = str(built)
        netns = stack.enter_context(namespace())
        program = ["ip", "netns", "exec", netns, *harness.command()]
        # Both servers start at once (each takes seconds to load its tables).
        with ThreadPoolExecutor(2) as pool:
            starting = [
                pool.submit(harness.start, ["--host", a], program=program, keep_calls=False)
                for a in (LIVE, LOST)
            ]
        servers, failures = [], []
        for future in starting:
            try:
                servers.append(future.result())
                stack.callback(servers[-1].kill)
            except (OSError, TimeoutError) as error:
                failures.append(error)
        if failures:
            raise failures[0]
        ports = [s.port for s in servers]
        target = f"ipv4:{LIVE}:{ports[0]},{LOST}:{ports[1]}"
        seconds = BEFORE_SECONDS + AFTER_SECONDS
        kinds = [PUBLISHED, WITHOUT_KEEPALIVE]
        kinds += [GRPC_JS] if grpc_js else []
        kinds += [GRPC_GO] if grpc_go else []
        clients = {
            kind: _client(netns, target, seconds, kind, js_config=js_config, go_program=go_program)
            for kind in kinds
        }
        for process in clients.values():
            stack.callback(_stop, process)
        ready = max(float(str(_line(p, "ready")["at"])) for p in clients.values())
        time.sleep(max(0.0, ready + BEFORE_SECONDS - time.monotonic()))
        black_hole(netns, LOST, ports[1])
        lost_at = time.monotonic()
        outcomes = []
        for name, process in clients.items():
            rows = _line(process, "calls")["calls"]
            assert isinstance(rows, list)
            calls = tuple(Call(float(sent), str(code)) for sent, code in rows)
            outcomes.append(Outcome(name, calls, lost_at, RATE))
        return outcomes
    raise AssertionError("unreachable")


def _stop(process: subprocess.Popen[str]) -> None:
    if process.poll() is None:
        process.kill()
    process.wait(10)


def main(argv: Sequence[str]) -> int:
    """`client ...`: one measuring client; otherwise the whole measurement, as JSON lines
    (`--grpc-js`: with the Node.js example lobby's channel too, which needs examples/lobby's
    npm ci; `--grpc-go`: with the Go example's, built with `go`)."""
    if argv and argv[0] == "client":
        return client_main(argv[1:])
    parser = argparse.ArgumentParser(prog="testkit.blackhole")
    parser.add_argument("--grpc-js", action="store_true")
    parser.add_argument("--grpc-js-config", metavar="FILE", help="the grpc-js client's config")
    parser.add_argument("--grpc-go", action="store_true")
    args = parser.parse_args(argv)
    config = None if args.grpc_js_config is None else str(Path(args.grpc_js_config).resolve())
    grpc_js = args.grpc_js or config is not None
    for outcome in measure(grpc_js=grpc_js, js_config=config, grpc_go=args.grpc_go):
        print(json.dumps(outcome.summary()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
