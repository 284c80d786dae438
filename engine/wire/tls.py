"""Optional TLS for the gRPC port: a certificate and key, and a client CA for mutual TLS.

Files are read once at start (a rotated certificate takes a restart, as a rotated Secret
does in Kubernetes). Without a certificate the port speaks plaintext. `check_files` reads
every file at start with `cryptography`, so that each way a file or a pair can be unusable (a
missing or unreadable file, no PEM in it, a PEM whose body does not parse, an encrypted key, a
key that is not the certificate's, a client CA that is not a CA) stops the server with the
file and the problem named; gRPC itself would only fail to bind the port.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import grpc

CERT_SETTING = "BASRA_TLS_CERT"
KEY_SETTING = "BASRA_TLS_KEY"
CLIENT_CA_SETTING = "BASRA_TLS_CLIENT_CA"


class TLSConfigError(ValueError):
    """The TLS settings cannot be used: the sentence, and the file and setting at fault."""

    def __init__(self, message: str, *, file: str | None = None, setting: str | None = None):
        super().__init__(message)
        self.file = file
        self.setting = setting


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


def _read(path: str, what: str, setting: str) -> bytes:
    try:
        with open(path, "rb") as source:
            data = source.read()
    except OSError as error:
        raise TLSConfigError(
            f"cannot read the TLS {what} {path}: {error.strerror or error}",
            file=path,
            setting=setting,
        ) from None
    if b"-----BEGIN " not in data:
        raise TLSConfigError(f"the TLS {what} {path} is not PEM", file=path, setting=setting)
    return data


def _certificates(data: bytes, path: str, what: str, setting: str) -> list[Any]:
    """Every certificate of a PEM file; refuse a file whose certificates do not parse."""
    from cryptography import x509

    try:
        return list(x509.load_pem_x509_certificates(data))
    except ValueError as error:
        raise TLSConfigError(
            f"the TLS {what} {path} holds no certificate that can be read ({error})",
            file=path,
            setting=setting,
        ) from None


def _private_key(data: bytes, path: str, setting: str) -> Any:
    from cryptography.exceptions import UnsupportedAlgorithm
    from cryptography.hazmat.primitives import serialization

    try:
        return serialization.load_pem_private_key(data, password=None)
    except TypeError:  # the key needs a password
        raise TLSConfigError(
            f"the TLS key {path} is encrypted; the server needs it unencrypted",
            file=path,
            setting=setting,
        ) from None
    except (ValueError, UnsupportedAlgorithm) as error:
        raise TLSConfigError(
            f"the TLS key {path} is not a private key that can be read ({error})",
            file=path,
            setting=setting,
        ) from None


def _public(key: Any) -> bytes:
    from cryptography.hazmat.primitives import serialization

    return bytes(
        key.public_bytes(
            serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )


def _is_ca(certificate: Any) -> bool:
    from cryptography import x509

    try:
        constraints = certificate.extensions.get_extension_for_class(x509.BasicConstraints)
    except x509.ExtensionNotFound:
        return False
    return bool(constraints.value.ca)


def check_pair(cert: str, key: str, cert_setting: str, key_setting: str) -> tuple[bytes, bytes]:
    """Read a certificate chain and its key, checked to parse and to belong together (the key
    is the first certificate's); return their PEM bytes. `*_setting` name the files' settings
    (variables of the server, flags of a client) in what is refused."""
    chain_pem = _read(cert, "certificate", cert_setting)
    chain = _certificates(chain_pem, cert, "certificate", cert_setting)
    key_pem = _read(key, "key", key_setting)
    private = _private_key(key_pem, key, key_setting)
    if _public(private.public_key()) != _public(chain[0].public_key()):
        raise TLSConfigError(
            f"the TLS key {key} is not the key of the certificate {cert} "
            "(the first certificate of the file)",
            file=key,
            setting=key_setting,
        )
    return chain_pem, key_pem


def read_roots(path: str, what: str, setting: str, *, only_cas: bool) -> bytes:
    """Read a CA bundle, checked to parse (and, with `only_cas`, to hold CAs alone)."""
    data = _read(path, what, setting)
    for certificate in _certificates(data, path, what, setting):
        if only_cas and not _is_ca(certificate):
            raise TLSConfigError(
                f"the TLS {what} {path} holds a certificate that is not a CA "
                f"({certificate.subject.rfc4514_string()} has no basicConstraints CA:TRUE)",
                file=path,
                setting=setting,
            )
    return data


def check_files(files: TLSFiles) -> None:
    """Read every file once, so that any unusable one (or pair) stops the server at start."""
    check_pair(files.cert, files.key, CERT_SETTING, KEY_SETTING)
    if files.client_ca is not None:
        read_roots(files.client_ca, "client CA", CLIENT_CA_SETTING, only_cas=True)


def server_credentials(files: TLSFiles) -> grpc.ServerCredentials:
    """Server credentials; with a client CA, clients must present a certificate it signed."""
    import grpc  # only workers serve gRPC; the supervisor checks the files without it

    chain = _read(files.cert, "certificate", CERT_SETTING)
    key = _read(files.key, "key", KEY_SETTING)
    if files.client_ca is None:
        return grpc.ssl_server_credentials([(key, chain)])
    roots = _read(files.client_ca, "client CA", CLIENT_CA_SETTING)
    return grpc.ssl_server_credentials(
        [(key, chain)], root_certificates=roots, require_client_auth=True
    )
