"""docs/determinism.md: an independent re-implementation of the stream, and the doc's vectors.

The stream is rebuilt here from the document's definition with hashlib alone (no engine code),
and the vectors are parsed out of the document, so the document, this re-implementation and
the engine's deal cannot drift apart.
"""

from __future__ import annotations

import hashlib
import os
import random
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine import CardsDealt, FloorFixed, new_match, replay, rng
from testkit.actions import play_match

DOC = Path(__file__).resolve().parents[2] / "docs" / "determinism.md"
RANKS = ["A", "2", "3", "4", "5", "6", "7", "8", "9", "10", "J", "Q", "K"]
CODES = [r + s for r in RANKS for s in "CDHS"]


# --- the stream, as the document defines it ------------------------------------------------


def words(seed: bytes, label: str) -> Iterator[int]:
    """Big-endian 32-bit words of SHA-256(domain, len seed, seed, len label, label, counter)."""
    label_bytes = label.encode("ascii")
    prefix = (
        b"basra-rules/v1"
        + len(seed).to_bytes(4, "big")
        + seed
        + len(label_bytes).to_bytes(4, "big")
        + label_bytes
    )
    counter = 0
    while True:
        digest = hashlib.sha256(prefix + counter.to_bytes(8, "big")).digest()
        for offset in range(0, 32, 4):
            yield int.from_bytes(digest[offset : offset + 4], "big")
        counter += 1


def uniform(stream: Iterator[int], n: int) -> int:
    """Unbiased integer in [0, n): reject words at or above the largest multiple of n."""
    bound = (2**32 // n) * n
    for word in stream:
        if word < bound:
            return word % n
    raise AssertionError("the stream is endless")


def shuffle(seed: bytes, label: str, items: list[int]) -> list[int]:
    """Fisher-Yates from the last position down to 1, swapping with a uniform j in [0, i]."""
    out = list(items)
    stream = words(seed, label)
    for i in range(len(out) - 1, 0, -1):
        j = uniform(stream, i + 1)
        out[i], out[j] = out[j], out[i]
    return out


def is_fixed_away(card: int) -> bool:
    """J or 7D: cards that may not lie on a freshly dealt floor."""
    return CODES[card].startswith("J") or CODES[card] == "7D"


def deal_first_hand(seed: bytes) -> dict[str, str]:
    """Every value the document lists for a seed, computed from the definition."""
    dealer = uniform(words(seed, "first-dealer"), 2)
    deck = shuffle(seed, "hand/1/deck", list(range(52)))
    floor = deck[8:12]
    undealt = deck[12:]
    out = {
        "seed": seed.hex(),
        "first dealer": str(dealer),
        "hand 1 deck": " ".join(CODES[c] for c in deck),
        "non-dealer hand": " ".join(CODES[c] for c in deck[0:4]),
        "dealer hand": " ".join(CODES[c] for c in deck[4:8]),
        "floor dealt": " ".join(CODES[c] for c in floor),
    }
    fix = 0
    while any(is_fixed_away(c) for c in floor):
        fix += 1
        returned = [c for c in floor if is_fixed_away(c)]
        pool = shuffle(seed, f"hand/1/fix/{fix}", undealt + returned)
        replacements, undealt = pool[: len(returned)], pool[len(returned) :]
        floor = [c for c in floor if c not in returned] + replacements
        out[f"fix {fix}"] = (
            " ".join(CODES[c] for c in returned) + " -> " + " ".join(CODES[c] for c in replacements)
        )
    out["floor"] = " ".join(CODES[c] for c in floor)
    out["undealt"] = " ".join(CODES[c] for c in undealt)
    return out


# --- the document's vectors ----------------------------------------------------------------


def doc_vectors() -> list[dict[str, str]]:
    """Parse the ```vector blocks of docs/determinism.md into key/value dictionaries."""
    text = DOC.read_text(encoding="utf-8")
    blocks = re.findall(r"^```vector\n(.*?)^```", text, flags=re.M | re.S)
    vectors = []
    for block in blocks:
        entry: dict[str, str] = {}
        for line in block.strip().splitlines():
            key, _, value = line.partition(":")
            entry[key.strip()] = value.strip()
        vectors.append(entry)
    return vectors


VECTORS = doc_vectors() if DOC.is_file() else []


def test_document_has_vectors_for_the_required_seeds() -> None:
    """Seeds 00, the ASCII bytes of "basra" and 00..1f are all documented, one with a fix."""
    assert DOC.is_file(), f"{DOC} is missing"
    seeds = [v["seed"] for v in VECTORS]
    assert "00" in seeds
    assert b"basra".hex() in seeds
    assert bytes(range(32)).hex() in seeds
    assert any("fix 1" in v for v in VECTORS)


@pytest.mark.parametrize("vector", VECTORS, ids=[v.get("seed", "?")[:12] for v in VECTORS])
def test_document_vector_matches_the_independent_stream(vector: dict[str, str]) -> None:
    """Every value written in the document follows from its definition of the stream."""
    assert deal_first_hand(bytes.fromhex(vector["seed"])) == vector


@pytest.mark.parametrize("vector", VECTORS, ids=[v.get("seed", "?")[:12] for v in VECTORS])
def test_document_vector_matches_the_engine_deal(vector: dict[str, str]) -> None:
    """The engine's first dealer, hands, floor fixes, floor and deck equal the document's."""
    seed = bytes.fromhex(vector["seed"])
    state, events = new_match(seed)
    assert str(state.dealer) == vector["first dealer"]
    deck = rng.shuffled(seed, rng.deck_label(1), range(52))
    assert " ".join(CODES[c] for c in deck) == vector["hand 1 deck"]
    non_dealer = 1 - state.dealer
    assert " ".join(CODES[c] for c in state.hands[non_dealer]) == vector["non-dealer hand"]
    assert " ".join(CODES[c] for c in state.hands[state.dealer]) == vector["dealer hand"]
    assert " ".join(CODES[c] for c in state.floor) == vector["floor"]
    assert " ".join(CODES[c] for c in state.deck) == vector["undealt"]
    fixes = [e for e in events if isinstance(e, FloorFixed)]
    written = [vector[f"fix {n}"] for n in range(1, len(fixes) + 1)]
    assert f"fix {len(fixes) + 1}" not in vector
    assert [
        " ".join(CODES[c] for c in f.returned) + " -> " + " ".join(CODES[c] for c in f.replacements)
        for f in fixes
    ] == written
    dealt = [e for e in events if isinstance(e, CardsDealt)]
    assert dealt[2].seat is None
    assert " ".join(CODES[c] for c in dealt[2].cards) == vector["floor dealt"]


def test_independent_stream_reproduces_many_engine_deals() -> None:
    """Beyond the documented seeds: 200 seeds of assorted lengths deal alike."""
    for i in range(200):
        seed = hashlib.sha256(bytes([i])).digest()[: 1 + i % 64]
        want = deal_first_hand(seed)
        state, _ = new_match(seed)
        assert str(state.dealer) == want["first dealer"]
        assert " ".join(CODES[c] for c in state.floor) == want["floor"]
        assert " ".join(CODES[c] for c in state.deck) == want["undealt"]
        assert " ".join(CODES[c] for c in state.hands[1 - state.dealer]) == want["non-dealer hand"]


def test_uniform_draw_rejects_words_above_the_largest_multiple() -> None:
    """For n = 3 the bound is 4294967295: the word 2**32 - 1 is skipped, 5 gives 5 mod 3 = 2."""
    assert (2**32 // 3) * 3 == 2**32 - 1
    assert uniform(iter([2**32 - 1, 5]), 3) == 2
    assert uniform(iter([4, 9]), 3) == 1
    assert uniform(iter([2**32 - 1]), 2) == 1


SCRIPT = """
import sys
from engine import new_match
state, events = new_match(bytes.fromhex(sys.argv[1]))
print(repr(state)); print(repr(events))
"""


def test_nothing_depends_on_process_state() -> None:
    """Two processes with different hash seeds deal the same match (no clock, no hashing)."""
    outputs = []
    for hash_seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        result = subprocess.run(
            [sys.executable, "-c", SCRIPT, "6261737261"],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
            check=True,
        )
        outputs.append(result.stdout)
    assert outputs[0] == outputs[1]
    assert "hand_number=1" in outputs[0]


def test_same_seed_and_actions_give_identical_results() -> None:
    """Replaying the same actions from the same seed twice gives equal states and events."""
    played = play_match(b"determinism", random.Random(3))
    first = replay(b"determinism", played.actions)
    second = replay(b"determinism", played.actions)
    assert first == second
    assert first.state == played.states[-1]
    assert repr(first) == repr(second)
