"""Optional TLS for the gRPC port: a certificate and key, and a client CA for mutual TLS.

Files are read once at start (a rotated certificate takes a restart, as a rotated Secret
does in Kubernetes). Without a certificate the port speaks plaintext. `check_files` reads
every file at start with wire.tls's checks, so that an unusable file or pair stops the
server with the file and the problem named.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from wire.tls import TLSConfigError, check_pair, read_pem, read_roots

if TYPE_CHECKING:
    import grpc

CERT_SETTING = "BASRA_TLS_CERT"
KEY_SETTING = "BASRA_TLS_KEY"
CLIENT_CA_SETTING = "BASRA_TLS_CLIENT_CA"


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
                "BASRA_TLS_CLIENT_CA needs BASRA_TLS_CERT and BASRA_TLS_KEY as well",
                setting=CLIENT_CA_SETTING,
            )
        return None
    if not cert or not key:
        raise TLSConfigError(
            "TLS needs both BASRA_TLS_CERT and BASRA_TLS_KEY",
            setting=KEY_SETTING if cert else CERT_SETTING,
        )
    return TLSFiles(cert, key, client_ca or None)


def check_files(files: TLSFiles) -> None:
    """Read every file once, so that any unusable one (or pair) stops the server at start."""
    check_pair(files.cert, files.key, CERT_SETTING, KEY_SETTING)
    if files.client_ca is not None:
        read_roots(files.client_ca, "client CA", CLIENT_CA_SETTING, only_cas=True)


def server_credentials(files: TLSFiles) -> grpc.ServerCredentials:
    """Server credentials; with a client CA, clients must present a certificate it signed."""
    import grpc  # only workers serve gRPC; the supervisor checks the files without it

    chain = read_pem(files.cert, "certificate", CERT_SETTING)
    key = read_pem(files.key, "key", KEY_SETTING)
    if files.client_ca is None:
        return grpc.ssl_server_credentials([(key, chain)])
    roots = read_pem(files.client_ca, "client CA", CLIENT_CA_SETTING)
    return grpc.ssl_server_credentials(
        [(key, chain)], root_certificates=roots, require_client_auth=True
    )
