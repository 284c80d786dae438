"""The portable pseudo-random stream of a match (docs/rules.md section 6, docs/determinism.md).

Every draw comes from SHA-256 in counter mode over the seed and a label naming its purpose,
so any language can reproduce a deal from the seed alone and no draw depends on another.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from functools import lru_cache
from typing import TypeGuard, TypeVar

from engine.facts import MAX_SEED_BYTES, MIN_SEED_BYTES, SEATS

T = TypeVar("T")

DOMAIN = b"basra-rules/v1"
# The stream's layout (docs/determinism.md): big-endian lengths of the seed and the label,
# a block counter, and the words a draw takes from each SHA-256 block.
_LENGTH_BYTES = 4
_COUNTER_BYTES = 8
_WORD_BYTES = 4
_WORD_RANGE = 1 << (8 * _WORD_BYTES)


def is_seed(value: object) -> TypeGuard[bytes]:
    """Whether `value` can seed a match: bytes, MIN_SEED_BYTES to MAX_SEED_BYTES long."""
    return isinstance(value, bytes) and MIN_SEED_BYTES <= len(value) <= MAX_SEED_BYTES


def _words(seed: bytes, label: str) -> Iterator[int]:
    """Yield the stream as unsigned 32-bit big-endian words, block after block."""
    label_bytes = label.encode("ascii")
    prefix = (
        DOMAIN
        + len(seed).to_bytes(_LENGTH_BYTES, "big")
        + seed
        + len(label_bytes).to_bytes(_LENGTH_BYTES, "big")
        + label_bytes
    )
    counter = 0
    while True:
        block = hashlib.sha256(prefix + counter.to_bytes(_COUNTER_BYTES, "big")).digest()
        for i in range(0, len(block), _WORD_BYTES):
            yield int.from_bytes(block[i : i + _WORD_BYTES], "big")
        counter += 1


def _below(words: Iterator[int], n: int) -> int:
    """Draw an unbiased integer in [0, n) by rejection sampling."""
    limit = _WORD_RANGE - _WORD_RANGE % n
    while True:
        word = next(words)
        if word < limit:
            return word % n


def shuffled(seed: bytes, label: str, items: Sequence[T]) -> tuple[T, ...]:
    """Return `items` in the order of a Fisher-Yates shuffle driven by the labelled stream."""
    out = list(items)
    words = _words(seed, label)
    for i in range(len(out) - 1, 0, -1):
        j = _below(words, i + 1)
        out[i], out[j] = out[j], out[i]
    return tuple(out)


@lru_cache(maxsize=4096)
def first_dealer(seed: bytes) -> int:
    """Return the seat (0 or 1) that deals the first hand (memoised: every state check asks)."""
    return _below(_words(seed, "first-dealer"), len(SEATS))


def dealer_of_hand(seed: bytes, hand_number: int) -> int:
    """Return the dealer of hand `hand_number` (1-based): the first dealer, then alternating."""
    return first_dealer(seed) ^ ((hand_number - 1) & 1)


def deck_label(hand_number: int) -> str:
    """Label of the shuffle of a hand's full deck."""
    return f"hand/{hand_number}/deck"


def fix_label(hand_number: int, fix_number: int) -> str:
    """Label of the reshuffle made by the n-th floor fix (1-based) of a hand."""
    return f"hand/{hand_number}/fix/{fix_number}"


def commitment(seed: bytes) -> bytes:
    """Return the public commitment to a seed: its SHA-256 digest."""
    return hashlib.sha256(seed).digest()
