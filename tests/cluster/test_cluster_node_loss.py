"""A node lost abruptly with calls in flight (issue 41, item 3): a node running a pod of the
module's release has its kubelet and containerd SIGKILLed and its link cut (its eth0's peer on
the switch set down), so that nobody is sent a reset; what each kind of caller meets is
measured, and so is what Kubernetes does about it.

The release is the module's own, in a namespace of its own beside the session's: LOSS_REPLICAS
pods (autoscaler off, so one a node by the chart's spread), the headless Service on, and
tolerations of the unreachable and not-ready taints for TOLERATION_SECONDS instead of the 300 s
Kubernetes adds by default, so that the replacements are seen within the test. The lost node
is never node 0 (the control plane's, and the host's route to the Services).

Callers, each NewMatch at RATE calls a second, open loop, with a DEADLINE_SECONDS deadline
(testkit.paced, as testkit.blackhole's): the ClusterIP with the published settings (the service
config and keepalive, clients/channels.py) over CHANNELS channels, each a connection of its
own; the headless Service's name (CoreDNS) with the published settings, one channel
balancing round_robin over the pods; plain grpcio to the ClusterIP (no service config, no
options) over CHANNELS channels. The figures per caller (testkit.blackhole.Outcome: failed
calls, their share of a minute's, when all were OK again) and Kubernetes' times (node not
Ready, the lost pod out of the Service's endpoints, the replacement Ready) are printed;
what is asserted is what bounds them (the module's test docstring). The node is restored
after (link up, containerd and kubelet started again, every pod of the cluster Ready) for the
modules after this one.
"""

from __future__ import annotations

import json
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from basra.v1 import rules_pb2_grpc

from clients import channels
from testkit import cluster as kube
from testkit import paced
from testkit.blackhole import FAILED_GOAL_SHARE, RECOVERY_GOAL_SECONDS, Call, Outcome
from testkit.chart_on_cluster import Release, install, ready, wait_settled
from testkit.lobbies import SERVICE_CONFIG

pytestmark = pytest.mark.timeout(600)

LOSS_REPLICAS = 3
LOSS_CPU = "200m"
NAMESPACE = "loss"
TOLERATION_SECONDS = 5
TAINTS = ("node.kubernetes.io/unreachable", "node.kubernetes.io/not-ready")
RATE = 50.0
DEADLINE_SECONDS = 1.0
CHANNELS = 6
BEFORE_SECONDS = 5.0
# After the replacement is Ready, the callers go on this long (all OK again must be seen).
AFTER_SECONDS = 15.0
# Kubernetes' own steps, each bounded: the node controller's grace period (50 s by default
# in 1.33) and then the endpoint update; the taint's toleration and a pod's start.
ENDPOINTS_WITHIN = 90.0
REPLACED_WITHIN = 150.0


@pytest.fixture(scope="module")
def loss_release(cluster: kube.Cluster) -> Iterator[Release]:
    """LOSS_REPLICAS pods with the headless Service and short tolerations of a lost node;
    uninstalled after the module."""
    tolerations = [
        {
            "key": key,
            "operator": "Exists",
            "effect": "NoExecute",
            "tolerationSeconds": TOLERATION_SECONDS,
        }
        for key in TAINTS
    ]
    release = install(
        cluster,
        "basra-rules",
        namespace=NAMESPACE,
        values=(
            "--set",
            "autoscaling.enabled=false",
            "--set",
            f"replicaCount={LOSS_REPLICAS}",
            "--set",
            f"resources.requests.cpu={LOSS_CPU}",
            "--set",
            "headlessService.enabled=true",
            "--set-json",
            f"tolerations={json.dumps(tolerations)}",
        ),
    )
    try:
        yield release
    finally:
        cluster.helm("uninstall", release.name, "--namespace", NAMESPACE, "--wait", check=False)


class Turns:
    """Stubs taken in turn, one call each, as one stub (what testkit.paced sends over)."""

    def __init__(self, stubs: list[Any]) -> None:
        self.stubs = stubs
        self.turn = 0

    @property
    def NewMatch(self) -> Any:  # noqa: N802 (the stubs' method's name)
        """The next stub's NewMatch."""
        self.turn += 1
        return self.stubs[self.turn % len(self.stubs)].NewMatch


class Caller:
    """NewMatch at RATE over `stubs` in turn, on a thread, until stopped: each call's send
    time and code."""

    def __init__(self, name: str, stubs: list[Any], opened: list[grpc.Channel]) -> None:
        self.name = name
        self.calls: list[Call] = []
        self._opened = opened
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._stubs = stubs
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> Caller:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(DEADLINE_SECONDS * 10)
        for channel in self._opened:
            channel.close()

    def _run(self) -> None:
        def ended(sent: float, future: Any) -> None:
            with self._lock:
                self.calls.append(Call(sent, future.code().name))

        paced.send_new_matches(
            Turns(self._stubs),
            RATE,
            DEADLINE_SECONDS,
            ended,
            stop=self._stop,
            settle=DEADLINE_SECONDS * 5,
        )

    def outcome(self, lost_at: float) -> Outcome:
        with self._lock:
            calls = tuple(sorted(self.calls, key=lambda c: c.sent))
            return Outcome(self.name, calls, lost_at, RATE)


def _caller(name: str, targets: list[str], published: bool) -> Caller:
    opened = []
    for target in targets:
        if published:
            channel = channels.channel(
                target,
                options=[("grpc.use_local_subchannel_pool", 1)],
                service_config=SERVICE_CONFIG.read_text(),
            )
        else:
            channel = grpc.insecure_channel(target, options=[("grpc.use_local_subchannel_pool", 1)])
        grpc.channel_ready_future(channel).result(timeout=30)
        opened.append(channel)
    stubs = [rules_pb2_grpc.RulesServiceStub(c) for c in opened]  # type: ignore[no-untyped-call]
    return Caller(name, stubs, opened)


def _restore(cluster: kube.Cluster, victim: kube.Node, link: tuple[str, ...]) -> None:
    """The lost node back: its link up, its containerd started again (and answering), then
    its kubelet (started again until it stays up: it exits when containerd's CRI is not
    initialized yet), until the node is Ready."""
    subprocess.run([*link, "up"], check=False, timeout=30)
    containerd, kubelet = victim.component("containerd"), victim.component("kubelet")
    if containerd not in cluster.processes:
        cluster.restart_component(containerd)
    socket = str(victim.containerd_socket)
    cluster.wait(
        "the lost node's containerd",
        lambda: (
            cluster.run(
                "ctr", "--address", socket, "version", node=victim.index, check=False, timeout=10
            ).returncode
            == 0
        ),
        30,
    )
    deadline = time.monotonic() + 60
    while kubelet not in cluster.processes or cluster.processes[kubelet].poll() is not None:
        assert time.monotonic() < deadline, cluster.log(kubelet)
        cluster.restart_component(kubelet)
        time.sleep(3)
    cluster.wait("the lost node Ready again", lambda: _node_ready(cluster, victim.name), 120)
    # The pods of other releases on that node (the session's) are not Ready until its kubelet
    # probes them again: the modules after this one expect them serving.
    began = time.monotonic()
    wait_settled(cluster)
    print(f"\nthe lost node Ready again; every pod Ready {time.monotonic() - began:.1f} s later")


def _connections_by_pod(cluster: kube.Cluster, service_ip: str) -> dict[str, int]:
    """The established connections through the ClusterIP, counted by the pod kube-proxy
    sent each to (node 0's conntrack table, where the host's calls to Services enter)."""
    listed = cluster.run(
        *("conntrack", "-L", "-p", "tcp", "-d", service_ip, "--dport", "50051"),
        check=False,
        timeout=30,
    ).stdout
    found: dict[str, int] = {}
    for line in listed.splitlines():
        if "ESTABLISHED" in line:
            # The reply's source (the second src=) is the pod kube-proxy chose.
            pod = line.split("src=")[2].split()[0]
            found[pod] = found.get(pod, 0) + 1
    return found


def _node_ready(cluster: kube.Cluster, name: str) -> bool:
    node = cluster.get("node", name)
    return any(c["type"] == "Ready" and c["status"] == "True" for c in node["status"]["conditions"])


def test_a_node_lost_abruptly_with_calls_in_flight(
    loss_release: Release, cluster: kube.Cluster
) -> None:
    """The node's kubelet and containerd SIGKILLed and its link cut. Asserted: every caller's
    calls were all OK before the loss; the lost pod leaves the Service's endpoints within
    ENDPOINTS_WITHIN (the node controller's grace period, then the endpoint update) and a
    replacement runs Ready on another node within REPLACED_WITHIN (the taints' toleration);
    the headless callers with the published settings are all OK again within 10 s with at
    most 1% of a minute's calls failed (keepalive's TCP_USER_TIMEOUT and round_robin's health
    check: issue 41's goal); the ClusterIP callers with the published settings are all OK
    again once the endpoints dropped the lost pod (kube-proxy's next connection cannot pick
    it), not later than 15 s after. What each saw is printed."""
    release = loss_release
    pods = release.wait_ready(LOSS_REPLICAS)
    by_node = {p["spec"]["nodeName"]: p for p in pods}
    victim = next(n for n in cluster.nodes[1:] if n.name in by_node)
    lost_pod = by_node[victim.name]
    lost_ip = lost_pod["status"]["podIP"]
    clusterip = release.target()
    name = f"{release.name}-headless.{NAMESPACE}.svc.cluster.local"
    callers = [
        _caller("ClusterIP, published settings", [clusterip] * CHANNELS, True),
        _caller(
            "headless round_robin, published settings",
            [f"dns://{cluster.dns}/{name}:50051"],
            True,
        ),
        _caller("ClusterIP, plain grpcio", [clusterip] * CHANNELS, False),
    ]
    link = ("ip", "-n", cluster.switch_netns, "link", "set", victim.link)
    kubelet, containerd = victim.component("kubelet"), victim.component("containerd")
    try:
        for caller in callers:
            caller.start()
        time.sleep(BEFORE_SECONDS)
        exposed = _connections_by_pod(cluster, clusterip.partition(":")[0])
        subprocess.run([*link, "down"], check=True, timeout=30)
        lost_at = time.monotonic()
        cluster.stop_component(kubelet, sent=signal.SIGKILL)
        cluster.stop_component(containerd, sent=signal.SIGKILL)
        not_ready = endpoints_dropped = replaced = None
        deadline = lost_at + REPLACED_WITHIN
        while time.monotonic() < deadline and replaced is None:
            now = time.monotonic() - lost_at
            try:
                if not_ready is None and not _node_ready(cluster, victim.name):
                    not_ready = now
                if endpoints_dropped is None and lost_ip not in release.endpoints():
                    endpoints_dropped = now
                running = [p for p in release.pods() if ready(p)]
                if len(running) == LOSS_REPLICAS and victim.name not in {
                    p["spec"]["nodeName"] for p in running
                }:
                    replaced = now
            except (subprocess.SubprocessError, ValueError):
                pass
            time.sleep(0.5)
        time.sleep(AFTER_SECONDS)
        for caller in callers:
            caller.stop()
        outcomes = {caller.name: caller.outcome(lost_at) for caller in callers}
    finally:
        for caller in callers:
            caller.stop()
        _restore(cluster, victim, link)

    def said(seconds: float | None) -> str:
        return "not seen" if seconds is None else f"{seconds:.1f} s"

    print(
        f"\nnode lost ({victim.name}, pod {lost_pod['metadata']['name']}): node not Ready "
        f"{said(not_ready)} after, the pod out of the endpoints {said(endpoints_dropped)} after, "
        f"a replacement Ready elsewhere {said(replaced)} after; connections through the "
        f"ClusterIP by pod before the loss {exposed} (the lost pod {lost_ip})"
    )
    for outcome in outcomes.values():
        print(json.dumps(outcome.summary()))
    for outcome in outcomes.values():
        assert outcome.before and all(c.code == "OK" for c in outcome.before), outcome.summary()
    assert endpoints_dropped is not None and endpoints_dropped <= ENDPOINTS_WITHIN
    assert replaced is not None
    headless = outcomes["headless round_robin, published settings"]
    recovered = headless.recovered_after
    assert recovered is not None and recovered <= RECOVERY_GOAL_SECONDS, headless.summary()
    assert headless.minute_share <= FAILED_GOAL_SHARE, headless.summary()
    through = outcomes["ClusterIP, published settings"]
    recovered = through.recovered_after
    assert recovered is not None and recovered <= endpoints_dropped + 15, (
        endpoints_dropped,
        through.summary(),
    )
