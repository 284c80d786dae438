"""Signed states: HMAC-SHA256 over the exact bytes of a serialized State, under named keys.

Keys come as "kid:base64key,kid2:base64key" (from BASRA_SIGNING_KEYS or the file named by
BASRA_SIGNING_KEYS_FILE, where a trailing newline is allowed): the server reads them to sign
and verify, `basra-rules load` to seal the states it sends. The first key signs; every listed
key verifies (rotating a key: docs/service.md, "Changing a running deployment").

The signature covers the bytes the server produced, not a re-encoding of them: protobuf
encoders of different languages need not produce the same bytes for the same message, so
clients store SignedState.state as an opaque blob and send it back unchanged.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
from dataclasses import dataclass, field

KEY_ID = re.compile(r"[A-Za-z0-9_.-]{1,64}")
MIN_KEY_BYTES = 16
# Domain separation: these MACs can never be mistaken for MACs of anything else.
DOMAIN = b"basra.v1.SignedState\n"


class SigningConfigError(ValueError):
    """The signing keys cannot be used."""


@dataclass(frozen=True, slots=True)
class SigningKey:
    """One key: its public id and its secret (never shown in repr)."""

    key_id: str
    secret: bytes = field(repr=False)


def mac(secret: bytes, state: bytes) -> bytes:
    """The HMAC-SHA256 of a serialized state under one secret."""
    return hmac.new(secret, DOMAIN + state, hashlib.sha256).digest()


@dataclass(frozen=True, slots=True)
class Keyring:
    """The configured keys, the first of which signs."""

    keys: tuple[SigningKey, ...]

    def __post_init__(self) -> None:
        if not self.keys:
            raise SigningConfigError("at least one signing key is needed")

    @property
    def signing_key_id(self) -> str:
        """The id of the key that signs."""
        return self.keys[0].key_id

    @property
    def key_ids(self) -> tuple[str, ...]:
        """Every key id accepted, the signing one first."""
        return tuple(k.key_id for k in self.keys)

    def sign(self, state: bytes) -> tuple[str, bytes]:
        """Return (key id, signature) of serialized state bytes, with the first key."""
        first = self.keys[0]
        return first.key_id, mac(first.secret, state)

    def verify(self, key_id: str, state: bytes, signature: bytes) -> bool:
        """Whether `signature` is the MAC of `state` under the key named `key_id`."""
        for key in self.keys:
            if key.key_id == key_id:
                return hmac.compare_digest(mac(key.secret, state), signature)
        return False

    def knows(self, key_id: str) -> bool:
        """Whether a key id is among the configured ones."""
        return key_id in self.key_ids


def parse_keys(text: str, source: str = "the signing keys") -> Keyring:
    """Parse "kid:base64key,kid2:base64key" (one trailing newline allowed) into a keyring."""
    body = text[:-1] if text.endswith("\n") else text
    body = body[:-1] if body.endswith("\r") else body
    if not body.strip():
        raise SigningConfigError(f"{source} hold no key")
    keys: list[SigningKey] = []
    for position, entry in enumerate(body.split(","), start=1):
        key_id, colon, encoded = entry.partition(":")
        key_id = key_id.strip()
        if not colon:
            raise SigningConfigError(f"entry {position} of {source} is not 'kid:base64key'")
        if not KEY_ID.fullmatch(key_id):
            raise SigningConfigError(
                f"entry {position} of {source} has a key id that is not 1 to 64 of "
                "A-Z a-z 0-9 _ . -"
            )
        try:
            secret = base64.b64decode(encoded.strip(), validate=True)
        except (binascii.Error, ValueError):
            raise SigningConfigError(
                f"the key {key_id!r} in {source} is not valid base64"
            ) from None
        if len(secret) < MIN_KEY_BYTES:
            raise SigningConfigError(
                f"the key {key_id!r} in {source} has {len(secret)} bytes; "
                f"at least {MIN_KEY_BYTES} are needed"
            )
        if any(k.key_id == key_id for k in keys):
            raise SigningConfigError(f"the key id {key_id!r} appears twice in {source}")
        keys.append(SigningKey(key_id, secret))
    return Keyring(tuple(keys))


def load_keys(inline: str | None, path: str | None) -> Keyring | None:
    """The keyring from inline text or a file (not both); None when neither is set."""
    if inline and path:
        raise SigningConfigError(
            "set BASRA_SIGNING_KEYS or BASRA_SIGNING_KEYS_FILE (--signing-keys-file), not both"
        )
    if inline:
        return parse_keys(inline, "BASRA_SIGNING_KEYS")
    if path:
        try:
            with open(path, encoding="ascii") as source:
                text = source.read()
        except (OSError, UnicodeDecodeError) as error:
            raise SigningConfigError(f"cannot read the signing keys file {path}: {error}") from None
        return parse_keys(text, f"the signing keys file {path}")
    return None
