"""TLS and mutual TLS on the gRPC port, with certificates made by the test."""

from __future__ import annotations

import os
import subprocess

import grpc
import pytest
from basra.v1 import rules_pb2 as pb
from basra.v1 import rules_pb2_grpc

from service.config import Config
from testkit import harness
from testkit.pki import PKI, make_pki
from tests.trust.trust_support import served_port

TIMEOUT = 10.0


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
    done = subprocess.run(
        [*harness.command(), "serve", "--port", "0", "--metrics-port", "0"],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert problem in done.stderr
