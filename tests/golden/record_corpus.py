"""Record the golden wire corpus (tests/data/golden) from the service as it is.

    .venv/bin/python -m tests.golden.record_corpus

Every request is sent through the server's own request reader, handlers and response
serializer, and the outcome is written down as it comes. Everything is fixed: the seeds, the
random choices (seeded generators), the signing keys (TEST-ONLY, below) and the seed NewMatch
draws when it is sent none. Running the command twice writes the same files (map entries,
whose order the encoder may change, are stored in protobuf's deterministic order, sorted by
key: see testkit.golden.canonical; four Replay refusals recorded before keep theirs).

Re-record only for an intended change of the contract, and say so in the commit: the corpus
is the proof that a change of the implementation left every response byte-identical.
"""

from __future__ import annotations

import base64
import hashlib
import json
import random
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from basra.v1 import rules_pb2 as pb
from google.protobuf.message import DecodeError, Message

import engine
from engine import State, Status
from engine.rng import first_dealer
from service.servicer import METHODS
from testkit import messages
from testkit.golden import (
    CORPUS_DIR,
    FORMAT,
    MANIFEST,
    OK,
    RECORD_COMMAND,
    Runner,
    b64,
    in_process,
    profile_from_json,
    to_json,
)
from wire.signing import Keyring, parse_keys

# TEST-ONLY signing keys: they are public (they sit in this file and in the corpus), so a
# server that used them would accept forged states. Never configure them anywhere else.
# The first key signs; the second only verifies (a key being rotated out).
TEST_ONLY_SIGNING_KEYS = ",".join(
    f"{key_id}:{base64.b64encode(secret).decode('ascii')}"
    for key_id, secret in (
        ("golden-test-new", b"TEST-ONLY golden corpus key, new: never deploy"),
        ("golden-test-old", b"TEST-ONLY golden corpus key, old: never deploy"),
    )
)
# The seed the server's seed source gives a NewMatch sent without one (32 bytes, as drawn).
DRAWN_SEED = hashlib.sha256(b"golden corpus: the seed NewMatch draws when sent none").digest()
# Limits small enough to reach with small requests: sizes and the Replay action count.
TIGHT = {"max_message_bytes": 1024, "max_replay_actions": 8}

PROFILES: dict[str, dict[str, Any]] = {
    "unsigned": {},
    "signed": {"signing_keys": TEST_ONLY_SIGNING_KEYS},
    "unsigned-tight": dict(TIGHT),
    "signed-tight": {**TIGHT, "signing_keys": TEST_ONLY_SIGNING_KEYS},
}
MODES = ("unsigned", "signed")

# Whole matches: (name, seed, labels, seed of the random choices, LegalMoves and both
# PlayerViews every n plays). The seeds were searched (`--search`) for the rarer events:
# match-ties has two 26/26 hands in a row (the carry grows to 60, then a seat takes 90),
# Basras by a 7D sweep and by a Q, and floor fixes; match-fixes has more floor fixes.
MATCHES: tuple[tuple[str, bytes, tuple[str, ...], str, int], ...] = (
    ("match-ties", b"golden carry 16", ("Ann", "Zo\u00eb \U0001f0a1"), "choices carry 16", 8),
    ("match-fixes", b"golden carry 10", (), "choices carry 10", 16),
)


@dataclass
class Recorder:
    """Runs requests through the in-process path and keeps each as a case of a file."""

    runners: dict[str, Runner]
    files: dict[str, list[dict[str, Any]]] = field(default_factory=dict)

    def calls(self, file: str, profile: str) -> Callable[..., Any]:
        """A function recording calls as cases of `file`, sent to a server of `profile`."""
        return partial(self.call, (file, profile))

    def call(
        self, where: tuple[str, str], rpc: str, request: Message | bytes, note: str, want: str = OK
    ) -> Any:
        """Record one call (file, profile) that must end as `want` (OK or a reason)."""
        file, profile = where
        data = request if isinstance(request, bytes) else request.SerializeToString()
        outcome = self.runners[profile](rpc, data)
        got = outcome.code if outcome.code == OK else outcome.reason
        assert got == want, f"{file} {rpc} {note}: wanted {want}, got {outcome}"
        cases = self.files.setdefault(file, [])
        cases.append(
            {
                "id": f"{file}/{len(cases):04d}",
                "profile": profile,
                "rpc": rpc,
                "note": note,
                "request": {"json": _readable(rpc, data), "bytes": b64(data)},
                "expect": outcome.to_json(rpc),
            }
        )
        return METHODS[rpc][1].FromString(outcome.body) if outcome.code == OK else None


def _readable(rpc: str, data: bytes) -> dict[str, Any] | None:
    """The JSON of request bytes, None when they do not parse."""
    try:
        return to_json(METHODS[rpc][0].FromString(data))
    except DecodeError:
        return None


def held(mode: str, result: Any) -> dict[str, Any]:
    """The state part of the next request: the plain state, or the signed one when signing."""
    if mode == "signed":
        return {"signed_state": result.signed_state}
    return {"state": result.state}


def choose(moves: pb.LegalMoves, rnd: random.Random) -> pb.Action:
    """A legal action, written in one of the ways the contract allows, chosen at random."""
    move = rnd.choice(list(moves.moves))
    action = pb.Action(seat=moves.seat, card=move.card)
    if move.trails:
        way = rnd.randrange(3)
        if way == 1:
            action.trail = True
        elif way == 2:
            action.capture.SetInParent()  # an empty capture: take nothing
        return action
    plan = rnd.choice(list(move.plans))
    way = rnd.randrange(3 if len(move.plans) == 1 else 2)
    if way == 0:
        action.plan_id = plan.id
    elif way == 1:
        cards = list(plan.cards)
        rnd.shuffle(cards)
        action.capture.cards.extend(cards)
    return action


@dataclass(frozen=True)
class Played:
    """A recorded match: its seed, labels, actions and every result from NewMatch on."""

    seed: bytes
    labels: tuple[str, ...]
    actions: list[pb.Action]
    results: list[Any]


def play(rec: Recorder, mode: str, name: str, spec: tuple[Any, ...]) -> Played:
    """Record a whole match: NewMatch, every Apply, LegalMoves and the three PlayerViews often."""
    _, seed, labels, choices, every = spec
    file = f"{mode}-{name}"
    call = rec.calls(file, mode)
    rnd = random.Random(choices)
    result = call("NewMatch", pb.NewMatchRequest(seed=seed, labels=labels), "new")
    results, actions = [result], []
    while result.state.status == pb.STATUS_IN_PROGRESS:
        state = held(mode, result)
        seq = result.state.seq
        # At an even and an odd seq: hands of equal size, and hands one card apart.
        if seq % every in (0, every // 2 | 1):
            call("LegalMoves", pb.LegalMovesRequest(**state), f"seq {seq}")
            for seat in (0, 1):
                request = pb.PlayerViewRequest(**state, seat=seat)
                call("PlayerView", request, f"seq {seq}, seat {seat}")
            request = pb.PlayerViewRequest(**state, spectator=True)
            call("PlayerView", request, f"seq {seq}, spectator")
        action = choose(result.legal_moves, rnd)
        apply = pb.ApplyRequest(**state, action=action)
        if seq % 3 == 1:
            apply.expected_seq = seq
        result = call("Apply", apply, f"seq {seq}")
        results.append(result)
        actions.append(action)
    state = held(mode, result)
    call("LegalMoves", pb.LegalMovesRequest(**state), "match over")
    for seat in (0, 1):
        request = pb.PlayerViewRequest(**state, seat=seat)
        call("PlayerView", request, f"match over, seat {seat}")
    request = pb.PlayerViewRequest(**state, spectator=True)
    call("PlayerView", request, "match over, spectator")
    late = pb.ApplyRequest(**state, action=actions[-1])
    call("Apply", late, "an action after the end", "MATCH_OVER")
    return Played(seed, labels, actions, results)


def new_matches(rec: Recorder, mode: str) -> None:
    """NewMatch: labels, a drawn seed, seed lengths at and past the bounds, bad labels."""
    file = f"{mode}-new-match"
    call = rec.calls(file, mode)
    cases: list[tuple[pb.NewMatchRequest, str, str]] = [
        (pb.NewMatchRequest(seed=b"x"), "a one-byte seed", OK),
        (pb.NewMatchRequest(seed=bytes(range(64))), "a 64-byte seed", OK),
        (pb.NewMatchRequest(), "no seed: the server draws one", OK),
        (pb.NewMatchRequest(labels=["only one"]), "a drawn seed and one label", OK),
        (pb.NewMatchRequest(seed=b"labels", labels=["", "x" * 64]), "labels at the bound", OK),
        (pb.NewMatchRequest(seed=bytes(65)), "a 65-byte seed", "INVALID_SEED"),
        (pb.NewMatchRequest(seed=b"s", labels=["a", "b", "c"]), "three labels", "TOO_MANY_LABELS"),
        (
            pb.NewMatchRequest(seed=b"s", labels=["x" * 65]),
            "a 65-character label",
            "INVALID_LABEL",
        ),
        (pb.NewMatchRequest(seed=b"s", labels=["ok", "a\nb"]), "a newline", "INVALID_LABEL"),
    ]
    for request, note, want in cases:
        call("NewMatch", request, note, want)


def replays(rec: Recorder, mode: str, match: Played) -> None:
    """Replay: a whole match, refused and unreadable actions part-way, bad seeds and labels."""
    file = f"{mode}-replay"
    call = rec.calls(file, mode)
    seed, labels, actions = match.seed, list(match.labels), match.actions

    def replay(
        chosen: Sequence[pb.Action],
        note: str,
        refused: tuple[int, str] | None = None,
        want: str = OK,
        **fields: Any,
    ) -> None:
        request = pb.ReplayRequest(seed=seed, actions=chosen, labels=labels)
        for name, value in fields.items():
            request.ClearField(name)
            if isinstance(value, list):
                getattr(request, name).extend(value)
            else:
                setattr(request, name, value)
        response = call("Replay", request, note, want)
        if want == OK:
            got = (
                (response.refused_index, response.refusal.reason)
                if response.HasField("refused_index")
                else None
            )
            assert got == refused, f"{note}: wanted {refused}, got {got}"

    replay(actions, "the whole match")
    replay([], "no actions: the deal alone")
    replay(actions[:30], "the first 30 actions")
    wrong_turn = pb.Action(seat=1 - actions[20].seat, card=actions[20].card)
    replay(
        [*actions[:20], wrong_turn, *actions[20:]],
        "action 20 by the wrong seat",
        (20, "NOT_YOUR_TURN"),
    )
    taken = next(i for i, a in enumerate(actions) if a.WhichOneof("choice") == "plan_id")
    too_far = pb.Action(seat=actions[taken].seat, card=actions[taken].card, plan_id=13)
    replay([*actions[:taken], too_far], "a plan id past the plans", (taken, "UNKNOWN_PLAN"))
    wrong = pb.Action(seat=actions[taken].seat, card=actions[taken].card)
    wrong.capture.cards.append("KS" if actions[taken].card != "KS" else "KH")
    replay([*actions[:taken], wrong], "a capture not offered", (taken, "ILLEGAL_CAPTURE"))
    unreadable = pb.Action(seat=actions[12].seat, card="11C")
    replay(
        [*actions[:12], unreadable, *actions[12:]], "action 12 names no card", (12, "INVALID_CARD")
    )
    seatless = pb.Action(card=actions[7].card)
    replay([*actions[:7], seatless, *actions[8:]], "action 7 names no seat", (7, "INVALID_SEAT"))
    false_trail = pb.Action(seat=actions[3].seat, card=actions[3].card, trail=False)
    replay([*actions[:3], false_trail], "action 3 sets trail false", (3, "INVALID_ACTION"))
    replay([*actions, actions[-1]], "one action past the end", (len(actions), "MATCH_OVER"))
    replay([], "no seed", want="INVALID_SEED", seed=b"")
    replay(actions[:5], "a 65-byte seed", want="INVALID_SEED", seed=bytes(65))
    replay(actions[:5], "three labels", want="TOO_MANY_LABELS", labels=["a", "b", "c"])
    replay(actions[:5], "a label with a tab", want="INVALID_LABEL", labels=["a\tb"])


def _find(matches: Sequence[Played], wanted: Any, what: str) -> Any:
    """The first recorded result of these matches whose legal moves are `wanted`."""
    for match in matches:
        for result in match.results:
            if wanted(list(result.legal_moves.moves)):
                return result
    raise AssertionError(f"no recorded state where {what}")


def _sealed(keyring: Keyring, state: pb.State | bytes) -> pb.SignedState:
    """State bytes signed with a test key, so that they pass the seal and meet the engine."""
    data = state if isinstance(state, bytes) else state.SerializeToString()
    key_id, signature = keyring.sign(data)
    return pb.SignedState(state=data, key_id=key_id, signature=signature)


def refusals(rec: Recorder, mode: str, matches: Sequence[Played], keyring: Keyring) -> None:
    """Apply, LegalMoves, PlayerView on mid-game states: every refusal of an action or state."""
    file = f"{mode}-refusals"
    call = rec.calls(file, mode)
    result = _find(
        matches,
        lambda moves: (
            any(len(m.plans) > 1 for m in moves) and any(len(m.plans) == 1 for m in moves)
        ),
        "a card has several plans and another one plan",
    )
    trailing = _find(matches, lambda moves: any(m.trails for m in moves), "a card trails")
    seat = result.legal_moves.seat
    moves = list(result.legal_moves.moves)
    several = next(m for m in moves if len(m.plans) > 1)
    single = next(m for m in moves if len(m.plans) == 1)
    trails = next(m for m in trailing.legal_moves.moves if m.trails)
    other_hand = result.state.seats[1 - seat].hand

    def apply(
        action: pb.Action | None, note: str, want: str, on: Any = result, **extra: Any
    ) -> None:
        request = pb.ApplyRequest(**held(mode, on), **extra)
        if action is not None:
            request.action.CopyFrom(action)
        call("Apply", request, f"seq {on.state.seq}: {note}", want)

    def act(card: str, on: Any = result, **choice: Any) -> pb.Action:
        action = pb.Action(seat=on.legal_moves.seat, card=card)
        for name, value in choice.items():
            if name == "capture":
                action.capture.SetInParent()
                action.capture.cards.extend(value)
            else:
                setattr(action, name, value)
        return action

    plan = list(several.plans[0].cards)
    seq = result.state.seq
    apply(act(several.card, plan_id=2), "plan 2, the right expected_seq", OK, expected_seq=seq)
    apply(
        act(several.card, plan_id=1), "expected_seq one ahead", "SEQ_MISMATCH", expected_seq=seq + 1
    )
    apply(pb.Action(seat=1 - seat, card=other_hand[0]), "the other seat plays", "NOT_YOUR_TURN")
    apply(act(other_hand[0]), "a card of the other hand", "CARD_NOT_IN_HAND")
    apply(act(result.state.floor[0]), "a floor card", "CARD_NOT_IN_HAND")
    apply(act(several.card), "several plans and no choice", "PLAN_REQUIRED")
    apply(act(several.card, plan_id=len(several.plans) + 1), "a plan id too far", "UNKNOWN_PLAN")
    apply(act(several.card, plan_id=0), "plan id 0", "UNKNOWN_PLAN")
    apply(act(several.card, capture=plan[:-1]), "part of a plan's cards", "ILLEGAL_CAPTURE")
    apply(act(several.card, capture=[*plan, plan[0]]), "a plan's card twice", "ILLEGAL_CAPTURE")
    apply(act(several.card, capture=["9Z"]), "a capture naming no card", "INVALID_CARD")
    apply(act(several.card, capture=plan[::-1]), "plan 1's cards, reversed", OK)
    apply(act(single.card, trail=True), "trailing a card that captures", "MUST_CAPTURE")
    apply(act(single.card, capture=[]), "taking nothing with a capturing card", "MUST_CAPTURE")
    on = trailing
    apply(act(trails.card, on, trail=True), "trailing a card that trails", OK, on)
    apply(act(trails.card, on, capture=[]), "taking nothing with a trailing card", OK, on)
    apply(act(trails.card, on, trail=False), "trail set to false", "INVALID_ACTION", on)
    apply(act(trails.card, on, plan_id=1), "plan 1 of a card that trails", "UNKNOWN_PLAN", on)
    apply(act("ZZ"), "a code that is no card", "INVALID_CARD")
    apply(act(""), "an empty card code", "INVALID_CARD")
    apply(pb.Action(card=single.card), "no seat", "INVALID_SEAT")
    apply(act(single.card, seat=2), "seat 2", "INVALID_SEAT")
    apply(act(single.card, seat=-1), "seat -1", "INVALID_SEAT")
    apply(None, "no action", "INVALID_ACTION")
    for asked in (None, 2, -1):
        view = pb.PlayerViewRequest(**held(mode, result))
        if asked is not None:
            view.seat = asked
        shown = "no seat" if asked is None else f"seat {asked}"
        call("PlayerView", view, f"seq {seq}: {shown}", "INVALID_SEAT")
    both = pb.PlayerViewRequest(**held(mode, result), seat=0, spectator=True)
    call("PlayerView", both, f"seq {seq}: a seat and spectator", "INVALID_SEAT")
    corrupt_states(rec, mode, matches[0].results[5], keyring)
    if mode == "signed":
        signed_states(rec, result, keyring)
    else:
        plain_states(rec, result)
    call(
        "LegalMoves",
        pb.LegalMovesRequest(),
        "no state",
        "INVALID_STATE" if mode == "unsigned" else "BAD_SIGNATURE",
    )
    call(
        "Apply",
        pb.ApplyRequest(action=act(single.card)),
        "no state",
        "INVALID_STATE" if mode == "unsigned" else "BAD_SIGNATURE",
    )
    call(
        "PlayerView",
        pb.PlayerViewRequest(seat=0),
        "no state",
        "INVALID_STATE" if mode == "unsigned" else "BAD_SIGNATURE",
    )


def corrupt_states(rec: Recorder, mode: str, result: Any, keyring: Keyring) -> None:
    """Inconsistent states; when signing they are signed, so that the engine judges them."""
    file = f"{mode}-refusals"
    call = rec.calls(file, mode)
    seat = result.legal_moves.seat

    def corrupt(note: str, edit: Any, rpc: str = "LegalMoves") -> None:
        message = pb.State()
        message.CopyFrom(result.state)
        edit(message)
        carried: dict[str, Any] = (
            {"signed_state": _sealed(keyring, message)} if mode == "signed" else {"state": message}
        )
        request: Message = (
            pb.LegalMovesRequest(**carried)
            if rpc == "LegalMoves"
            else pb.PlayerViewRequest(**carried, seat=1 - seat)
        )
        call(rpc, request, note, "INVALID_STATE")

    def setter(name: str, value: Any) -> Any:
        return lambda m: setattr(m, name, value)

    def duplicate(m: pb.State) -> None:
        m.deck[0] = m.deck[1]

    def lose_one(m: pb.State) -> None:
        del m.deck[0]

    def one_seat(m: pb.State) -> None:
        del m.seats[1]

    def no_card(m: pb.State) -> None:
        m.floor.append("1C")

    def hand_of_five(m: pb.State) -> None:
        m.seats[0].hand.append(m.deck[0])
        del m.deck[0]

    def past_target(m: pb.State) -> None:
        m.seats[0].total = 130

    def many_basras(m: pb.State) -> None:
        m.seats[seat].basras = 40

    corrupt("a card twice", duplicate)
    corrupt("a card missing", lose_one)
    corrupt("one seat", one_seat)
    corrupt("a floor card '1C'", no_card, "PlayerView")
    corrupt("status unspecified", setter("status", pb.STATUS_UNSPECIFIED))
    corrupt("status 7", setter("status", 7))
    corrupt("the seq one ahead", setter("seq", result.state.seq + 1))
    corrupt("the other dealer", setter("dealer", 1 - result.state.dealer))
    corrupt("a winner in progress", setter("winner", 0), "PlayerView")
    corrupt("a carry of 7", setter("carry", 7))
    corrupt("an empty seed", setter("seed", b""))
    corrupt("a hand of five", hand_of_five)
    corrupt("hand number 0", setter("hand_number", 0))
    corrupt("the wrong seat to move", setter("to_move", 1 - seat))
    corrupt("more Basras than the pile allows", many_basras)
    corrupt("last capturer seat 5", setter("last_capturer", 5))
    corrupt("totals past the target", past_target)


def plain_states(rec: Recorder, result: Any) -> None:
    """A server that does not sign: a signed state is read without checking, not both at once."""
    file, mode = "unsigned-refusals", "unsigned"
    call = rec.calls(file, mode)
    data = result.state.SerializeToString()
    both = pb.LegalMovesRequest(state=result.state, signed_state=pb.SignedState(state=data))
    call("LegalMoves", both, "a state and a signed state", "INVALID_STATE")
    read = pb.LegalMovesRequest(signed_state=pb.SignedState(state=data, key_id="any"))
    call("LegalMoves", read, "a signed state, read without checking")
    garbage = pb.LegalMovesRequest(signed_state=pb.SignedState(state=b"\xff\xff"))
    call("LegalMoves", garbage, "signed bytes that are no State", "INVALID_STATE")


def signed_states(rec: Recorder, result: Any, keyring: Keyring) -> None:
    """A signing server: the seal checked before anything else, rotated keys, forgeries."""
    file, mode = "signed-refusals", "signed"
    call = rec.calls(file, mode)
    seal = result.signed_state

    def legal(note: str, want: str, **fields: Any) -> None:
        call("LegalMoves", pb.LegalMovesRequest(**fields), note, want)

    def altered(**changes: Any) -> pb.SignedState:
        copy = pb.SignedState()
        copy.CopyFrom(seal)
        for name, value in changes.items():
            setattr(copy, name, value)
        return copy

    bad = "BAD_SIGNATURE"
    legal("a plain state", bad, state=result.state)
    legal("a plain state and the signed one", bad, state=result.state, signed_state=seal)
    flipped = bytes([seal.state[0] ^ 1]) + seal.state[1:]
    legal("one bit of the state changed", bad, signed_state=altered(state=flipped))
    wrong = bytes([seal.signature[0] ^ 1]) + seal.signature[1:]
    legal("one bit of the signature changed", bad, signed_state=altered(signature=wrong))
    legal("a short signature", bad, signed_state=altered(signature=seal.signature[:16]))
    legal("an unknown key id", bad, signed_state=altered(key_id="golden-test-unknown"))
    legal("a key id of 100 characters", bad, signed_state=altered(key_id="k" * 100))
    legal("no key id", bad, signed_state=altered(key_id=""))
    old_key = Keyring((keyring.keys[1],))
    legal("signed by the verify-only key", OK, signed_state=_sealed(old_key, seal.state))
    legal(
        "signed bytes that are no State",
        "INVALID_STATE",
        signed_state=_sealed(keyring, b"\xff\xff"),
    )


def _complex_state() -> State:
    """A consistent last-round state whose floor holds every card from A to 8 (32 cards)."""
    seed = next(bytes([b]) for b in range(256) if first_dealer(bytes([b])) == 0)
    floor = tuple(engine.parse_card(r + s) for r in "A2345678" for s in "CDHS")
    hands = ((engine.parse_card("KD"),), (engine.parse_card("10H"),))
    pile = tuple(c for c in range(52) if c not in floor and c not in hands[0] + hands[1])
    state = State(
        seed=seed,
        seq=46,
        hand_number=1,
        dealer=0,
        to_move=1,
        deck=(),
        hands=hands,
        floor=floor,
        captured=(pile, ()),
        basras=(0, 0),
        last_capturer=0,
        unclaimed=(),
        totals=(0, 0),
        carry=0,
        status=Status.IN_PROGRESS,
        winner=None,
    )
    engine.check_state(state)
    return state


def too_complex(rec: Recorder, mode: str, keyring: Keyring) -> None:
    """A crafted floor of 32 small cards: the plan search is refused, STATE_TOO_COMPLEX."""
    file = f"{mode}-refusals"
    call = rec.calls(file, mode)
    message = messages.state_to_proto(_complex_state())
    carried: dict[str, Any] = (
        {"signed_state": _sealed(keyring, message)} if mode == "signed" else {"state": message}
    )
    hard = "STATE_TOO_COMPLEX"
    note = "32 small cards on the floor"
    call("LegalMoves", pb.LegalMovesRequest(**carried), note, hard)
    call("PlayerView", pb.PlayerViewRequest(**carried, seat=1), note, hard)
    call("PlayerView", pb.PlayerViewRequest(**carried, seat=0), note, OK)
    ten = pb.ApplyRequest(**carried, action=pb.Action(seat=1, card="10H"))
    call("Apply", ten, f"{note}: 10H needs the search", hard)


def wire_quirks(rec: Recorder, mode: str, match: Played) -> None:
    """Bytes a parser must read as protobuf does: unknown fields, repeats, merges, garbage."""
    file = f"{mode}-wire"
    call = rec.calls(file, mode)
    result = match.results[5]
    state = held(mode, result)
    moves = pb.LegalMovesRequest(**state).SerializeToString()
    call("LegalMoves", moves + b"\xa0\x06\x01", "an unknown varint field 100")
    call("LegalMoves", moves + b"\xaa\x06\x02hi", "an unknown bytes field 101")
    view = pb.PlayerViewRequest(**state, seat=0).SerializeToString()
    call("PlayerView", view + b"\x10\x01", "seat given twice: the last wins")
    call("PlayerView", b"\x10\x01" + moves, "the seat before the state")
    action = choose(result.legal_moves, random.Random("wire"))
    first = pb.ApplyRequest(**state, action=pb.Action(seat=action.seat)).SerializeToString()
    rest = pb.Action(card=action.card)
    if action.HasField("plan_id"):
        rest.plan_id = action.plan_id
    second = pb.ApplyRequest(action=rest).SerializeToString()
    call("Apply", first + second, "the action in two parts, merged")
    for rpc in METHODS:
        call(rpc, b"\xff\xff\xff\xff", "not protobuf", "MALFORMED_REQUEST")
        call(rpc, b"\x0a\x05ab", "a field past the body", "MALFORMED_REQUEST")
    call("NewMatch", b"", "an empty body: a drawn seed")
    no_state = "INVALID_STATE" if mode == "unsigned" else "BAD_SIGNATURE"
    call("LegalMoves", b"", "an empty body: no state", no_state)


def suggestions(rec: Recorder, mode: str, matches: Sequence[Played]) -> None:
    """SuggestMove: every level along both matches (last rounds and several plans included),
    bot seeds, budgets, the server's default level, and every refusal it can give."""
    file = f"{mode}-suggest"
    call = rec.calls(file, mode)
    levels = (pb.BOT_LEVEL_RANDOM, pb.BOT_LEVEL_GREEDY, pb.BOT_LEVEL_STRONG)
    for match in matches:
        for number, result in enumerate(match.results[:-1]):
            if number % 7:
                continue
            seat, seq = result.state.to_move, result.state.seq
            level = levels[number // 7 % 3]
            request = pb.SuggestMoveRequest(**held(mode, result), seat=seat, level=level)
            call("SuggestMove", request, f"seq {seq}, {pb.BotLevel.Name(level)}")
    result = _find(
        matches, lambda moves: any(len(m.plans) > 1 for m in moves), "a card has several plans"
    )
    last = next(
        r for r in matches[0].results[:-1] if not r.state.deck and len(r.legal_moves.moves) > 1
    )
    seat, seq = result.state.to_move, result.state.seq

    def suggest(note: str, want: str = OK, on: Any = result, **fields: Any) -> None:
        fields.setdefault("seat", on.state.to_move)
        call("SuggestMove", pb.SuggestMoveRequest(**held(mode, on), **fields), note, want)

    suggest(f"seq {seq}: several plans, the default level and budget")
    suggest(f"seq {seq}: several plans, GREEDY", level=pb.BOT_LEVEL_GREEDY)
    suggest(f"seq {seq}: a bot seed", bot_seed=b"golden bot seed", level=pb.BOT_LEVEL_STRONG)
    suggest(f"seq {seq}: a 64-byte bot seed, RANDOM", bot_seed=bytes(64), level=1)
    suggest(f"seq {seq}: a budget of 2 deals, 300 nodes", budget=pb.BotWork(deals=2, nodes=300))
    suggest(f"seq {seq}: 1 node: no deal fits", budget=pb.BotWork(nodes=1))
    suggest(f"seq {seq}: the most deals allowed", budget=pb.BotWork(deals=64, nodes=4000))
    suggest(f"seq {last.state.seq}: the last round, solved", on=last)
    suggest(f"seq {seq}: 65 deals", "BUDGET_TOO_LARGE", budget=pb.BotWork(deals=65))
    suggest(f"seq {seq}: 20001 nodes", "BUDGET_TOO_LARGE", budget=pb.BotWork(nodes=20001))
    unknown = pb.SuggestMoveRequest(**held(mode, result), seat=seat)
    unknown.level = 9  # type: ignore[assignment]  # not a BotLevel: what an old client may send
    call("SuggestMove", unknown, f"seq {seq}: level 9", "INVALID_LEVEL")
    suggest(f"seq {seq}: a 65-byte bot seed", "INVALID_SEED", bot_seed=bytes(65))
    suggest(f"seq {seq}: the other seat", "NOT_YOUR_TURN", seat=1 - seat)
    suggest(f"seq {seq}: seat 2", "INVALID_SEAT", seat=2)
    call(
        "SuggestMove",
        pb.SuggestMoveRequest(**held(mode, result)),
        f"seq {seq}: no seat",
        "INVALID_SEAT",
    )
    final = matches[0].results[-1]
    suggest("the match is over", "MATCH_OVER", on=final, seat=0)
    call(
        "SuggestMove",
        pb.SuggestMoveRequest(seat=0),
        "no state",
        "INVALID_STATE" if mode == "unsigned" else "BAD_SIGNATURE",
    )


def limits(rec: Recorder, mode: str, match: Played) -> None:
    """A server with tight limits: request and response sizes, Replay's action count."""
    profile = f"{mode}-tight"
    file = f"{mode}-limits"
    call = rec.calls(file, profile)
    most, count = TIGHT["max_message_bytes"], TIGHT["max_replay_actions"]
    actions, seed = match.actions, match.seed
    wide = ["\U0001f0a1" * 64] * 2  # two labels of 64 characters, 256 bytes each

    def replay(chosen: Sequence[pb.Action], labels: Sequence[str], note: str, want: str) -> None:
        request = pb.ReplayRequest(seed=seed, actions=chosen, labels=labels)
        call("Replay", request, f"{note} ({request.ByteSize()} bytes)", want)

    replay([], [], "the deal alone", OK)
    replay(actions[:count], [], "the most actions allowed", OK)
    replay(actions[: count + 1], [], "one action more", "TOO_MANY_ACTIONS")
    replay(actions[:count], wide, "an answer past the size limit", "RESPONSE_TOO_LARGE")
    filler = [pb.Action(seat=0, card="AC")] * ((most - 100) // 8)
    label = next(
        n
        for n in range(200)
        if pb.ReplayRequest(seed=seed, actions=filler, labels=["x" * n]).ByteSize() == most
    )
    replay(filler, ["x" * label], "a request of exactly the limit", "TOO_MANY_ACTIONS")
    replay(filler, ["x" * (label + 1)], "a request one byte past the limit", "REQUEST_TOO_LARGE")
    result = match.results[0]
    call("NewMatch", pb.NewMatchRequest(seed=seed), "a new match")
    call("LegalMoves", pb.LegalMovesRequest(**held(mode, result)), "moves")
    view = pb.PlayerViewRequest(**held(mode, result), seat=1)
    call("PlayerView", view, "a view")


def record() -> dict[str, Any]:
    """Record every case; return the manifest."""
    profiles = {name: profile_from_json(name, _profile_json(name)) for name in PROFILES}
    rec = Recorder({name: in_process(p) for name, p in profiles.items()})
    keyring = parse_keys(TEST_ONLY_SIGNING_KEYS)
    for mode in MODES:
        played = [play(rec, mode, spec[0], spec) for spec in MATCHES]
        new_matches(rec, mode)
        replays(rec, mode, played[0])
        refusals(rec, mode, played, keyring)
        too_complex(rec, mode, keyring)
        wire_quirks(rec, mode, played[0])
        limits(rec, mode, played[0])
        suggestions(rec, mode, played)
    CORPUS_DIR.mkdir(parents=True, exist_ok=True)
    names = []
    for file, cases in rec.files.items():
        name = f"{file}.json"
        (CORPUS_DIR / name).write_text(_dump(cases), encoding="utf-8")
        names.append(name)
    manifest = {
        "format": FORMAT,
        "recorded_with": RECORD_COMMAND,
        "profiles": {name: _profile_json(name) for name in PROFILES},
        "files": names,
        "cases": sum(len(c) for c in rec.files.values()),
    }
    MANIFEST.write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
    return manifest


def _profile_json(name: str) -> dict[str, Any]:
    return {**PROFILES[name], "drawn_seed": b64(DRAWN_SEED)}


def _dump(cases: list[dict[str, Any]]) -> str:
    """A JSON list with three lines per case: what it is, the request, the expected outcome."""

    def one(case: dict[str, Any]) -> str:
        head = {k: case[k] for k in ("id", "profile", "rpc", "note")}
        return (
            json.dumps(head, ensure_ascii=False)[:-1]
            + ',\n "request": '
            + json.dumps(case["request"], ensure_ascii=False)
            + ',\n "expect": '
            + json.dumps(case["expect"], ensure_ascii=False)
            + "}"
        )

    return "[\n" + ",\n".join(one(c) for c in cases) + "\n]\n"


def search(first: int, last: int) -> None:
    """Play the matches "golden carry N" (not recorded) and print the rarer events of each."""
    profile = profile_from_json("unsigned", _profile_json("unsigned"))
    for number in range(first, last):
        rec = Recorder({"unsigned": in_process(profile)})
        spec = ("search", f"golden carry {number}".encode(), (), f"choices carry {number}", 10**6)
        match = play(rec, "unsigned", "search", spec)
        events = [e for r in match.results for e in r.events]
        carries = [e.hand_scored.carry_after for e in events if e.HasField("hand_scored")]
        basras = [e.basra_scored.card for e in events if e.HasField("basra_scored")]
        fixes = sum(e.HasField("floor_fixed") for e in events)
        print(
            f"{number}: {len(match.actions)} plays, carries {carries}, Basras {basras}, "
            f"{fixes} floor fixes"
        )


def main(argv: Sequence[str]) -> None:
    """Record the corpus and say what was written (or, with --search FIRST LAST, find seeds)."""
    if argv[:1] == ["--search"]:
        search(int(argv[1]), int(argv[2]))
        return
    manifest = record()
    size = sum((CORPUS_DIR / n).stat().st_size for n in manifest["files"])
    print(f"{manifest['cases']} cases in {len(manifest['files'])} files, {size} bytes")


if __name__ == "__main__":
    main(sys.argv[1:])
