"""Rollouts behind one address at a caller's pace, as a client of a ClusterIP Service meets
them (issue 41, item 6).

A ClusterIP is one address: a client's channel resolves it to one address, opens one
connection, and kube-proxy's DNAT sends that connection to one pod; a new connection goes to
a pod that is in the endpoints then, and an existing one stays on its pod until either end
closes it. `Forwarder` does the same on loopback: it listens on one port and joins each new
connection to the backend it points at when the connection comes; `point_to` (the endpoints
update) changes where new connections go and leaves the others alone.

A rollout is what the chart's Deployment makes of one pod (maxUnavailable 0): a new
`basra-rules serve` starts and serves; the forwarder points at it (the old pod leaves the
endpoints as its deletion begins); after the preStop pause the old one gets SIGTERM and
drains. Each client (`python -m testkit.clusterip_rollout client`, a process of its own as a
lobby is, so that the retry throttle, which gRPC keeps per process and target, is its own)
sends NewMatch at a fixed pace over one channel, the calls concurrent (each sent on time
whether or not the last has ended, under a deadline of a few seconds), and writes every
call's send time, status and message. The clients (`--clients`; each its own connection):
the published settings (clients.channels and deploy/grpc-service-config.json whole), a plain
grpcio channel with no option and no service config (no retry, no health checking), and the
published settings without the retry policy (what the retries hide). RELIABILITY.md runs one
a run: two connections at 300 calls a second that land on one worker of a busy machine
overload it, which is another measurement. `--setup-ms` delays each new connection's join
(a slower network or proxy than loopback's).

Run: `.venv/bin/python -m testkit.clusterip_rollout --clients published` (JSON on stdout;
`--help` for the pace and the count); tests/rollout/test_rollout_clusterip_pace.py holds the
bound.
"""

from __future__ import annotations

import argparse
import json
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any

from testkit import harness
from testkit.deployment import REPO
from testkit.ports import LOOPBACK

SERVICE_CONFIG = REPO / "deploy" / "grpc-service-config.json"
RATE = 300.0
ROLLOUTS = 20
# The chart's preStop pause is 5 s so that every kube-proxy has the endpoints update before
# SIGTERM; here the update is at once, and the pause only has to be there.
PRESTOP_SECONDS = 1.0
# The chart's grace (server.graceSeconds).
GRACE_SECONDS = 10.0
# "A deadline on every call: a few seconds" (docs/integration.md, "Client settings").
DEADLINE_SECONDS = 5.0
# After an old pod exits, calls run this long before the next rollout begins.
SETTLE_SECONDS = 1.0
# The chart's two workers (one worker refused calls past its bound at 600 calls a second on
# a busy 2-core machine, which is not what is measured here).
WORKERS = 2
PUBLISHED = "published settings"
PLAIN = "plain grpcio"
# The published settings with the retry policy taken out: each attempt the retries would hide
# (and each token of the retry throttle it would cost) shows as a failed call.
NO_RETRY = "published settings without retries"
CLIENTS = {"published": PUBLISHED, "plain": PLAIN, "no-retry": NO_RETRY}
BUFFER = 65536


# --- kube-proxy, as far as one address goes ---------------------------------------------


class Forwarder:
    """One loopback address that joins each new connection to the backend it points at then."""

    def __init__(self, backend: int, setup_seconds: float = 0.0) -> None:
        self.backend = backend
        self.setup_seconds = setup_seconds
        self.connections = 0
        self._listener = socket.create_server((LOOPBACK, 0))
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._closed = False
        threading.Thread(target=self._accept, name="forwarder", daemon=True).start()

    @property
    def target(self) -> str:
        """The address clients dial (the ClusterIP)."""
        return f"{LOOPBACK}:{self._listener.getsockname()[1]}"

    def point_to(self, backend: int) -> None:
        """New connections go to `backend` from now on (an endpoints update)."""
        self.backend = backend

    def close(self) -> None:
        """Stop listening and close every connection."""
        self._closed = True
        self._listener.close()
        with self._lock:
            for sock in self._sockets:
                sock.close()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            # The backend is chosen as the connection comes (kube-proxy's DNAT of its SYN).
            backend = self.backend
            threading.Thread(target=self._join, args=(client, backend), daemon=True).start()

    def _join(self, client: socket.socket, port: int) -> None:
        """Join `client` to the backend at `port` after the setup time."""
        time.sleep(self.setup_seconds)
        try:
            backend = socket.create_connection((LOOPBACK, port), timeout=5)
        except OSError:
            client.close()  # no backend there: as a refused connection
            return
        backend.settimeout(None)
        for sock in (client, backend):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with self._lock:
            self.connections += 1
            self._sockets += [client, backend]
        for source, sink in ((client, backend), (backend, client)):
            threading.Thread(target=_pipe, args=(source, sink), daemon=True).start()


def _pipe(source: socket.socket, sink: socket.socket) -> None:
    """Copy `source` to `sink`; pass an end on as an end (FIN as FIN, an error as a close)."""
    try:
        while data := source.recv(BUFFER):
            sink.sendall(data)
        sink.shutdown(socket.SHUT_WR)
    except OSError:
        source.close()
        sink.close()


# --- the measuring client (a process of its own) ----------------------------------------


def client_main(argv: Sequence[str]) -> int:
    """Send NewMatch at `--rate` over one channel until stdin closes; print every call."""
    parser = argparse.ArgumentParser(prog="testkit.clusterip_rollout client")
    parser.add_argument("target")
    parser.add_argument("--rate", type=float, default=RATE)
    parser.add_argument("--plain", action="store_true", help="grpcio with no option at all")
    parser.add_argument("--no-retry", action="store_true", help="no retry policy")
    args = parser.parse_args(argv)

    import grpc
    from basra.v1 import rules_pb2 as pb
    from basra.v1 import rules_pb2_grpc

    from clients import channels
    from testkit import paced

    if args.plain:
        channel = grpc.insecure_channel(args.target)
    else:
        config = json.loads(SERVICE_CONFIG.read_text())
        if args.no_retry:
            for method in config["methodConfig"]:
                method.pop("retryPolicy")
        channel = channels.channel(args.target, service_config=json.dumps(config))
    stub = rules_pb2_grpc.RulesServiceStub(channel)  # type: ignore[no-untyped-call]
    grpc.channel_ready_future(channel).result(timeout=30)
    stub.NewMatch(pb.NewMatchRequest(seed=b"warm"), timeout=10)
    calls: list[tuple[float, str, str]] = []
    lock = threading.Lock()
    stopping = threading.Event()

    def ended(sent: float, future: Any) -> None:
        code = future.code()
        details = "" if code is grpc.StatusCode.OK else (future.details() or "")
        with lock:
            calls.append((sent, code.name, details))

    def until_stdin_closes() -> None:
        sys.stdin.read()
        stopping.set()

    threading.Thread(target=until_stdin_closes, daemon=True).start()
    print(json.dumps({"event": "ready"}), flush=True)
    paced.send_new_matches(
        stub, args.rate, DEADLINE_SECONDS, ended, stop=stopping, settle=DEADLINE_SECONDS * 3
    )
    with lock:
        print(json.dumps({"event": "calls", "calls": sorted(calls)}), flush=True)
    channel.close()
    return 0


# --- the measurement --------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Rolled:
    """One rollout's moments (monotonic seconds): endpoints switched, SIGTERM, old pod gone."""

    switched: float
    terminated: float
    exited: float
    exit_code: int


@dataclass(frozen=True, slots=True)
class Seen:
    """What one client saw: every call (send time, code, message)."""

    name: str
    calls: tuple[tuple[float, str, str], ...]

    def per_rollout(self, rollouts: Sequence[Rolled]) -> list[list[tuple[float, str, str]]]:
        """Each rollout's calls: those sent from its switch until the next rollout's switch."""
        ends = [r.switched for r in rollouts[1:]] + [float("inf")]
        return [
            [c for c in self.calls if r.switched <= c[0] < end]
            for r, end in zip(rollouts, ends, strict=True)
        ]

    def ok_switch_to_exit(self, rollouts: Sequence[Rolled]) -> list[int]:
        """Each rollout's calls sent from its switch until its old pod exited that ended OK."""
        return [
            sum(1 for c in self.calls if r.switched <= c[0] < r.exited and c[1] == "OK")
            for r in rollouts
        ]

    def summary(self, rollouts: Sequence[Rolled]) -> dict[str, object]:
        """The figures: calls and failures in all, per rollout, and the failures' messages."""
        failed = [c for c in self.calls if c[1] != "OK"]
        per_rollout = self.per_rollout(rollouts)
        return {
            "client": self.name,
            "calls": len(self.calls),
            "failed": len(failed),
            "failed_before_first_rollout": sum(
                1 for c in failed if not rollouts or c[0] < rollouts[0].switched
            ),
            "rollouts_with_failures": sum(
                1 for calls in per_rollout if any(c[1] != "OK" for c in calls)
            ),
            "failed_per_rollout": [sum(1 for c in calls if c[1] != "OK") for calls in per_rollout],
            "ok_switch_to_exit_min": min(self.ok_switch_to_exit(rollouts), default=0),
            "codes": dict(Counter(c[1] for c in self.calls)),
            "failure_messages": dict(Counter(f"{c[1]}: {c[2]}" for c in failed).most_common(5)),
        }


@dataclass(frozen=True, slots=True)
class Measured:
    """A run: its settings, its rollouts and what each client saw."""

    rate: float
    setup: float
    rollouts: tuple[Rolled, ...]
    seen: tuple[Seen, ...]
    connections: int

    def summary(self) -> dict[str, object]:
        """The figures, as the docs quote them."""
        took = [r.exited - r.switched for r in self.rollouts]
        return {
            "rate_per_client": self.rate,
            "connection_setup_ms": round(self.setup * 1000, 1),
            "rollouts": len(self.rollouts),
            "old_pods_exit_codes": sorted(set(r.exit_code for r in self.rollouts)),
            "switch_to_exit_s": [round(min(took), 2), round(max(took), 2)],
            "connections_forwarded": self.connections,
            "clients": [s.summary(self.rollouts) for s in self.seen],
        }

    def client(self, name: str) -> Seen:
        """What the client `name` saw."""
        return next(s for s in self.seen if s.name == name)


def start_client(target: str, rate: float, kind: str) -> subprocess.Popen[str]:
    """A client process (client_main) of this kind sending at `rate` to `target`."""
    command = [sys.executable, "-m", "testkit.clusterip_rollout", "client", target]
    command += ["--rate", str(rate)]
    command += {PUBLISHED: [], PLAIN: ["--plain"], NO_RETRY: ["--no-retry"]}[kind]
    return subprocess.Popen(
        command,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        # Its stderr is this process's: a pipe nobody reads during the run could fill and
        # stall the client.
        text=True,
        cwd=REPO,
    )


def read_event(process: subprocess.Popen[str], event: str) -> dict[str, Any]:
    """The next line of a client process that is this event."""
    assert process.stdout is not None
    for text in process.stdout:
        parsed = json.loads(text)
        if parsed.get("event") == event:
            return dict(parsed)
    raise RuntimeError(f"client ended before '{event}' (exit {process.wait(10)}; see stderr)")


def calls_seen(name: str, process: subprocess.Popen[str]) -> Seen:
    """What a client process whose stdin was closed sent: its `calls` event, as a Seen."""
    rows = read_event(process, "calls")["calls"]
    return Seen(name, tuple((float(s), str(c), str(d)) for s, c, d in rows))


def _kill_all(pods: Sequence[harness.ServedProcess]) -> None:
    for pod in pods:
        pod.kill()


def stop_client(process: subprocess.Popen[str]) -> None:
    """Kill a client process if it still runs, and reap it."""
    if process.poll() is None:
        process.kill()
    process.wait(10)


def measure(
    rollouts: int = ROLLOUTS,
    rate: float = RATE,
    *,
    grace: float = GRACE_SECONDS,
    prestop: float = PRESTOP_SECONDS,
    workers: int = WORKERS,
    setup: float = 0.0,
    kinds: Sequence[str] = (PUBLISHED, PLAIN),
) -> Measured:
    """Roll one pod behind one address `rollouts` times while both clients call at `rate`."""
    flags = ["--workers", str(workers), "--grace-seconds", str(grace)]
    with ExitStack() as stack:
        pod = harness.start(flags, keep_calls=False)
        pods = [pod]
        stack.callback(_kill_all, pods)
        forwarder = Forwarder(pod.port, setup)
        stack.callback(forwarder.close)
        clients = {kind: start_client(forwarder.target, rate, kind) for kind in kinds}
        for process in clients.values():
            stack.callback(stop_client, process)
        for process in clients.values():
            read_event(process, "ready")
        time.sleep(SETTLE_SECONDS)
        rolled = []
        for _ in range(rollouts):
            new = harness.start(flags, keep_calls=False)
            pods.append(new)
            switched = time.monotonic()
            forwarder.point_to(new.port)
            time.sleep(prestop)
            terminated = time.monotonic()
            code = pod.stop(grace + 30)
            rolled.append(Rolled(switched, terminated, time.monotonic(), code))
            pod = new
            time.sleep(SETTLE_SECONDS)
        seen = []
        for process in clients.values():
            assert process.stdin is not None
            process.stdin.close()
        for name, process in clients.items():
            seen.append(calls_seen(name, process))
        return Measured(rate, setup, tuple(rolled), tuple(seen), forwarder.connections)
    raise AssertionError("unreachable")


def main(argv: Sequence[str]) -> int:
    """`client ...`: one measuring client; otherwise the whole measurement, as JSON."""
    if argv and argv[0] == "client":
        return client_main(argv[1:])
    parser = argparse.ArgumentParser(prog="testkit.clusterip_rollout")
    parser.add_argument("--rollouts", type=int, default=ROLLOUTS)
    parser.add_argument("--rate", type=float, default=RATE, help="calls a second, each client")
    parser.add_argument("--grace", type=float, default=GRACE_SECONDS)
    parser.add_argument("--workers", type=int, default=WORKERS)
    parser.add_argument(
        "--setup-ms", type=float, default=0.0, help="a new connection's setup time, ms"
    )
    parser.add_argument(
        "--clients",
        default="published,plain",
        help="which clients call, each at --rate: published, plain, no-retry (comma-separated)",
    )
    args = parser.parse_args(argv)
    kinds = [CLIENTS[name] for name in args.clients.split(",")]
    measured = measure(
        args.rollouts,
        args.rate,
        grace=args.grace,
        workers=args.workers,
        setup=args.setup_ms / 1000,
        kinds=kinds,
    )
    print(json.dumps(measured.summary(), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
