"""A rolling update on loopback: pods of two configurations (or two releases) answer side by
side while many matches go on, each call sent to a pod drawn at random.

That is what a lobby meets while a platform team rolls out a change: a Kubernetes Service
spreads calls over the ready pods of a Deployment, and during a rollout those are pods of the
old and the new configuration at once, for minutes; a match's next call lands on either.

A `Spec` is one configuration: flags, variables, and the program (this checkout, or a previous
release built by testkit.releases). A `Pod` is one `basra-rules serve` of a spec, started by
testkit.harness. A `Rollout` keeps the pods in service and plays `matches` matches at once
(testkit.matchplay: each on its own thread the way a lobby plays one, every answer checked),
each call going to a pod of the pool drawn at random; a failure names the pod's spec and the
spec whose pod made the state it carried.

`roll_to(spec)` is one rollout as the chart's Deployment makes it (maxUnavailable 0): a pod of
the new spec starts and joins the pool once it serves; both answer until states have crossed
from each configuration to the other; then each old pod leaves the pool, gets SIGTERM after a
pause (the chart's preStop sleep, during which its calls in flight finish) and drains.
`wait_for_every_match` is the wait some procedures ask between two rollouts: until every
match holds a state that a pod of the current configuration returned.

The test cluster (tests/cluster/test_cluster_rollouts.py, testkit.lobbies) now rolls the
chart itself out with matches in flight through a Service, for every procedure helm can do.
This imitation stays for tests/rollout (test_rollout_procedures.py, and test_rollout_docs.py,
which reads the steps from tests/rollout/procedures.py), for what the cluster cannot show:
- states that certainly cross: here a rollout lasts until at least CROSSINGS states have gone
  from each configuration to the other; through a Service nothing chooses the pod a call
  reaches, so a cluster rollout may pass with few crossings;
- an upgrade from the last release's own code (testkit.releases builds it from the
  repository's history); on the cluster the "new release" is this image under a second tag;
- the variants the cluster tests leave out: mutual TLS on, TLS off, a renewal by another CA,
  tracing (a collector the pods could reach), the limits and the connection-age settings;
- the two rollouts the procedures avoid (keys without the window, a new key first in one
  step), which show that such a harness sees BAD_SIGNATURE mid-rollout;
- all of it in seconds a rollout, where a cluster rollout takes about 15 s.
"""

from __future__ import annotations

import random
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import grpc
from basra.v1 import rules_pb2_grpc

from clients import channels
from testkit import harness
from testkit.harness import ServedProcess
from testkit.matchplay import Failure, Matches, Tally, failures_by_kind
from testkit.releases import Release

__all__ = ["Failure", "Pod", "Rollout", "Spec", "Tally", "failures_by_kind"]

# The pause between a pod's leaving the pool and its SIGTERM: the chart's preStop sleep,
# shortened (on loopback a call takes milliseconds, not a network's and a proxy's time).
PRESTOP_SECONDS = 0.5
# States that must cross from each configuration to the other while both serve.
CROSSINGS = 25


@dataclass(frozen=True)
class Spec:
    """One configuration of the Deployment: what its pods run."""

    name: str
    flags: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    release: Release | None = None
    """A previous release to run instead of this checkout."""
    credentials: grpc.ChannelCredentials | None = None
    """How clients reach its pods over TLS (None: plaintext)."""

    def start(self) -> ServedProcess:
        """Start one pod of this spec and wait until it serves."""
        if self.release is None:
            return harness.start(self.flags, env=self.env)
        return harness.start(
            self.flags,
            env={**self.env, **self.release.env},
            cwd=self.release.tree,
            program=self.release.program,
        )


@dataclass
class Pod:
    """A serving pod: its spec, its process and a channel to it."""

    spec: Spec
    served: ServedProcess
    channel: grpc.Channel
    stub: Any
    exit_code: int | None = None

    @property
    def name(self) -> str:
        """The name calls and states are counted under: its spec's."""
        return self.spec.name


class Rollout:
    """Pods in service and the matches that call them; a context manager."""

    def __init__(self, first: Spec, *, matches: int = 16, seed: str = "rollout") -> None:
        self.pool: tuple[Pod, ...] = ()
        self.retired: list[Pod] = []
        self._first = first
        self.matches = Matches(matches, self._pick, seed=seed)

    @property
    def tally(self) -> Tally:
        """What the matches counted."""
        return self.matches.tally

    def __enter__(self) -> Rollout:
        self.pool = (self._start(self._first),)
        self.matches.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.matches.stop()
        for pod in self.pool:
            self._retire(pod, pause=0.0)
        self.pool = ()

    @property
    def current(self) -> Spec:
        """The spec of the newest pod."""
        return self.pool[-1].spec

    def roll_to(self, spec: Spec, crossings: int = CROSSINGS) -> None:
        """Roll every pod over to `spec`, one surge pod at a time, calls going on."""
        old = self.pool
        with self.tally.lock:
            before = Counter(self.tally.crossings)
        self.pool = (*old, self._start(spec))
        names = {pod.spec.name for pod in old} - {spec.name}

        def crossed() -> bool:
            with self.tally.lock:
                now = self.tally.crossings - before
            return all(
                now[(a, spec.name)] >= crossings and now[(spec.name, a)] >= crossings for a in names
            )

        self.matches.wait(f"states crossing between {sorted(names)} and {spec.name}", crossed)
        for pod in old:
            self._retire(pod, pause=PRESTOP_SECONDS)

    def wait_for_every_match(self) -> None:
        """Wait until every match holds a state that the current configuration returned."""
        name = self.current.name
        self.matches.wait(
            f"every match holding a state of {name}",
            lambda: all(h is not None and h.made_by == name for h in self.matches.held),
        )

    def _pick(self, rnd: random.Random) -> Pod:
        return rnd.choice(self.pool)

    def _start(self, spec: Spec) -> Pod:
        served = spec.start()
        channel = channels.channel(served.target, credentials=spec.credentials)
        stub = rules_pb2_grpc.RulesServiceStub(channel)  # type: ignore[no-untyped-call]
        return Pod(spec, served, channel, stub)

    def _retire(self, pod: Pod, pause: float) -> None:
        """Take a pod out of the pool; after `pause`, SIGTERM it and wait for its exit."""
        self.pool = tuple(p for p in self.pool if p is not pod)
        time.sleep(pause)
        pod.exit_code = pod.served.stop(60)
        pod.channel.close()
        self.retired.append(pod)
