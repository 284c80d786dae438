"""Rollouts behind one address (a ClusterIP's caller) at 300 calls a second: a client with the
published settings loses no call (issue 41, item 6; testkit.clusterip_rollout).

The short form of `python -m testkit.clusterip_rollout` (20 rollouts, RELIABILITY.md): five
rollouts, the published client alone (the plain grpcio client's figures are the command's),
each rollout asserted to have carried calls at about the pace while the old pod drained.
"""

from __future__ import annotations

import time

import pytest

from testkit import clusterip_rollout
from testkit.clusterip_rollout import PUBLISHED

# Each rollout takes a few seconds (a server's start, the pause, the drain); a stuck one fails
# here, and every process is stopped on the way out.
pytestmark = pytest.mark.timeout(120)

ROLLOUTS = 5
RATE = 300.0
# Calls that ended OK from each switch until the old pod's exit, as a share of the pace: the
# calls must have flowed through the rollout, not stalled (a stall would fail its deadline).
FLOOR_SHARE = 0.5
# A short grace: the old pod exits once its calls and the health Watch are done.
GRACE_SECONDS = 2.0
BOUND_SECONDS = 60.0


def test_a_clusterip_caller_with_the_published_settings_loses_no_call_in_rollouts() -> None:
    """Five rollouts at 300 calls a second: 0 failed calls, calls flowing through each."""
    began = time.monotonic()
    measured = clusterip_rollout.measure(ROLLOUTS, RATE, grace=GRACE_SECONDS, kinds=(PUBLISHED,))
    took = time.monotonic() - began
    seen = measured.client(PUBLISHED)
    failed = [call for call in seen.calls if call[1] != "OK"]
    assert not failed, f"{len(failed)} failed: {seen.summary(measured.rollouts)}"
    assert len(measured.rollouts) == ROLLOUTS
    assert {r.exit_code for r in measured.rollouts} == {0}
    floors = [FLOOR_SHARE * RATE * (r.exited - r.switched) for r in measured.rollouts]
    ok = seen.ok_switch_to_exit(measured.rollouts)
    assert all(n >= floor for n, floor in zip(ok, floors, strict=True)), (ok, floors)
    # Every rollout moved the client to the new pod: one connection each, and the first.
    assert measured.connections >= ROLLOUTS + 1
    assert took < BOUND_SECONDS, f"{ROLLOUTS} rollouts took {took:.1f} s"
