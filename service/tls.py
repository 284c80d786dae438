"""Optional TLS for the gRPC port: a certificate and key, and a client CA for mutual TLS.

Files are read once at start (a rotated certificate takes a restart, as a rotated Secret
does in Kubernetes). Without a certificate the port speaks plaintext.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import grpc


class TLSConfigError(ValueError):
    """The TLS settings cannot be used."""


@dataclass(frozen=True, slots=True)
class TLSFiles:
    """Paths of the PEM files: certificate chain, private key, optional client CA bundle."""

    cert: str
    key: str
    client_ca: str | None = None


def tls_files(cert: str | None, key: str | None, client_ca: str | None) -> TLSFiles | None:
    """The TLS files, or None for plaintext; refuse half a configuration."""
    if not cert and not key:
        if client_ca:
            raise TLSConfigError(
                "BASRA_TLS_CLIENT_CA needs BASRA_TLS_CERT and BASRA_TLS_KEY as well"
            )
        return None
    if not cert or not key:
        raise TLSConfigError("TLS needs both BASRA_TLS_CERT and BASRA_TLS_KEY")
    return TLSFiles(cert, key, client_ca or None)


def _read(path: str, what: str) -> bytes:
    try:
        with open(path, "rb") as source:
            data = source.read()
    except OSError as error:
        raise TLSConfigError(f"cannot read the TLS {what} {path}: {error}") from None
    if b"-----BEGIN " not in data:
        raise TLSConfigError(f"the TLS {what} {path} is not PEM")
    return data


def check_files(files: TLSFiles) -> None:
    """Read every file once, so that a missing or non-PEM one stops the server at start."""
    _read(files.cert, "certificate")
    _read(files.key, "key")
    if files.client_ca is not None:
        _read(files.client_ca, "client CA")


def server_credentials(files: TLSFiles) -> grpc.ServerCredentials:
    """Server credentials; with a client CA, clients must present a certificate it signed."""
    import grpc  # only workers serve gRPC; the supervisor checks the files without it

    chain = _read(files.cert, "certificate")
    key = _read(files.key, "key")
    if files.client_ca is None:
        return grpc.ssl_server_credentials([(key, chain)])
    roots = _read(files.client_ca, "client CA")
    return grpc.ssl_server_credentials(
        [(key, chain)], root_certificates=roots, require_client_auth=True
    )
