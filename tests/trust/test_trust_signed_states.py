"""Signed states through the service: sealed answers, refused tampering, key rotation."""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import io
import random
from collections.abc import Iterator
from contextlib import ExitStack
from typing import Any

import grpc
import pytest
from basra.v1 import rules_pb2 as pb

from clients import cli as command
from service import errors
from service.config import Config
from service.errors import Refusal
from service.outcomes import Facts
from service.server import make_handlers
from service.signing import check_window
from testkit.loopback import TIMEOUT, refusal, serving
from wire.signing import DOMAIN, SigningConfigError, mac

SECRETS = {kid: random.Random(kid).randbytes(32) for kid in ("k1", "k2", "k3")}


def keys(*kids: str) -> str:
    """A BASRA_SIGNING_KEYS value holding these keys, the first one signing."""
    return ",".join(f"{k}:{base64.b64encode(SECRETS[k]).decode()}" for k in kids)


def refusal_of(error: grpc.RpcError) -> tuple[grpc.StatusCode, str]:
    """The code and ErrorInfo reason of a refused call."""
    code, reason, _ = refusal(error)
    return code, reason


BAD = (grpc.StatusCode.UNAUTHENTICATED, errors.ServiceReason.BAD_SIGNATURE)


def first_action(result: Any) -> pb.Action:
    """The first legal move of a result, with its first plan."""
    move = result.legal_moves.moves[0]
    action = pb.Action(seat=result.legal_moves.seat, card=move.card)
    if move.plans:
        action.plan_id = 1
    return action


def test_every_returned_state_is_sealed_with_the_first_key() -> None:
    with serving(Config(signing_keys=keys("k2", "k1"))) as stub:
        result = stub.NewMatch(pb.NewMatchRequest(seed=b"sealed"), timeout=TIMEOUT)
        for _ in range(6):
            sealed = result.signed_state
            assert sealed.key_id == "k2"
            assert sealed.signature == mac(SECRETS["k2"], sealed.state)
            assert pb.State.FromString(sealed.state) == result.state
            request = pb.ApplyRequest(signed_state=sealed, action=first_action(result))
            result = stub.Apply(request, timeout=TIMEOUT)
        moves = stub.LegalMoves(
            pb.LegalMovesRequest(signed_state=result.signed_state), timeout=TIMEOUT
        )
        assert moves.legal_moves == result.legal_moves
        view = stub.PlayerView(
            pb.PlayerViewRequest(signed_state=result.signed_state, seat=0), timeout=TIMEOUT
        )
        assert view.view.seq == result.state.seq == 6
        replayed = stub.Replay(pb.ReplayRequest(seed=b"sealed"), timeout=TIMEOUT)
        assert replayed.signed_state.signature == mac(SECRETS["k2"], replayed.signed_state.state)
    assert DOMAIN == b"basra.v1.SignedState\n"


@pytest.mark.parametrize("method", ["Apply", "LegalMoves", "PlayerView"])
def test_a_plain_or_missing_state_is_refused_when_signing_is_on(method: str) -> None:
    with serving(Config(signing_keys=keys("k1"))) as stub:
        result = stub.NewMatch(pb.NewMatchRequest(seed=b"plain"), timeout=TIMEOUT)
        extra: dict[str, Any] = {
            "Apply": {"action": first_action(result)},
            "PlayerView": {"seat": 0},
        }
        kind = {
            "Apply": pb.ApplyRequest,
            "LegalMoves": pb.LegalMovesRequest,
            "PlayerView": pb.PlayerViewRequest,
        }[method]
        for fields in (
            {"state": result.state},
            {},
            {"state": result.state, "signed_state": result.signed_state},
        ):
            with pytest.raises(grpc.RpcError) as refused:
                getattr(stub, method)(kind(**fields, **extra.get(method, {})), timeout=TIMEOUT)
            assert refusal_of(refused.value) == BAD


def _flips(data: bytes, bits: range | None = None) -> Iterator[bytes]:
    """`data` with one bit flipped, for every bit (or the given bit positions of each byte)."""
    for index in range(len(data)):
        for bit in bits or range(8):
            changed = bytearray(data)
            changed[index] ^= 1 << bit
            yield bytes(changed)


def test_a_flipped_bit_anywhere_in_a_signed_state_is_refused() -> None:
    """Every bit of the state bytes, the signature and the key id (handlers, then gRPC)."""
    handlers = make_handlers(Config(signing_keys=keys("k1")), None)
    result = pb.NewMatchResponse.FromString(
        handlers.new_match(pb.NewMatchRequest(seed=b"bits"), Facts())
    )
    sealed = result.signed_state
    variants: list[pb.SignedState] = []
    variants += [replace_field(sealed, state=d) for d in _flips(sealed.state)]
    variants += [replace_field(sealed, signature=d) for d in _flips(sealed.signature)]
    # Key ids are text, so only flips that keep them ASCII can be sent at all.
    variants += [
        replace_field(sealed, key_id=d.decode()) for d in _flips(sealed.key_id.encode(), range(7))
    ]
    assert len(variants) == 8 * (len(sealed.state) + 32) + 7 * len(sealed.key_id)
    for variant in variants:
        with pytest.raises(Refusal) as refused:
            handlers.legal_moves(pb.LegalMovesRequest(signed_state=variant), Facts())
        assert (refused.value.code, refused.value.reason) == BAD
    answer = handlers.legal_moves(pb.LegalMovesRequest(signed_state=sealed), Facts())
    assert pb.LegalMovesResponse.FromString(answer).legal_moves.moves
    with serving(Config(signing_keys=keys("k1"))) as stub:
        for variant in random.Random(1).sample(variants, 40):
            with pytest.raises(grpc.RpcError) as refused_call:
                stub.LegalMoves(pb.LegalMovesRequest(signed_state=variant), timeout=TIMEOUT)
            assert refusal_of(refused_call.value) == BAD


def replace_field(message: pb.SignedState, **changes: Any) -> pb.SignedState:
    """A copy of a SignedState with some fields changed."""
    copy = pb.SignedState()
    copy.CopyFrom(message)
    for name, value in changes.items():
        setattr(copy, name, value)
    return copy


def _play(stubs: list[Any], moves: int) -> Any:
    """A match whose calls go to the servers in turn; return the last result."""
    result = stubs[0].NewMatch(pb.NewMatchRequest(seed=b"rotation"), timeout=TIMEOUT)
    for n in range(moves):
        stub = stubs[(n + 1) % len(stubs)]
        request = pb.ApplyRequest(signed_state=result.signed_state, action=first_action(result))
        result = stub.Apply(request, timeout=TIMEOUT)
    return result


@pytest.mark.parametrize(
    "phase",
    [
        (("k1", "k2"), ("k2", "k1")),  # the new key is known everywhere before it signs
        (("k2", "k1"), ("k2",)),  # the old key is dropped once nothing signs with it
        (("k1",), ("k1", "k2")),  # the new key is added behind the signing one
    ],
    ids=["switch-signer", "retire-old", "add-new"],
)
def test_rotation_across_two_servers_with_overlapping_keys(
    phase: tuple[tuple[str, ...], tuple[str, ...]],
) -> None:
    """Calls of one match alternate between two servers of a rolling update: all succeed."""
    with ExitStack() as stack:
        stubs = [stack.enter_context(serving(Config(signing_keys=keys(*k)))) for k in phase]
        result = _play(stubs, 8)
        assert result.state.seq == 8


def test_a_state_signed_with_a_retired_key_is_refused() -> None:
    with serving(Config(signing_keys=keys("k1"))) as old:
        sealed = old.NewMatch(pb.NewMatchRequest(seed=b"retired"), timeout=TIMEOUT)
    assert sealed.signed_state.key_id == "k1"
    with serving(Config(signing_keys=keys("k2", "k3"))) as new:
        with pytest.raises(grpc.RpcError) as refused:
            new.LegalMoves(pb.LegalMovesRequest(signed_state=sealed.signed_state), timeout=TIMEOUT)
        assert refusal_of(refused.value) == BAD
    # Same key id, other secret: a key replaced under its old name is retired too.
    with serving(Config(signing_keys="k1:" + base64.b64encode(bytes(32)).decode())) as renamed:
        with pytest.raises(grpc.RpcError) as refused:
            renamed.LegalMoves(
                pb.LegalMovesRequest(signed_state=sealed.signed_state), timeout=TIMEOUT
            )
        assert refusal_of(refused.value) == BAD


def test_without_keys_states_are_plain_and_a_signed_one_is_read() -> None:
    with serving(Config(signing_keys=keys("k1"))) as signing:
        sealed = signing.NewMatch(pb.NewMatchRequest(seed=b"off"), timeout=TIMEOUT)
    with serving(Config()) as plain:
        result = plain.NewMatch(pb.NewMatchRequest(seed=b"off"), timeout=TIMEOUT)
        assert not result.HasField("signed_state")
        moves = plain.LegalMoves(
            pb.LegalMovesRequest(signed_state=sealed.signed_state), timeout=TIMEOUT
        )
        assert moves.legal_moves == result.legal_moves
        with pytest.raises(grpc.RpcError) as refused:
            plain.LegalMoves(
                pb.LegalMovesRequest(state=result.state, signed_state=sealed.signed_state),
                timeout=TIMEOUT,
            )
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def _window(*kids: str, seen: list[str] | None = None) -> Any:
    """Handlers of a server in the migration window: keys, and unsigned states accepted."""
    handlers = make_handlers(Config(signing_keys=keys(*kids), signing_accept_unsigned=True), None)
    if seen is None:
        return handlers
    return dataclasses.replace(handlers, observe_seal=seen.append)


def test_the_migration_window_takes_unsigned_states_and_answers_sealed() -> None:
    """A plain state, or one wrapped unsigned, is taken; the answer is sealed; each state taken
    is counted by the key that sealed it ("" for unsigned ones)."""
    plain = make_handlers(Config(), None)
    begun = pb.NewMatchResponse.FromString(
        plain.new_match(pb.NewMatchRequest(seed=b"win"), Facts())
    )
    seen: list[str] = []
    window = _window("k1", seen=seen)
    action = first_action(begun)
    unsigned = [
        pb.ApplyRequest(state=begun.state, action=action),
        pb.ApplyRequest(
            signed_state=pb.SignedState(state=begun.state.SerializeToString()), action=action
        ),
    ]
    for request in unsigned:
        after = pb.ApplyResponse.FromString(window.apply(request, Facts()))
        assert after.state.seq == 1
        assert after.signed_state.key_id == "k1"
        assert after.signed_state.signature == mac(SECRETS["k1"], after.signed_state.state)
    follow = pb.ApplyRequest(signed_state=after.signed_state, action=first_action(after))
    assert pb.ApplyResponse.FromString(window.apply(follow, Facts())).state.seq == 2
    assert seen == ["", "", "k1"]


def test_the_window_still_refuses_a_bad_seal_and_two_states() -> None:
    """A seal that does not verify is as wrong in the window as after it."""
    seen: list[str] = []
    window = _window("k1", seen=seen)
    begun = pb.NewMatchResponse.FromString(window.new_match(pb.NewMatchRequest(seed=b"w"), Facts()))
    sealed = begun.signed_state
    forged = [
        replace_field(sealed, signature=bytes(32)),
        replace_field(sealed, key_id="k9"),
        replace_field(sealed, signature=b""),  # a key id without a signature is no wrapper
        replace_field(sealed, key_id=""),  # nor a signature without a key id
    ]
    for variant in forged:
        with pytest.raises(Refusal) as refused:
            window.legal_moves(pb.LegalMovesRequest(signed_state=variant), Facts())
        assert (refused.value.code, refused.value.reason) == BAD
    with pytest.raises(Refusal) as both:
        window.legal_moves(pb.LegalMovesRequest(state=begun.state, signed_state=sealed), Facts())
    assert (both.value.code, both.value.reason) == BAD
    assert seen == []


def test_a_server_that_requires_seals_refuses_an_unsigned_wrapper() -> None:
    """Out of the window, a SignedState with no signature is refused like a plain state."""
    required = make_handlers(Config(signing_keys=keys("k1")), None)
    begun = pb.NewMatchResponse.FromString(
        required.new_match(pb.NewMatchRequest(seed=b"r"), Facts())
    )
    wrapped = pb.SignedState(state=begun.signed_state.state)
    with pytest.raises(Refusal) as refused:
        required.legal_moves(pb.LegalMovesRequest(signed_state=wrapped), Facts())
    assert (refused.value.code, refused.value.reason) == BAD
    assert refused.value.metadata == {"keyId": ""}


def test_a_window_without_keys_is_refused_at_start() -> None:
    """BASRA_SIGNING_ACCEPT_UNSIGNED alone means the keys were forgotten: exit 2, named."""
    with pytest.raises(SigningConfigError, match="BASRA_SIGNING_ACCEPT_UNSIGNED"):
        check_window(None, accept_unsigned=True)
    check_window(None, accept_unsigned=False)
    errors_out = io.StringIO()
    with contextlib.redirect_stderr(errors_out):
        code = command.main(
            ["serve", "--signing-accept-unsigned", "--port", "0", "--metrics-port", "0"]
        )
    assert code == 2
    assert "BASRA_SIGNING_ACCEPT_UNSIGNED needs signing keys" in errors_out.getvalue()
