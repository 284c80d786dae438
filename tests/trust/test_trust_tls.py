"""TLS and mutual TLS on the gRPC port, with certificates made by the test."""

from __future__ import annotations

import base64
import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import grpc
import pytest
from basra.v1 import rules_pb2 as pb
from basra.v1 import rules_pb2_grpc
from cryptography.hazmat.primitives import serialization

from service.config import Config
from testkit import harness
from testkit.loopback import served_port
from testkit.pki import PKI, Issued, make_pki

TIMEOUT = 10.0
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> PKI:
    """Certificates for the module, made fresh."""
    return make_pki(tmp_path_factory.mktemp("pki"))


def call(port: int, credentials: grpc.ChannelCredentials | None) -> grpc.StatusCode:
    """One NewMatch over TLS (or plaintext without credentials); how it ended."""
    target = f"127.0.0.1:{port}"
    channel = (
        grpc.secure_channel(target, credentials) if credentials else grpc.insecure_channel(target)
    )
    with channel:
        stub = rules_pb2_grpc.RulesServiceStub(channel)  # type: ignore[no-untyped-call]
        try:
            stub.NewMatch(pb.NewMatchRequest(seed=b"tls"), timeout=TIMEOUT)
        except grpc.RpcError as error:
            return error.code()
    return grpc.StatusCode.OK


def test_tls_serves_clients_that_trust_the_ca_and_refuses_plaintext(pki: PKI) -> None:
    config = Config(tls_cert=pki.server.cert_path, tls_key=pki.server.key_path)
    with served_port(config) as port:
        assert call(port, grpc.ssl_channel_credentials(pki.ca.cert)) is grpc.StatusCode.OK
        assert call(port, None) is grpc.StatusCode.UNAVAILABLE
        # A client that trusts another CA does not accept this server.
        assert (
            call(port, grpc.ssl_channel_credentials(pki.stranger.cert))
            is grpc.StatusCode.UNAVAILABLE
        )


def test_mutual_tls_needs_a_client_certificate_from_the_client_ca(pki: PKI) -> None:
    config = Config(
        tls_cert=pki.server.cert_path,
        tls_key=pki.server.key_path,
        tls_client_ca=pki.ca.cert_path,
    )
    with served_port(config) as port:
        client = grpc.ssl_channel_credentials(pki.ca.cert, pki.client.key, pki.client.cert)
        assert call(port, client) is grpc.StatusCode.OK
        anonymous = grpc.ssl_channel_credentials(pki.ca.cert)
        assert call(port, anonymous) is grpc.StatusCode.UNAVAILABLE
        stranger = grpc.ssl_channel_credentials(pki.ca.cert, pki.stranger.key, pki.stranger.cert)
        assert call(port, stranger) is grpc.StatusCode.UNAVAILABLE
        assert call(port, None) is grpc.StatusCode.UNAVAILABLE


def test_the_served_process_reads_the_tls_variables_the_chart_sets(pki: PKI) -> None:
    """BASRA_TLS_CERT/KEY/CLIENT_CA, as the Helm chart sets them, switch TLS on end to end."""
    env = {
        "BASRA_TLS_CERT": pki.server.cert_path,
        "BASRA_TLS_KEY": pki.server.key_path,
        "BASRA_TLS_CLIENT_CA": pki.ca.cert_path,
    }
    served = harness.start(["--workers", "1"], env=env)
    try:
        client = grpc.ssl_channel_credentials(pki.ca.cert, pki.client.key, pki.client.cert)
        assert call(served.port, client) is grpc.StatusCode.OK
        assert (
            call(served.port, grpc.ssl_channel_credentials(pki.ca.cert))
            is grpc.StatusCode.UNAVAILABLE
        )
    finally:
        served.stop()


@pytest.mark.parametrize(
    ("env", "problem"),
    [
        ({"BASRA_TLS_CERT": "cert.pem"}, "both BASRA_TLS_CERT and BASRA_TLS_KEY"),
        ({"BASRA_TLS_CLIENT_CA": "ca.pem"}, "needs BASRA_TLS_CERT"),
        (
            {"BASRA_TLS_CERT": "/nonexistent.crt", "BASRA_TLS_KEY": "/nonexistent.key"},
            "cannot read",
        ),
        ({"BASRA_SIGNING_KEYS": "k1:short"}, "BASRA_SIGNING_KEYS"),
    ],
)
def test_unusable_security_settings_stop_the_server_at_start(
    env: dict[str, str], problem: str
) -> None:
    done = _serve(env)
    assert done.returncode == 2
    assert problem in done.stderr


def _serve(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """`basra-rules serve` on free ports with `env` added, run until it exits."""
    return subprocess.run(
        [*harness.command(), "serve", "--port", "0", "--metrics-port", "0"],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def _corrupt(pem: bytes) -> bytes:
    """The same PEM with a line of its base64 body replaced: still PEM, no longer DER."""
    lines = pem.splitlines(keepends=True)
    lines[2] = b"A" * (len(lines[2]) - 1) + b"\n"
    return b"".join(lines)


def _encrypted(issued: Issued) -> bytes:
    key = serialization.load_pem_private_key(issued.key, None)
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(b"secret"),
    )


# What a case writes ("which": the setting's file to replace, and its new content), what the
# server must say: the setting at fault and words of the sentence.
BAD_FILES: dict[str, tuple[str, Callable[[PKI], bytes] | None, str, str]] = {
    "key of another certificate": ("key", lambda p: p.client.key, "KEY", "is not the key of"),
    "corrupt certificate body": ("cert", lambda p: _corrupt(p.server.cert), "CERT", "no cert"),
    "corrupt key body": ("key", lambda p: _corrupt(p.server.key), "KEY", "not a private key"),
    "encrypted key": ("key", lambda p: _encrypted(p.server), "KEY", "is encrypted"),
    "key in place of certificate": ("cert", lambda p: p.server.key, "CERT", "no cert"),
    "client CA not a CA": ("client_ca", lambda p: p.server.cert, "CLIENT_CA", "not a CA"),
    "client CA corrupt": ("client_ca", lambda p: _corrupt(p.ca.cert), "CLIENT_CA", "no cert"),
    "missing key": ("key", None, "KEY", "cannot read"),
}


@pytest.mark.parametrize("case", list(BAD_FILES))
def test_every_unusable_tls_file_or_pair_stops_the_server_naming_file_and_problem(
    pki: PKI, tmp_path: Path, case: str
) -> None:
    """Exit 2 with one JSON line on standard error: the problem, the file, its setting; no
    port bound, no metrics directory made."""
    which, content, setting, words = BAD_FILES[case]
    paths = {
        "cert": pki.server.cert_path,
        "key": pki.server.key_path,
        "client_ca": pki.ca.cert_path,
    }
    bad = tmp_path / f"bad-{which}.pem"
    if content is not None:
        bad.write_bytes(content(pki))
    paths[which] = str(bad)
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    env = {
        "BASRA_TLS_CERT": paths["cert"],
        "BASRA_TLS_KEY": paths["key"],
        "BASRA_TLS_CLIENT_CA": paths["client_ca"],
        "TMPDIR": str(scratch),
    }
    done = _serve(env)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    said = json.loads(lines[0])
    assert said["event"] == "cannot start" and said["level"] == "error"
    assert said["setting"] == f"BASRA_TLS_{setting}" and said["file"] == str(bad)
    assert words in said["error"] and str(bad) in said["error"]
    assert list(scratch.iterdir()) == []


def _client(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("BASRA_SIGNING")}
    return subprocess.run(
        [*harness.command(), *args],
        env={**environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize("mutual", [False, True], ids=["tls", "mutual-tls"])
def test_play_and_load_speak_tls_to_a_server_that_signs(
    pki: PKI, tmp_path: Path, mutual: bool
) -> None:
    """`play` and `load` with the TLS flags (and, for mutual TLS, this client's certificate)
    against a server that signs: play carries the signed states to the end of a match; load,
    given the keys, seals its data's states and every call is answered; without them every
    call is refused, as the server must."""
    keys_file = tmp_path / "keys"
    keys_file.write_text("k1:" + base64.b64encode(bytes(range(32))).decode() + "\n")
    env = {
        "BASRA_TLS_CERT": pki.server.cert_path,
        "BASRA_TLS_KEY": pki.server.key_path,
        "BASRA_SIGNING_KEYS_FILE": str(keys_file),
    }
    flags = ["--tls-ca", pki.ca.cert_path]
    if mutual:
        env["BASRA_TLS_CLIENT_CA"] = pki.ca.cert_path
        flags += ["--tls-cert", pki.client.cert_path, "--tls-key", pki.client.key_path]
    served = harness.start(["--workers", "1"], env=env)
    try:
        target = served.target
        played = _client(
            "play", "--target", target, "--seed", "01", "--bots", "random", "random", *flags
        )
        assert played.returncode == 0, played.stderr
        assert "its SHA-256 is the commitment" in played.stdout
        plain = _client("play", "--target", target, "--seed", "01")
        assert plain.returncode == 1 and "call failed: UNAVAILABLE" in plain.stderr
        if mutual:
            anonymous = _client("play", "--target", target, "--tls-ca", pki.ca.cert_path)
            assert anonymous.returncode == 1 and "UNAVAILABLE" in anonymous.stderr
        config = tmp_path / "apply.json"
        config.write_text(
            json.dumps(
                {
                    "call": "basra.v1.RulesService.Apply",
                    "insecure": False,
                    "cacert": pki.ca.cert_path,
                    "data-file": str(REPO / "deploy" / "ghz" / "data" / "apply.json"),
                    "total": 120,
                    "concurrency": 4,
                }
            )
        )
        mine = (
            ["--tls-cert", pki.client.cert_path, "--tls-key", pki.client.key_path] if mutual else []
        )
        sealed = _client(
            "load",
            str(config),
            "--host",
            target,
            "--json",
            *mine,
            env={"BASRA_SIGNING_KEYS_FILE": str(keys_file)},
        )
        assert sealed.returncode == 0, sealed.stderr
        assert json.loads(sealed.stdout)["statusCodeDistribution"] == {"OK": 120}
        unsealed = _client("load", str(config), "--host", target, "--json", *mine)
        assert json.loads(unsealed.stdout)["statusCodeDistribution"] == {"Unauthenticated": 120}
    finally:
        assert served.stop() == 0


def test_a_client_refuses_an_unusable_tls_file_before_calling(pki: PKI, tmp_path: Path) -> None:
    """The clients read their TLS files with the server's checks: exit 2, the file named."""
    missing = str(tmp_path / "missing.pem")
    played = _client("play", "--target", "127.0.0.1:1", "--tls-ca", missing)
    assert played.returncode == 2 and missing in played.stderr
    swapped = ["--tls-cert", pki.client.cert_path, "--tls-key", pki.server.key_path]
    played = _client("play", "--target", "127.0.0.1:1", *swapped)
    assert played.returncode == 2 and "is not the key of" in played.stderr
    config = tmp_path / "c.json"
    config.write_text(json.dumps({"call": "basra.v1.RulesService.NewMatch", "cacert": missing}))
    loaded = _client("load", str(config), "--host", "127.0.0.1:1")
    assert loaded.returncode == 2 and missing in loaded.stderr
