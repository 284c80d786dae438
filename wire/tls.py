"""TLS files, read and checked as the server and its clients both read them.

Each way a file or a pair can be unusable (a missing or unreadable file, no PEM in it, a PEM
whose body does not parse, an encrypted key, a key that is not the certificate's, a CA bundle
holding a certificate that is not a CA) is refused with the file, the problem and the setting
or flag that names it; gRPC itself would only fail to bind a port or to connect.
"""

from __future__ import annotations

from typing import Any


class TLSConfigError(ValueError):
    """The TLS settings cannot be used: the sentence, and the file and setting at fault."""

    def __init__(self, message: str, *, file: str | None = None, setting: str | None = None):
        super().__init__(message)
        self.file = file
        self.setting = setting


def read_pem(path: str, what: str, setting: str) -> bytes:
    """Read a PEM file; refuse one that cannot be read or holds no PEM."""
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
    chain_pem = read_pem(cert, "certificate", cert_setting)
    chain = _certificates(chain_pem, cert, "certificate", cert_setting)
    key_pem = read_pem(key, "key", key_setting)
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
    data = read_pem(path, what, setting)
    for certificate in _certificates(data, path, what, setting):
        if only_cas and not _is_ca(certificate):
            raise TLSConfigError(
                f"the TLS {what} {path} holds a certificate that is not a CA "
                f"({certificate.subject.rfc4514_string()} has no basicConstraints CA:TRUE)",
                file=path,
                setting=setting,
            )
    return data
