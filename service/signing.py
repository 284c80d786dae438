"""The server's signing settings: the keys (wire.signing) and the migration window.

With signing_accept_unsigned (the migration window of turning signing on or off, see
docs/service.md) a server with keys still signs every state it returns but also takes states
that come unsigned; without keys there is nothing to sign with, so that setting is refused.
"""

from __future__ import annotations

from wire.signing import Keyring, SigningConfigError

__all__ = ["check_window"]


def check_window(keyring: Keyring | None, accept_unsigned: bool) -> None:
    """Refuse a migration window without keys: it would mean nothing, and most likely the keys
    were meant to be there."""
    if accept_unsigned and keyring is None:
        raise SigningConfigError(
            "BASRA_SIGNING_ACCEPT_UNSIGNED needs signing keys (BASRA_SIGNING_KEYS or "
            "BASRA_SIGNING_KEYS_FILE): it is the window of a server that signs"
        )
