"""Rollouts on the cluster at 300 calls a second from one client (issue 41, item 6): a client
with the published settings, one process and one channel to the Service's ClusterIP, loses no
call through `helm upgrade` rollouts; a plain grpcio client beside it is measured.

The clients are testkit.clusterip_rollout's (`python -m testkit.clusterip_rollout client
TARGET`): each a process of its own, as a lobby is (gRPC keeps the retry throttle per process
and target), sending NewMatch at a fixed pace over one channel, each call on time whether or
not the last has ended, under a 5 s deadline, and writing every call's send time and status.
The release is the module's `small_release` (conftest.py). The test command runs ROLLOUTS
rollouts; `BASRA_PACE_ROLLOUTS=20` runs the issue's twenty (docs/capacity.md).
"""

from __future__ import annotations

import os
import time

import pytest

from testkit import clusterip_rollout
from testkit.chart_on_cluster import Release, rollout_status, wait_drained
from testkit.clusterip_rollout import PLAIN, PUBLISHED, Rolled

ROLLOUTS = int(os.environ.get("BASRA_PACE_ROLLOUTS", "3"))
RATE = 300.0
# Calls that ended OK from each `helm upgrade` until its old pods were gone, as a share of the
# pace over that time: the calls flowed through the rollout rather than stalling.
FLOWED = 0.5

pytestmark = pytest.mark.timeout(180 + 60 * ROLLOUTS)


def test_a_client_at_300_calls_a_second_loses_no_call_through_rollouts(
    small_release: Release,
) -> None:
    """ROLLOUTS rolling updates while one published-settings client and one plain client each
    send 300 NewMatch a second through the ClusterIP: the published one loses none."""
    release = small_release
    release.wait_ready(2)
    target = release.target()
    clients = {
        kind: clusterip_rollout.start_client(target, RATE, kind) for kind in (PUBLISHED, PLAIN)
    }
    rolled: list[Rolled] = []
    try:
        for process in clients.values():
            clusterip_rollout.read_event(process, "ready")
        time.sleep(2.0)
        for index in range(ROLLOUTS):
            began = time.monotonic()
            release.upgrade("--set", f"podAnnotations.pace=r{index}")
            rollout_status(release)
            wait_drained(release)
            rolled.append(Rolled(began, began, time.monotonic(), 0))
        time.sleep(2.0)
        seen = {}
        for kind, process in clients.items():
            assert process.stdin is not None
            process.stdin.close()
            seen[kind] = clusterip_rollout.calls_seen(kind, process)
    finally:
        for process in clients.values():
            clusterip_rollout.stop_client(process)
    for kind in (PUBLISHED, PLAIN):
        print(f"\n{ROLLOUTS} rollouts at {RATE:.0f} calls/s, {kind}: {seen[kind].summary(rolled)}")
    published = seen[PUBLISHED].summary(rolled)
    assert published["failed"] == 0, published
    took = [r.exited - r.switched for r in rolled]
    for ok, seconds in zip(seen[PUBLISHED].ok_switch_to_exit(rolled), took, strict=True):
        assert ok >= FLOWED * RATE * seconds, (ok, seconds)
