"""A rolling update on loopback: pods of two configurations (or two releases) answer side by
side while many matches go on, each call sent to a pod drawn at random.

That is what a lobby meets while a platform team rolls out a change: a Kubernetes Service
spreads calls over the ready pods of a Deployment, and during a rollout those are pods of the
old and the new configuration at once, for minutes; a match's next call lands on either.

A `Spec` is one configuration: flags, variables, and the program (this checkout, or a previous
release built by testkit.releases). A `Pod` is one `basra-rules serve` of a spec, started by
testkit.harness. A `Rollout` keeps the pods in service and plays `matches` matches at once,
each on its own thread the way a lobby plays one: NewMatch, then Apply after Apply with a move
the last answer offered (with expected_seq), now and then a LegalMoves, PlayerView or
SuggestMove on the same state, a PlayerView of the seed once the match is over, then a new
match. A state travels as a lobby keeps it: the answer's signed_state when it has one, else
its plain state. Every answer is checked for what the call must give (the next seq, the legal
moves the last answer offered, a suggestion among them); any refusal, failure or wrong answer
is recorded with the pod that gave it and the configuration that made the state it was given.

`roll_to(spec)` is one rollout as the chart's Deployment makes it (maxUnavailable 0): a pod of
the new spec starts and joins the pool once it serves; both answer until states have crossed
from each configuration to the other; then each old pod leaves the pool, gets SIGTERM after a
pause (the chart's preStop sleep, during which its calls in flight finish) and drains.
`wait_for_every_match` is the wait some procedures ask between two rollouts: until every
match holds a state that a pod of the current configuration returned.
"""

from __future__ import annotations

import dataclasses
import random
import threading
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import grpc
from basra.v1 import rules_pb2 as pb
from basra.v1 import rules_pb2_grpc

from clients.refusals import error_infos
from testkit import harness
from testkit.harness import ServedProcess
from testkit.releases import Release

CALL_TIMEOUT = 10.0
# Share of the turns that also look at the state (LegalMoves, PlayerView or SuggestMove).
LOOK_SHARE = 0.2
# The pause between a pod's leaving the pool and its SIGTERM: the chart's preStop sleep,
# shortened (on loopback a call takes milliseconds, not a network's and a proxy's time).
PRESTOP_SECONDS = 0.5
# States that must cross from each configuration to the other while both serve.
CROSSINGS = 25
WAIT_SECONDS = 60.0


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


@dataclass(frozen=True)
class Failure:
    """A call that did not give what it must: who answered, whose state it carried, how."""

    method: str
    pod: str
    state_from: str | None
    code: str
    reason: str | None
    details: str
    metadata: tuple[tuple[str, str], ...] = ()
    """The ErrorInfo's metadata of a refusal (keyId, field, ...)."""


@dataclass
class Held:
    """What a match's lobby keeps between calls: the state as it came, and its facts."""

    fields: dict[str, Any]
    made_by: str
    seq: int
    moves: pb.LegalMoves
    over: bool


@dataclass
class Tally:
    """Counts shared by the match threads (guarded by `lock`)."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    calls: Counter[str] = field(default_factory=Counter)
    by_pod: Counter[str] = field(default_factory=Counter)
    crossings: Counter[tuple[str, str]] = field(default_factory=Counter)
    """Calls whose state one configuration made and another's pod was given."""
    failures: list[Failure] = field(default_factory=list)
    matches: int = 0
    finished: int = 0


class Rollout:
    """Pods in service and the matches that call them; a context manager."""

    def __init__(self, first: Spec, *, matches: int = 16, seed: str = "rollout") -> None:
        self.tally = Tally()
        self.pool: tuple[Pod, ...] = ()
        self.retired: list[Pod] = []
        self._first = first
        self._matches = matches
        self._seed = seed
        self._held: list[Held | None] = [None] * matches
        self._stopping = threading.Event()
        self._threads: list[threading.Thread] = []

    def __enter__(self) -> Rollout:
        self.pool = (self._start(self._first),)
        for index in range(self._matches):
            thread = threading.Thread(target=self._play, args=(index,), daemon=True)
            thread.start()
            self._threads.append(thread)
        self._wait("every match under way", lambda: all(h is not None for h in self._held))
        return self

    def __exit__(self, *exc: object) -> None:
        self._stopping.set()
        for thread in self._threads:
            thread.join(CALL_TIMEOUT + 5)
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

        self._wait(f"states crossing between {sorted(names)} and {spec.name}", crossed)
        for pod in old:
            self._retire(pod, pause=PRESTOP_SECONDS)

    def wait_for_every_match(self) -> None:
        """Wait until every match holds a state that the current configuration returned."""
        name = self.current.name
        self._wait(
            f"every match holding a state of {name}",
            lambda: all(h is not None and h.made_by == name for h in self._held),
        )

    def _wait(self, what: str, done: Any) -> None:
        deadline = time.monotonic() + WAIT_SECONDS
        while not done():
            if time.monotonic() > deadline:
                raise TimeoutError(f"no {what} within {WAIT_SECONDS} s: {self.tally.calls}")
            time.sleep(0.02)

    def _start(self, spec: Spec) -> Pod:
        served = spec.start()
        channel = (
            grpc.insecure_channel(served.target)
            if spec.credentials is None
            else grpc.secure_channel(served.target, spec.credentials)
        )
        stub = rules_pb2_grpc.RulesServiceStub(channel)  # type: ignore[no-untyped-call]
        return Pod(spec, served, channel, stub)

    def _retire(self, pod: Pod, pause: float) -> None:
        """Take a pod out of the pool; after `pause`, SIGTERM it and wait for its exit."""
        self.pool = tuple(p for p in self.pool if p is not pod)
        time.sleep(pause)
        pod.exit_code = pod.served.stop(60)
        pod.channel.close()
        self.retired.append(pod)

    def _play(self, index: int) -> None:
        try:
            self._play_on(index)
        except Exception as error:  # a broken match thread is a failure, not a quiet exit
            self._fail(Failure("-", "-", None, "CRASH", None, repr(error)))

    def _play_on(self, index: int) -> None:
        rnd = random.Random(f"{self._seed}/{index}")
        while not self._stopping.is_set():
            held = self._held[index]
            pod = rnd.choice(self.pool)
            if held is None:
                self._held[index] = self._new_match(pod, rnd)
            elif held.over:
                self._reveal(pod, held)
                self._held[index] = self._new_match(pod, rnd)
            elif rnd.random() < LOOK_SHARE:
                self._look(pod, held, rnd)
            else:
                self._held[index] = self._apply(pod, held, rnd)

    def _call(self, pod: Pod, method: str, request: Any, held: Held | None) -> Any:
        """One call; None when it failed (recorded)."""
        made_by = held.made_by if held is not None else None
        with self.tally.lock:
            self.tally.calls[method] += 1
            self.tally.by_pod[pod.spec.name] += 1
            if made_by is not None and made_by != pod.spec.name:
                self.tally.crossings[(made_by, pod.spec.name)] += 1
        try:
            return getattr(pod.stub, method)(request, timeout=CALL_TIMEOUT)
        except grpc.RpcError as error:
            infos = error_infos(error.trailing_metadata())
            reason = infos[0].reason if infos else None
            metadata = tuple(sorted(infos[0].metadata.items())) if infos else ()
            failure = Failure(
                method, pod.spec.name, made_by, error.code().name, reason, error.details() or ""
            )
            self._fail(dataclasses.replace(failure, metadata=metadata))
            return None

    def _fail(self, failure: Failure) -> None:
        with self.tally.lock:
            self.tally.failures.append(failure)

    def _wrong(self, method: str, pod: Pod, held: Held, what: str) -> None:
        """An answer that is not what the call must give."""
        self._fail(Failure(method, pod.spec.name, held.made_by, "WRONG", None, what))

    def _kept(self, pod: Pod, answer: Any) -> Held:
        """The state of a NewMatch or Apply answer, as a lobby keeps it."""
        carried = (
            {"signed_state": answer.signed_state}
            if answer.HasField("signed_state")
            else {"state": answer.state}
        )
        over = answer.state.status == pb.STATUS_OVER
        return Held(carried, pod.spec.name, answer.state.seq, answer.legal_moves, over)

    def _new_match(self, pod: Pod, rnd: random.Random) -> Held | None:
        request = pb.NewMatchRequest(seed=rnd.randbytes(16), labels=["north", "south"])
        answer = self._call(pod, "NewMatch", request, None)
        if answer is None:
            return None
        with self.tally.lock:
            self.tally.matches += 1
        return self._kept(pod, answer)

    def _apply(self, pod: Pod, held: Held, rnd: random.Random) -> Held | None:
        move = rnd.choice(held.moves.moves)
        action = pb.Action(seat=held.moves.seat, card=move.card)
        if move.plans:
            action.plan_id = rnd.choice(move.plans).id
        else:
            action.trail = True
        request = pb.ApplyRequest(**held.fields, action=action, expected_seq=held.seq)
        answer = self._call(pod, "Apply", request, held)
        if answer is None:
            return None
        if answer.state.seq != held.seq + 1:
            self._wrong("Apply", pod, held, f"seq {answer.state.seq}")
            return None
        return self._kept(pod, answer)

    def _look(self, pod: Pod, held: Held, rnd: random.Random) -> None:
        which = rnd.randrange(3)
        if which == 0:
            moves = self._call(pod, "LegalMoves", pb.LegalMovesRequest(**held.fields), held)
            if moves is not None and moves.legal_moves != held.moves:
                self._wrong("LegalMoves", pod, held, "other moves")
        elif which == 1:
            seat = rnd.randrange(2)
            view = self._call(
                pod, "PlayerView", pb.PlayerViewRequest(**held.fields, seat=seat), held
            )
            if view is not None and view.view.seq != held.seq:
                self._wrong("PlayerView", pod, held, "another seq")
        else:
            asked = pb.SuggestMoveRequest(
                **held.fields, seat=held.moves.seat, level=pb.BOT_LEVEL_RANDOM
            )
            suggested = self._call(pod, "SuggestMove", asked, held)
            cards = {m.card for m in held.moves.moves}
            if suggested is not None and suggested.action.card not in cards:
                self._wrong("SuggestMove", pod, held, "not a legal card")

    def _reveal(self, pod: Pod, held: Held) -> None:
        """The last call of a match: seat 0's view, which reveals the seed."""
        view = self._call(pod, "PlayerView", pb.PlayerViewRequest(**held.fields, seat=0), held)
        if view is not None and not view.view.seed:
            self._wrong("PlayerView", pod, held, "no seed at the end")
        with self.tally.lock:
            self.tally.finished += 1


def failures_by_kind(failures: Sequence[Failure]) -> Counter[tuple[str, str | None]]:
    """Failures counted by code and reason, for a short assertion message."""
    return Counter((f.code, f.reason) for f in failures)
