"""The gateway in front of the servers the chart can run: one that signs its states (the signed
state goes out and back as base64 JSON, unchanged, and a tampered one is refused as over gRPC),
and one with mutual TLS on its gRPC port (the gateway presents its certificate)."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Any

import pytest

from service.config import Config
from testkit.calls import start_server
from testkit.http_gateway import call, running
from testkit.pki import PKI, make_pki

SIGNING_KEYS = f"k1:{base64.b64encode(bytes(range(32))).decode()}"
SEED = base64.b64encode(b"signed over http").decode()


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> PKI:
    """Certificates for the module, made fresh."""
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def signing_url() -> Iterator[str]:
    """The gateway in front of a server that signs its states."""
    server = start_server(Config(signing_keys=SIGNING_KEYS))
    try:
        with running(f"127.0.0.1:{server.port}") as started:
            yield started.url
    finally:
        server.close()


def first_action(answer: dict[str, Any]) -> dict[str, Any]:
    """The action of the answer's first legal move."""
    legal = answer["legalMoves"]
    move = legal["moves"][0]
    action: dict[str, Any] = {"seat": legal.get("seat", 0), "card": move["card"]}
    action.update({"planId": move["plans"][0]["id"]} if move.get("plans") else {"trail": True})
    return action


def test_a_signed_state_travels_as_base64_and_comes_back_unchanged(signing_url: str) -> None:
    answer = call(signing_url, "NewMatch", {"seed": SEED}).json()
    for turn in range(6):
        signed = answer["signedState"]
        assert signed["keyId"] == "k1" and base64.b64decode(signed["signature"])
        request = {"signedState": signed, "action": first_action(answer), "expectedSeq": turn}
        reply = call(signing_url, "Apply", request)
        assert reply.status == 200, reply.body
        answer = reply.json()
        assert answer["state"]["seq"] == turn + 1


def test_a_tampered_signed_state_is_refused_bad_signature(signing_url: str) -> None:
    answer = call(signing_url, "NewMatch", {"seed": SEED}).json()
    signed = dict(answer["signedState"])
    signature = bytearray(base64.b64decode(signed["signature"]))
    signature[0] ^= 1
    signed["signature"] = base64.b64encode(bytes(signature)).decode()
    reply = call(signing_url, "Apply", {"signedState": signed, "action": first_action(answer)})
    assert reply.status == 401, reply.body  # UNAUTHENTICATED
    status = reply.json()
    assert status["code"] == 16
    (info,) = status["details"]
    assert info["reason"] == "BAD_SIGNATURE" and info["domain"] == "basra.v1"


def test_the_gateway_reaches_a_server_with_mutual_tls(pki: PKI) -> None:
    config = Config(
        tls_cert=pki.server.cert_path,
        tls_key=pki.server.key_path,
        tls_client_ca=pki.ca.cert_path,
    )
    server = start_server(config)
    backend = f"127.0.0.1:{server.port}"
    client = ("--backend-cert", pki.client.cert_path, "--backend-key", pki.client.key_path)
    try:
        with running(backend, "--backend-ca", pki.ca.cert_path, *client) as started:
            answer = call(started.url, "NewMatch", {"seed": SEED})
        assert answer.status == 200, answer.body
        # Without its certificate the server will not have it: the backend cannot be reached.
        with running(backend, "--backend-ca", pki.ca.cert_path, "--default-timeout", "2s") as bare:
            refused = call(bare.url, "NewMatch", {"seed": SEED})
        assert refused.status == 503
        assert refused.json()["details"][0]["reason"] == "BACKEND_UNAVAILABLE"
    finally:
        server.close()
