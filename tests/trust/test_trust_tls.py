"""TLS and mutual TLS on the gRPC port, with certificates made by the test."""

from __future__ import annotations

import datetime
import ipaddress
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest
from basra.v1 import rules_pb2 as pb
from basra.v1 import rules_pb2_grpc
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from service.config import Config
from testkit import harness
from tests.trust.trust_support import served_port

TIMEOUT = 10.0


@dataclass(frozen=True)
class Issued:
    """A PEM key and certificate, and where they were written."""

    key: bytes
    cert: bytes
    key_path: str
    cert_path: str


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


def issue(directory: Path, name: str, issuer: Issued | None = None, usage: str = "ca") -> Issued:
    """A certificate for `name`: a self-signed CA when no issuer, else a leaf it signs."""
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(name))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
    )
    if issuer is None:
        builder = builder.issuer_name(_name(name)).add_extension(
            x509.BasicConstraints(ca=True, path_length=None), critical=True
        )
        signer: Any = key
    else:
        issuer_cert = x509.load_pem_x509_certificate(issuer.cert)
        builder = builder.issuer_name(issuer_cert.subject).add_extension(
            x509.BasicConstraints(ca=False, path_length=None), critical=True
        )
        if usage == "server":
            builder = builder.add_extension(
                x509.SubjectAlternativeName(
                    [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
                ),
                critical=False,
            ).add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), False)
        else:
            builder = builder.add_extension(
                x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), False
            )
        signer = serialization.load_pem_private_key(issuer.key, None)
    cert = builder.sign(signer, hashes.SHA256())
    key_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    cert_pem = cert.public_bytes(serialization.Encoding.PEM)
    key_path, cert_path = directory / f"{name}.key", directory / f"{name}.crt"
    key_path.write_bytes(key_pem)
    cert_path.write_bytes(cert_pem)
    return Issued(key_pem, cert_pem, str(key_path), str(cert_path))


@dataclass(frozen=True)
class PKI:
    """A CA, a server certificate, a client certificate, and a client of another CA."""

    ca: Issued
    server: Issued
    client: Issued
    stranger: Issued


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> PKI:
    """Certificates for the module, made fresh."""
    directory = tmp_path_factory.mktemp("pki")
    ca = issue(directory, "test-ca")
    other = issue(directory, "other-ca")
    return PKI(
        ca,
        issue(directory, "server", ca, "server"),
        issue(directory, "client", ca, "client"),
        issue(directory, "stranger", other, "client"),
    )


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
