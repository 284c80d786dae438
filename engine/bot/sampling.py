"""The bot's own pseudo-random draws: SHA-256 in counter mode over the bot seed.

Independent of the match's stream (engine.rng), which the bot must not reach: the bot's draws
come from `bot_seed` alone, so the same seed and information set give the same choices in any
process, on any machine and under any Python version.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from typing import TypeVar

T = TypeVar("T")

DOMAIN = b"basra-rules/bot/v1"


def _words(seed: bytes) -> Iterator[int]:
    """Yield unsigned 32-bit words of the stream, block after block."""
    prefix = DOMAIN + len(seed).to_bytes(4, "big") + seed
    counter = 0
    while True:
        block = hashlib.sha256(prefix + counter.to_bytes(8, "big")).digest()
        for i in range(0, 32, 4):
            yield int.from_bytes(block[i : i + 4], "big")
        counter += 1


class Draws:
    """Unbiased integers drawn from one bot seed's stream."""

    __slots__ = ("_words",)

    def __init__(self, seed: bytes) -> None:
        self._words = _words(seed)

    def below(self, n: int) -> int:
        """Return an integer in [0, n), by rejection sampling (n >= 1)."""
        limit = (1 << 32) - (1 << 32) % n
        while True:
            word = next(self._words)
            if word < limit:
                return word % n

    def sample(self, items: Sequence[T], k: int) -> tuple[T, ...]:
        """Return k distinct items chosen uniformly, by a partial Fisher-Yates shuffle."""
        pool = list(items)
        n = len(pool)
        for i in range(k):
            j = i + self.below(n - i)
            pool[i], pool[j] = pool[j], pool[i]
        return tuple(pool[:k])
