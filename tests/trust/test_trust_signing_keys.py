"""Signing keys: the "kid:base64key,..." format, its refusals, and the MAC over exact bytes."""

from __future__ import annotations

import base64
import hashlib
import hmac
from pathlib import Path

import pytest

from wire.signing import DOMAIN, SigningConfigError, load_keys, parse_keys

K1 = bytes(range(32))
K2 = bytes(range(100, 116))


def line(*pairs: tuple[str, bytes]) -> str:
    """A keys line from (key id, secret) pairs."""
    return ",".join(f"{kid}:{base64.b64encode(secret).decode()}" for kid, secret in pairs)


def test_the_first_key_signs_and_every_key_verifies() -> None:
    ring = parse_keys(line(("k2", K2), ("k1", K1)) + "\n")
    assert ring.key_ids == ("k2", "k1") and ring.signing_key_id == "k2"
    key_id, signature = ring.sign(b"state bytes")
    assert key_id == "k2"
    assert signature == hmac.new(K2, DOMAIN + b"state bytes", hashlib.sha256).digest()
    old = hmac.new(K1, DOMAIN + b"state bytes", hashlib.sha256).digest()
    assert ring.verify("k1", b"state bytes", old)
    assert ring.verify("k2", b"state bytes", signature)
    assert not ring.verify("k1", b"state bytes", signature)  # right MAC, wrong key id
    assert not ring.verify("k3", b"state bytes", signature)
    assert not ring.verify("k2", b"state byteS", signature)


def test_secrets_never_show_in_repr() -> None:
    ring = parse_keys(line(("k1", K1)))
    assert base64.b64encode(K1).decode() not in repr(ring)
    assert repr(K1) not in repr(ring)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("", "hold no key"),
        ("\n", "hold no key"),
        ("k1", "not 'kid:base64key'"),
        (":" + base64.b64encode(K1).decode(), "key id"),
        ("k 1:" + base64.b64encode(K1).decode(), "key id"),
        ("x" * 65 + ":" + base64.b64encode(K1).decode(), "key id"),
        ("k1:not*base64", "not valid base64"),
        ("k1:" + base64.b64encode(bytes(15)).decode(), "at least 16"),
        (line(("k1", K1), ("k1", K2)), "appears twice"),
    ],
)
def test_unusable_keys_are_refused_with_the_problem_named(text: str, problem: str) -> None:
    with pytest.raises(SigningConfigError, match=problem):
        parse_keys(text)


def test_edges_of_the_format_are_accepted() -> None:
    exactly_16 = parse_keys("a.b_c-D9:" + base64.b64encode(bytes(16)).decode())
    assert exactly_16.key_ids == ("a.b_c-D9",)
    longest = parse_keys("k" * 64 + ":" + base64.b64encode(K1).decode() + "\r\n")
    assert longest.key_ids == ("k" * 64,)
    spaced = parse_keys(
        " k1 : " + base64.b64encode(K1).decode() + " , k2:" + base64.b64encode(K2).decode()
    )
    assert spaced.key_ids == ("k1", "k2")


def test_keys_load_from_a_file_or_inline_but_not_both(tmp_path: Path) -> None:
    path = tmp_path / "keys"
    path.write_text(line(("k1", K1)) + "\n")
    from_file = load_keys(None, str(path))
    assert from_file is not None and from_file.key_ids == ("k1",)
    inline = load_keys(line(("k2", K2)), None)
    assert inline is not None and inline.key_ids == ("k2",)
    assert load_keys(None, None) is None
    assert load_keys("", "") is None
    with pytest.raises(SigningConfigError, match="not both"):
        load_keys(line(("k2", K2)), str(path))
    with pytest.raises(SigningConfigError, match="cannot read"):
        load_keys(None, str(tmp_path / "missing"))
