"""Faults of the node and of a pod's process, with matches in flight through the ClusterIP
Service (issue 41, items 7 and 5 on the cluster): the kubelet of a node running a pod restarted,
and one worker of a pod stopped outright (SIGSTOP) so that the pod's own supervisor has to find
and replace it.

The release is the session's `release` (conftest.py): the chart's defaults, 2 pods of 2 workers.
Lobbies (testkit/lobbies.py) play 16 matches over 8 replicas with the published service config
loaded whole (round_robin, health check, retries of UNAVAILABLE, throttle), every answer
checked; 8 replicas are 8 connections, which kube-proxy and the kernel spread over the 4
workers. Run with `-s` to see the figures each test prints.
"""

from __future__ import annotations

import datetime
import json
import os
import signal
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from service.metrics import FLUSH_SECONDS
from testkit.chart_on_cluster import Release, ready, workers
from testkit.hung_worker import CUT_SECONDS, FAST_FAILURE, RECONNECT_WINDOW, REPLACED_WITHIN
from testkit.lobbies import Lobbies, replica
from testkit.matchplay import failures_by_kind

pytestmark = pytest.mark.timeout(240)

REPLICAS = 8
MATCHES = 16
# The least pace of the lobbies' calls through each fault, calls a second (16 matches pausing
# 50 ms between calls make about 250: docs/capacity.md), and the least in any one second.
MIN_PACE = 50
MIN_EACH_SECOND = 10
# After the kubelet is Ready again, the lobbies play on this long (a readiness probe period
# of the chart, 5 s, and more), so that what the restart does to the pods' readiness is seen.
AFTER_READY = 8.0
# The lobbies play on this long after the kill.
AFTER_KILL = 8.0
# A call started after the kill (plus the time for its client to read the reset) is answered
# well within this: none waits on the stopped worker.
AFTER_KILL_SLOWEST = 2.0
HUNG = "worker hung, killing and replacing it"


def lobbies(release: Release, seed: str) -> Lobbies:
    """Eight replicas with the published service config, 16 matches."""
    target = release.target()
    replicas = [replica(release.name, target) for _ in range(REPLICAS)]
    return Lobbies(replicas, matches=MATCHES, seed=seed)


def assert_flowed(played: Lobbies, began: float, ended: float) -> tuple[int, int]:
    """Calls ended from `began` to `ended`: at least MIN_PACE a second over the whole and
    MIN_EACH_SECOND in every whole second; return (calls, fewest in a second)."""
    with played.tally.lock:
        ends = [at for at, _ in played.tally.ended if began <= at <= ended]
    seconds = int(ended - began)
    each = [sum(began + s <= at < began + s + 1 for at in ends) for s in range(seconds)]
    assert len(ends) >= MIN_PACE * (ended - began), (len(ends), ended - began)
    assert each and min(each) >= MIN_EACH_SECOND, each
    return len(ends), min(each)


def pod_state(release: Release) -> dict[str, tuple[str, int, str]]:
    """Each pod by uid: its name, its server container's restartCount, and when its Ready
    condition last changed."""
    found = {}
    for pod in release.pods():
        (container,) = [c for c in pod["status"]["containerStatuses"] if c["name"] == "server"]
        (condition,) = [c for c in pod["status"]["conditions"] if c["type"] == "Ready"]
        found[pod["metadata"]["uid"]] = (
            pod["metadata"]["name"],
            int(container["restartCount"]),
            str(condition["lastTransitionTime"]),
        )
    return found


def _node_ready_since(release: Release, name: str, moment: datetime.datetime) -> bool:
    """Whether the node is Ready and its kubelet renewed the node's Lease (its heartbeat, in
    microseconds) after `moment`."""
    node = release.cluster.get("node", name)
    (condition,) = [c for c in node["status"]["conditions"] if c["type"] == "Ready"]
    lease = release.cluster.get("lease", name, "--namespace", "kube-node-lease")
    renewed = datetime.datetime.fromisoformat(lease["spec"]["renewTime"].replace("Z", "+00:00"))
    return bool(condition["status"] == "True" and renewed > moment)


@pytest.mark.parametrize("sent", [signal.SIGTERM, signal.SIGKILL], ids=["sigterm", "sigkill"])
def test_a_restarted_kubelet_costs_no_call(release: Release, sent: signal.Signals) -> None:
    """The kubelet of a node running a pod of the release stopped (SIGTERM, or SIGKILL) and
    started again with the same command line while matches play: no call fails, calls flow
    every second, the node is Ready with its Lease renewed by the new kubelet, and the pods
    go on (same pods, no container restarted). The restarted kubelet reports each pod's
    Ready condition anew: when it was seen not Ready is printed, not asserted (the lobbies'
    connections outlive it)."""
    cluster = release.cluster
    pods = release.wait_ready(2)
    node = cluster.node(pods[0]["spec"]["nodeName"])
    kubelet = node.component("kubelet")
    before = pod_state(release)
    with lobbies(release, f"kubelet-{sent.name}") as played:
        time.sleep(2)
        began = time.monotonic()
        cluster.stop_component(kubelet, sent=sent)
        restarted = datetime.datetime.now(datetime.UTC)
        cluster.restart_component(kubelet)
        stopped_for = time.monotonic() - began
        cluster.wait(
            "the node Ready again",
            lambda: _node_ready_since(release, node.name, restarted),
            60,
        )
        ready_after = time.monotonic() - began
        unready = _unready_while(release, began, time.monotonic() + AFTER_READY)
        release.wait_ready(2, seconds=30)
        ended = time.monotonic()
    tally = played.tally
    assert tally.failures == [], (failures_by_kind(tally.failures), tally.failures[:3])
    calls, fewest = assert_flowed(played, began, ended)
    after = pod_state(release)
    assert {uid: state[:2] for uid, state in after.items()} == {
        uid: state[:2] for uid, state in before.items()
    }, (before, after)
    flapped = sorted(name for uid, (name, _, since) in after.items() if since != before[uid][2])
    print(
        f"\nkubelet restart ({sent.name}, {node.name}): stopped and started in "
        f"{stopped_for:.1f} s, node Ready with its Lease renewed {ready_after:.1f} s after "
        f"the stop; {calls} calls in "
        f"{ended - began:.1f} s (fewest in a second {fewest}), 0 failed; pods "
        f"{sorted(name for name, _, _ in before.values())} not restarted; Ready condition "
        f"changed on {len(flapped)} of them, seen not Ready {unready}"
    )


def _unready_while(release: Release, began: float, until: float) -> str:
    """Poll the pods' Ready conditions until `until`; when any was seen not Ready (seconds
    after `began`), for the printout."""
    seen = []
    while time.monotonic() < until:
        if not all(ready(p) for p in release.pods()):
            seen.append(time.monotonic() - began)
        time.sleep(0.25)
    return f"from {seen[0]:.1f} to {seen[-1]:.1f} s after the stop" if seen else "never"


def _replaced(pod: dict[str, Any]) -> dict[str, float]:
    """basra_workers_replaced_total by reason, from the pod's metrics port."""
    url = f"http://{pod['status']['podIP']}:9464/metrics"
    with urllib.request.urlopen(url, timeout=10) as answer:
        text = answer.read().decode()
    found = {}
    for line in text.splitlines():
        if line.startswith("basra_workers_replaced_total{"):
            labels, _, value = line.rpartition(" ")
            found[labels.split('reason="')[1].split('"')[0]] = float(value)
    return found


def _gone(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rpartition(")")[2].split()[0] == "Z"


def test_a_hung_worker_in_a_pod_is_replaced_and_the_pod_stays_ready(release: Release) -> None:
    """SIGSTOP on the busiest worker of the two pods while matches play: the pod's supervisor
    kills it within 5 s (its log line, basra_workers_replaced_total{reason="hung"}) and a new
    worker serves; the pod stays Ready and no container restarts; no call started after the
    kill waits on the stopped worker, and none fails but at once within RECONNECT_WINDOW of the
    kill (testkit.hung_worker)."""
    release.wait_ready(2)
    before = pod_state(release)
    pods = {p["metadata"]["uid"]: p for p in release.pods()}
    replaced_before = {uid: _replaced(pod).get("hung", 0.0) for uid, pod in pods.items()}
    with lobbies(release, "hung-worker") as played:
        time.sleep(2 * FLUSH_SECONDS + 1)
        first = {uid: release.worker_calls(pod) for uid, pod in pods.items()}
        time.sleep(2 * FLUSH_SECONDS + 1)
        grown = {
            (uid, pid): calls - first[uid].get(pid, 0.0)
            for uid, pod in pods.items()
            for pid, calls in release.worker_calls(pod).items()
        }
        (uid, inner), busiest = max(grown.items(), key=lambda item: item[1])
        assert busiest > 0, grown
        pod = pods[uid]
        (victim,) = [host for host, pid in workers(pod).items() if str(pid) == inner]
        stopped_wall = datetime.datetime.now(datetime.UTC)
        stopped = time.monotonic()
        os.kill(victim, signal.SIGSTOP)
        while not _gone(victim) and time.monotonic() - stopped < 30:
            time.sleep(0.02)
        killed = time.monotonic()
        failed_at_kill = len(played.tally.failures)
        time.sleep(AFTER_KILL)
        ended = time.monotonic()
    try:
        assert killed - stopped <= REPLACED_WITHIN, killed - stopped
        lines = [json.loads(line) for line in release.logs(pod) if line.startswith("{")]
        found = [line for line in lines if line.get("event") == HUNG]
        assert len(found) == 1, (len(lines), lines[:1], [x for x in lines if "worker" in str(x)])
        (hung,) = found
        assert hung["pid"] == int(inner), hung
        (new,) = [
            line
            for line in lines
            if line.get("event") == "worker replaced" and line.get("reason") == "hung"
        ]
        assert new["replaced"] == int(inner), new
        assert len(workers(pod)) == 2
        assert _replaced(pod).get("hung", 0.0) == replaced_before[uid] + 1
    finally:
        if not _gone(victim):
            os.kill(victim, signal.SIGCONT)
    after = pod_state(release)
    assert after == before, (before, after)
    assert stopped_wall > datetime.datetime.fromisoformat(after[uid][2].replace("Z", "+00:00")), (
        "the pod's Ready condition changed after the stop"
    )
    tally = played.tally
    with tally.lock:
        late = [took for at, took in tally.ended if at - took >= killed + CUT_SECONDS]
    assert late and max(late) <= AFTER_KILL_SLOWEST, (len(late), max(late, default=0.0))
    # As on loopback (tests/service/test_service_hung_worker.py): a call may fail, at once,
    # where its channel's reconnection reached the stopped worker's listener, which a pod's
    # supervisor cannot take out of the port before the kill (testkit.hung_worker); none fails
    # otherwise, none waits out its deadline, and every call started once the reconnection
    # backoff is over is answered.
    window = killed + RECONNECT_WINDOW
    unexplained = [
        f
        for f in tally.failures
        if f.code != "UNAVAILABLE"
        or not stopped <= f.ended <= window
        or (f.began >= killed and f.ended - f.began > FAST_FAILURE)
    ]
    assert unexplained == [], (
        failed_at_kill,
        failures_by_kind(tally.failures),
        unexplained[:3],
    )
    calls, fewest = assert_flowed(played, killed, ended)
    print(
        f"\nhung worker (SIGSTOP on pid {inner} of {after[uid][0]}): killed "
        f"{killed - stopped:.2f} s after the stop (probe {hung['probe']}, unanswered "
        f"{hung['unanswered_seconds']:.2f} s, listener_closed {hung['listener_closed']}"
        f"{', listener_open ' + str(hung.get('listener_open')) if 'listener_open' in hung else ''}"
        f"); {calls} calls in the {ended - killed:.1f} s after the kill (fewest in a second "
        f"{fewest}, slowest started after it {1000 * max(late):.0f} ms); "
        f"{tally.total()} calls in all, {len(tally.failures)} failed (UNAVAILABLE, at once, "
        f"within {RECONNECT_WINDOW} s of the kill); pod Ready throughout, not restarted"
    )
