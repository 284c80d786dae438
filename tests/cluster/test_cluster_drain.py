"""A node drained with matches in flight (issue 41, item 2): `kubectl drain` of the node that
runs the most pods of the module's release, while every kind of caller plays.

The release is the module's own, in a namespace of its own beside the session's (which loses
its pod on the drained node too, under its own budget): DRAIN_REPLICAS pods with the
autoscaler off (so that the count is the test's), asking DRAIN_CPU each, and the headless
Service on. Four pods on three nodes put two on one node (the chart's soft spread puts no more
there), and that node is drained: the chart's PodDisruptionBudget (maxUnavailable 1) lets
kubectl evict one of its two pods at once and refuses the second (429) until the first's
replacement is Ready on another node.

The callers, all at once:
- ClusterIP, published settings: lobbies (testkit/lobbies.py) with the published service
  config loaded whole and keepalive (clients/channels.py), 8 replicas, 16 matches;
- the headless Service with round_robin: the same lobbies on a `dns://` target the cluster's
  DNS (CoreDNS with its kubernetes plugin, testkit/cluster.py) resolves to the ready pods;
- the Go lobby (examples/go/cmd/lobby) with the published service config, run again and again
  (each run plays GO_MATCHES matches and exits 1 on the first failed call);
- a plain grpcio channel to the ClusterIP with no service config and no options: what it sees
  is measured and printed, not asserted.
Run with `-s` to see the figures.
"""

from __future__ import annotations

import json
import socket
import struct
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import pytest
from basra.v1 import rules_pb2_grpc

from testkit import cluster as kube
from testkit.chart_on_cluster import Release, install, ready
from testkit.deployment import REPO
from testkit.lobbies import SERVICE_CONFIG, Lobbies, Replica, replica
from testkit.matchplay import failures_by_kind

pytestmark = pytest.mark.timeout(600)

DRAIN_REPLICAS = 4
DRAIN_CPU = "200m"
NAMESPACE = "drain"
REPLICAS = 8
MATCHES = 16
PLAIN_MATCHES = 8
GO_MATCHES = 2
GO_LOBBY = REPO / "examples" / "go"
# The least pace of each published-settings lobby's calls through the drain, calls a second
# (16 matches pausing 50 ms between calls make about 250: docs/capacity.md), and the least
# calls the Go lobby's runs made.
MIN_PACE = 30
MIN_GO_CALLS = 200
DRAIN_SECONDS = 240
# The lobbies play on this long once the replacements are Ready.
AFTER = 5.0
BUDGET_REFUSED = "would violate the pod's disruption budget"


@pytest.fixture(scope="module")
def drain_release(cluster: kube.Cluster) -> Iterator[Release]:
    """DRAIN_REPLICAS pods of the chart with its headless Service, beside the session's
    release; every node uncordoned and the release uninstalled after the module."""
    release = install(
        cluster,
        "basra-rules",
        namespace=NAMESPACE,
        values=(
            "--set",
            "autoscaling.enabled=false",
            "--set",
            f"replicaCount={DRAIN_REPLICAS}",
            "--set",
            f"resources.requests.cpu={DRAIN_CPU}",
            "--set",
            "headlessService.enabled=true",
        ),
    )
    try:
        yield release
    finally:
        for node in cluster.nodes:
            cluster.kubectl("uncordon", node.name, check=False)
        cluster.helm("uninstall", release.name, "--namespace", NAMESPACE, "--wait", check=False)
        deadline = time.monotonic() + 90  # its CPU free again for the tests after
        while release.get("pods", "-l", release.selector)["items"]:
            if time.monotonic() > deadline:
                break
            time.sleep(0.5)


def published(release: Release, target: str, seed: str) -> Lobbies:
    """Lobbies with the published settings (service config and keepalive) on `target`."""
    replicas = [replica(release.name, target) for _ in range(REPLICAS)]
    return Lobbies(replicas, matches=MATCHES, seed=seed)


def plain(release: Release, seed: str) -> Lobbies:
    """Lobbies on plain grpcio channels to the ClusterIP: no service config, no options but
    a connection of each channel's own."""
    replicas = []
    for _ in range(REPLICAS // 2):
        channel = grpc.insecure_channel(
            release.target(), options=[("grpc.use_local_subchannel_pool", 1)]
        )
        stub = rules_pb2_grpc.RulesServiceStub(channel)  # type: ignore[no-untyped-call]
        replicas.append(Replica(release.name, channel, stub))
    return Lobbies(replicas, matches=PLAIN_MATCHES, seed=seed)


@dataclass
class GoLobby:
    """The Go lobby run again and again on a thread until stopped: each run's exit code and
    summary line."""

    binary: Path
    target: str
    runs: list[tuple[int, dict[str, Any]]] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def __enter__(self) -> GoLobby:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        assert self._thread is not None
        self._thread.join(120)

    def _run(self) -> None:
        index = 0
        while not self._stop.is_set():
            done = subprocess.run(
                [
                    str(self.binary),
                    "-target",
                    self.target,
                    "-service-config",
                    str(SERVICE_CONFIG),
                    "-matches",
                    str(GO_MATCHES),
                    "-seed",
                    f"go-drain-{index}",
                ],
                capture_output=True,
                text=True,
                timeout=120,
                check=False,
            )
            try:
                summary = json.loads(done.stdout.strip().splitlines()[-1])
            except (ValueError, IndexError):
                summary = {"error": done.stdout + done.stderr}
            self.runs.append((done.returncode, summary))
            index += 1

    def calls(self) -> int:
        """Calls made by every run."""
        return sum(int(summary.get("calls", 0)) for _, summary in self.runs)

    def failed(self) -> list[dict[str, Any]]:
        """The runs that ended with a failed call (or did not finish their matches)."""
        return [summary for code, summary in self.runs if code != 0]


class ReadyWatch:
    """The fewest Ready pods of a release (of those not being deleted) seen, polled on a
    thread; a context manager."""

    def __init__(self, release: Release) -> None:
        self.release = release
        self.fewest = DRAIN_REPLICAS
        self.seen: list[tuple[float, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> ReadyWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(30)

    def _run(self) -> None:
        while not self._stop.wait(0.25):
            try:
                pods = self.release.pods()
            except (subprocess.SubprocessError, ValueError, AssertionError):
                continue
            count = sum(ready(p) for p in pods)
            self.seen.append((time.monotonic(), count))
            self.fewest = min(self.fewest, count)


def resolve(server: str, name: str) -> list[str]:
    """The A records `server` (host:port, the cluster's DNS) answers for `name`, by one query
    over UDP (what a gRPC client's resolver asks)."""
    host, port = server.rsplit(":", 1)
    query = struct.pack(">HHHHHH", 0x0B5A, 0x0100, 1, 0, 0, 0)
    query += b"".join(bytes([len(part)]) + part.encode() for part in name.split(".")) + b"\0"
    query += struct.pack(">HH", 1, 1)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.settimeout(5)
        sock.sendto(query, (host, int(port)))
        answer, _ = sock.recvfrom(4096)
    (answers,) = struct.unpack(">H", answer[6:8])
    at = len(query)  # the question, echoed
    found = []
    for _ in range(answers):
        at += 2 if answer[at] & 0xC0 == 0xC0 else answer.index(b"\0", at) + 1 - at
        kind, _, _, length = struct.unpack(">HHIH", answer[at : at + 10])
        at += 10
        if kind == 1:
            found.append(socket.inet_ntoa(answer[at : at + length]))
        at += length
    return sorted(found)


def resolves_to_ready_pods(release: Release, server: str, name: str) -> list[str]:
    """Wait (at most 15 s, the endpoints' update) until `name` resolves to the addresses of
    the release's Ready pods; return them."""
    deadline = time.monotonic() + 15
    while True:
        wanted = sorted(p["status"]["podIP"] for p in release.ready_pods())
        found = resolve(server, name)
        if found == wanted or time.monotonic() > deadline:
            assert found == wanted, (found, wanted)
            return found
        time.sleep(0.5)


def failed(played: Lobbies) -> str:
    """What a lobby's calls ended with, for the figures."""
    kinds = failures_by_kind(played.tally.failures)
    return ", ".join(f"{code} {n}" for (code, _), n in sorted(kinds.items())) or "none"


def assert_flowed(played: Lobbies, began: float, ended: float, what: str) -> int:
    """No call failed and at least MIN_PACE calls a second ended from `began` to `ended`."""
    tally = played.tally
    assert tally.failures == [], (what, failures_by_kind(tally.failures), tally.failures[:3])
    with tally.lock:
        calls = sum(began <= at <= ended for at, _ in tally.ended)
    assert calls >= MIN_PACE * (ended - began), (what, calls, ended - began)
    return calls


def test_a_node_drained_with_matches_in_flight(
    drain_release: Release, cluster: kube.Cluster, tmp_path: Path
) -> None:
    """`kubectl drain` of the node running two of the release's four pods while every kind of
    caller plays: the budget holds (kubectl's second eviction refused until a replacement is
    Ready; never fewer than 3 pods Ready), the replacements run on the other nodes, and the
    callers with the published settings (ClusterIP lobbies, headless round_robin lobbies, the
    Go lobby) lose no call while calls flow; the plain grpcio channel is measured."""
    release = drain_release
    pods = release.wait_ready(DRAIN_REPLICAS)
    counts = Counter(p["spec"]["nodeName"] for p in pods)
    node, on_node = counts.most_common(1)[0]
    assert on_node >= 2, counts
    binary = tmp_path / "lobby"
    subprocess.run(
        ["go", "build", "-o", str(binary), "./cmd/lobby"],
        cwd=GO_LOBBY,
        check=True,
        timeout=300,
        capture_output=True,
    )
    name = f"{release.name}-headless.{NAMESPACE}.svc.cluster.local"
    before = resolves_to_ready_pods(release, cluster.dns, name)
    assert len(before) == DRAIN_REPLICAS
    headless = f"dns://{cluster.dns}/{name}:50051"
    with (
        published(release, release.target(), "drain-clusterip") as clusterip,
        published(release, headless, "drain-headless") as balanced,
        plain(release, "drain-plain") as bare,
        GoLobby(binary, release.target()) as go,
        ReadyWatch(release) as watch,
    ):
        time.sleep(3)
        began = time.monotonic()
        drained = cluster.kubectl(
            "drain",
            node,
            "--ignore-daemonsets",
            "--delete-emptydir-data",
            f"--timeout={DRAIN_SECONDS}s",
            timeout=DRAIN_SECONDS + 30,
        )
        drain_took = time.monotonic() - began
        release.wait_ready(DRAIN_REPLICAS, seconds=120)
        replaced = time.monotonic() - began
        resolved = resolves_to_ready_pods(release, cluster.dns, name)
        time.sleep(AFTER)
        ended = time.monotonic()
    said = drained.stdout + drained.stderr
    after = release.pods()
    assert not [p for p in after if p["spec"]["nodeName"] == node], after
    assert BUDGET_REFUSED in said, said
    assert watch.fewest >= DRAIN_REPLICAS - 1, watch.seen
    # The headless name followed the pods: the drained node's pods left it for their
    # replacements.
    assert len(set(resolved) - set(before)) == on_node, (before, resolved)
    through_clusterip = assert_flowed(clusterip, began, ended, "ClusterIP")
    through_headless = assert_flowed(balanced, began, ended, "headless")
    assert go.failed() == [], go.failed()[:3]
    assert go.calls() >= MIN_GO_CALLS, go.runs
    refusals = said.count(BUDGET_REFUSED)
    print(
        f"\nkubectl drain {node} ({on_node} of {DRAIN_REPLICAS} pods of the release): returned "
        f"after {drain_took:.1f} s, {refusals} eviction(s) refused by the budget, fewest Ready "
        f"{watch.fewest}; {DRAIN_REPLICAS} Ready again on "
        f"{sorted({p['spec']['nodeName'] for p in after})} {replaced:.1f} s after the drain "
        f"began, the headless name resolving to them; over {ended - began:.1f} s: ClusterIP "
        f"(published) {through_clusterip} calls, "
        f"0 failed; headless round_robin (published) {through_headless} calls, 0 failed; Go "
        f"lobby {len(go.runs)} runs, {go.calls()} calls, 0 failed; plain grpcio "
        f"{bare.tally.total()} calls in all, failed: {failed(bare)}"
    )
