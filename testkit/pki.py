"""Certificates made on the spot for tests: a CA, and server and client certificates it signs.

One maker for every test that needs TLS (the trust tests, the rollout of a renewed
certificate, the clients' TLS flags, the server's start-up checks of its files). Keys are
P-256, certificates last a day; a server certificate names localhost and 127.0.0.1.
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


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
    """A certificate for `name`: a self-signed CA when no issuer, else a leaf it signs
    (`usage` "server" or "client"); written to `directory` as NAME.key and NAME.crt."""
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


def make_pki(directory: Path) -> PKI:
    """A fresh PKI written to `directory`."""
    ca = issue(directory, "test-ca")
    other = issue(directory, "other-ca")
    return PKI(
        ca,
        issue(directory, "server", ca, "server"),
        issue(directory, "client", ca, "client"),
        issue(directory, "stranger", other, "client"),
    )
