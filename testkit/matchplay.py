"""Matches played at once, each on its own thread the way a lobby plays one, every answer
checked: what testkit.rollout (pods on loopback) and testkit.lobbies (a Service of the test
cluster) share.

A match: NewMatch, then Apply after Apply with a move the last answer offered (with
expected_seq), now and then a LegalMoves, PlayerView or SuggestMove on the same state, a
PlayerView of the seed once the match is over, then a new match. A state travels as a lobby
keeps it: the answer's signed_state when it has one, else its plain state. Every answer is
checked for what the call must give (the next seq, the legal moves the last answer offered,
a suggestion among them); any refusal, failure or wrong answer is recorded with where the
call went and where the state it carried came from. A failed call ends its match (the next
turn begins a new one).

Where each call goes is the caller's choice: `pick(rnd)` gives a Target, a name and a stub
(a pod drawn from a pool on loopback, a lobby replica's channel to a Service).
"""

from __future__ import annotations

import dataclasses
import random
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import grpc
from basra.v1 import rules_pb2 as pb

from clients.refusals import error_infos

CALL_TIMEOUT = 10.0
# Share of the turns that also look at the state (LegalMoves, PlayerView or SuggestMove).
LOOK_SHARE = 0.2
WAIT_SECONDS = 60.0


class Target(Protocol):
    """Where a call goes: a name for the tally, and a RulesService stub."""

    @property
    def name(self) -> str: ...

    @property
    def stub(self) -> Any: ...


@dataclass(frozen=True)
class Failure:
    """A call that did not give what it must: where it went, whose state it carried, how."""

    method: str
    pod: str
    state_from: str | None
    code: str
    reason: str | None
    details: str
    metadata: tuple[tuple[str, str], ...] = ()
    """The ErrorInfo's metadata of a refusal (keyId, field, ...)."""
    began: float = 0.0
    """When a failed call was sent (time.monotonic()); 0 for an answer found wrong."""
    ended: float = 0.0
    """When a failed call ended (time.monotonic()); 0 for an answer found wrong."""


@dataclass
class Held:
    """What a match's lobby keeps between calls: the state as it came, and its facts."""

    fields: dict[str, Any]
    made_by: str
    seq: int
    moves: pb.LegalMoves
    over: bool
    key_id: str = ""
    """The key that signed the state ("" for a plain state)."""
    at: float = 0.0
    """When it came (time.monotonic())."""


@dataclass
class Tally:
    """Counts shared by the match threads (guarded by `lock`)."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    calls: Counter[str] = field(default_factory=Counter)
    by_pod: Counter[str] = field(default_factory=Counter)
    crossings: Counter[tuple[str, str]] = field(default_factory=Counter)
    """Calls whose state one target's answer made and another target was given."""
    states: Counter[str] = field(default_factory=Counter)
    """States received, by the key that signed them ("" unsigned)."""
    failures: list[Failure] = field(default_factory=list)
    matches: int = 0
    finished: int = 0
    ended: list[tuple[float, float]] = field(default_factory=list)
    """Each call's end (time.monotonic()) and how long it took, seconds, failed or not."""

    def total(self) -> int:
        """Calls made so far."""
        with self.lock:
            return sum(self.calls.values())

    def ended_between(self, start: float, end: float) -> list[float]:
        """How long each call that ended between `start` and `end` took, seconds."""
        with self.lock:
            return [took for at, took in self.ended if start <= at <= end]


class Matches:
    """`count` matches, each on its own thread, calling wherever `pick` says."""

    def __init__(
        self,
        count: int,
        pick: Callable[[random.Random], Target],
        *,
        seed: str,
        pause: float = 0.0,
    ) -> None:
        self.tally = Tally()
        self.held: list[Held | None] = [None] * count
        self._pick = pick
        self._seed = seed
        self._pause = pause
        self._stopping = threading.Event()
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        """Start every match and wait until each holds a state."""
        for index in range(len(self.held)):
            thread = threading.Thread(target=self._play, args=(index,), daemon=True)
            thread.start()
            self._threads.append(thread)
        self.wait("every match under way", lambda: all(h is not None for h in self.held))

    def stop(self) -> None:
        """Stop the matches after their current call."""
        self._stopping.set()
        for thread in self._threads:
            thread.join(CALL_TIMEOUT + 5)

    def wait(self, what: str, done: Callable[[], bool], seconds: float = WAIT_SECONDS) -> None:
        """Poll `done()` until it is true, for at most `seconds`; fail naming `what`."""
        deadline = time.monotonic() + seconds
        while not done():
            if time.monotonic() > deadline:
                raise TimeoutError(f"no {what} within {seconds} s: {self.tally.calls}")
            time.sleep(0.02)

    def _play(self, index: int) -> None:
        try:
            self._play_on(index)
        except Exception as error:  # a broken match thread is a failure, not a quiet exit
            self._fail(Failure("-", "-", None, "CRASH", None, repr(error)))

    def _play_on(self, index: int) -> None:
        rnd = random.Random(f"{self._seed}/{index}")
        while not self._stopping.is_set():
            held = self.held[index]
            target = self._pick(rnd)
            if held is None:
                self.held[index] = self._new_match(target, rnd)
            elif held.over:
                self._reveal(target, held)
                self.held[index] = self._new_match(target, rnd)
            elif rnd.random() < LOOK_SHARE:
                self._look(target, held, rnd)
            else:
                self.held[index] = self._apply(target, held, rnd)
            if self._pause:
                self._stopping.wait(self._pause)

    def _call(self, target: Target, method: str, request: Any, held: Held | None) -> Any:
        """One call; None when it failed (recorded)."""
        made_by = held.made_by if held is not None else None
        with self.tally.lock:
            self.tally.calls[method] += 1
            self.tally.by_pod[target.name] += 1
            if made_by is not None and made_by != target.name:
                self.tally.crossings[(made_by, target.name)] += 1
        began = time.monotonic()
        try:
            return getattr(target.stub, method)(request, timeout=CALL_TIMEOUT)
        except grpc.RpcError as error:
            infos = error_infos(error.trailing_metadata())
            reason = infos[0].reason if infos else None
            metadata = tuple(sorted(infos[0].metadata.items())) if infos else ()
            code = error.code().name
            failure = Failure(method, target.name, made_by, code, reason, error.details() or "")
            self._fail(
                dataclasses.replace(failure, metadata=metadata, began=began, ended=time.monotonic())
            )
            return None
        finally:
            now = time.monotonic()
            with self.tally.lock:
                self.tally.ended.append((now, now - began))

    def _fail(self, failure: Failure) -> None:
        with self.tally.lock:
            self.tally.failures.append(failure)

    def _wrong(self, method: str, target: Target, held: Held, what: str) -> None:
        """An answer that is not what the call must give."""
        self._fail(Failure(method, target.name, held.made_by, "WRONG", None, what))

    def _kept(self, target: Target, answer: Any) -> Held:
        """The state of a NewMatch or Apply answer, as a lobby keeps it."""
        signed = answer.HasField("signed_state")
        carried = {"signed_state": answer.signed_state} if signed else {"state": answer.state}
        key_id = answer.signed_state.key_id if signed else ""
        with self.tally.lock:
            self.tally.states[key_id] += 1
        over = answer.state.status == pb.STATUS_OVER
        return Held(
            carried,
            target.name,
            answer.state.seq,
            answer.legal_moves,
            over,
            key_id=key_id,
            at=time.monotonic(),
        )

    def _new_match(self, target: Target, rnd: random.Random) -> Held | None:
        request = pb.NewMatchRequest(seed=rnd.randbytes(16), labels=["north", "south"])
        answer = self._call(target, "NewMatch", request, None)
        if answer is None:
            return None
        with self.tally.lock:
            self.tally.matches += 1
        return self._kept(target, answer)

    def _apply(self, target: Target, held: Held, rnd: random.Random) -> Held | None:
        move = rnd.choice(held.moves.moves)
        action = pb.Action(seat=held.moves.seat, card=move.card)
        if move.plans:
            action.plan_id = rnd.choice(move.plans).id
        else:
            action.trail = True
        request = pb.ApplyRequest(**held.fields, action=action, expected_seq=held.seq)
        answer = self._call(target, "Apply", request, held)
        if answer is None:
            return None
        if answer.state.seq != held.seq + 1:
            self._wrong("Apply", target, held, f"seq {answer.state.seq}")
            return None
        return self._kept(target, answer)

    def _look(self, target: Target, held: Held, rnd: random.Random) -> None:
        which = rnd.randrange(3)
        if which == 0:
            moves = self._call(target, "LegalMoves", pb.LegalMovesRequest(**held.fields), held)
            if moves is not None and moves.legal_moves != held.moves:
                self._wrong("LegalMoves", target, held, "other moves")
        elif which == 1:
            seat = rnd.randrange(2)
            view = self._call(
                target, "PlayerView", pb.PlayerViewRequest(**held.fields, seat=seat), held
            )
            if view is not None and view.view.seq != held.seq:
                self._wrong("PlayerView", target, held, "another seq")
        else:
            asked = pb.SuggestMoveRequest(
                **held.fields, seat=held.moves.seat, level=pb.BOT_LEVEL_RANDOM
            )
            suggested = self._call(target, "SuggestMove", asked, held)
            cards = {m.card for m in held.moves.moves}
            if suggested is not None and suggested.action.card not in cards:
                self._wrong("SuggestMove", target, held, "not a legal card")

    def _reveal(self, target: Target, held: Held) -> None:
        """The last call of a match: seat 0's view, which reveals the seed."""
        request = pb.PlayerViewRequest(**held.fields, seat=0)
        view = self._call(target, "PlayerView", request, held)
        if view is not None and not view.view.seed:
            self._wrong("PlayerView", target, held, "no seed at the end")
        with self.tally.lock:
            self.tally.finished += 1


def failures_by_kind(failures: Sequence[Failure]) -> Counter[tuple[str, str | None]]:
    """Failures counted by code and reason, for a short assertion message."""
    return Counter((f.code, f.reason) for f in failures)
