"""An independent, naive capture-plan enumerator and hand scorer (docs/rules.md 1, 3, 4).

It shares no code with engine/: cards are handled as text codes, and every rule is written
out as plainly as possible (all subsets, all collections of disjoint groups) so that it is
easy to check by eye. It is slow on big floors, which is fine for an oracle: the engine's
tests, the golden corpus and the engine benchmark compare the engine with it.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations

RANK_NAMES = ["A", "2", "3", "4", "5", "6", "7", "8", "9", "10", "J", "Q", "K"]
SUIT_NAMES = ["C", "D", "H", "S"]
ALL_CODES = [rank + suit for rank in RANK_NAMES for suit in SUIT_NAMES]
MAX_OFFERED = 12


def split_code(text: str) -> tuple[str, str]:
    """Split a text code into its rank and suit names, refusing anything that is not a card."""
    if not isinstance(text, str) or len(text) < 2:
        raise ValueError(f"not a card code: {text!r}")
    rank, suit = text[:-1], text[-1]
    if rank not in RANK_NAMES or suit not in SUIT_NAMES:
        raise ValueError(f"not a card code: {text!r}")
    return rank, suit


def index_of(text: str) -> int:
    """Return the canonical index (rank position * 4 + suit position) of a card code."""
    rank, suit = split_code(text)
    return RANK_NAMES.index(rank) * 4 + SUIT_NAMES.index(suit)


def code_of(index: int) -> str:
    """Return the card code of a canonical index 0..51."""
    if not 0 <= index < 52:
        raise ValueError(f"not a card index: {index!r}")
    return RANK_NAMES[index // 4] + SUIT_NAMES[index % 4]


def rank_of(text: str) -> str:
    """Return the rank name of a card code."""
    return split_code(text)[0]


def value_of(text: str) -> int | None:
    """Return the numeric value of a card (A=1, 2..10), None for J, Q and K."""
    rank = rank_of(text)
    if rank == "A":
        return 1
    if rank in ("J", "Q", "K"):
        return None
    return int(rank)


def canonical(cards: list[str]) -> list[str]:
    """Return the cards sorted in canonical order."""
    return sorted(cards, key=index_of)


@dataclass(frozen=True)
class BrutePlan:
    """One offered plan: the floor cards taken (canonical order) and whether it is a Basra."""

    cards: tuple[str, ...]
    basra: bool
    sweep: bool


def sum_groups(value: int, others: list[str]) -> list[frozenset[str]]:
    """Return every set of 2 or more cards of `others` whose numeric values add up to `value`."""
    # A group has 2+ cards of value 1 or more, so a card worth `value` or more never joins one.
    numeric = [c for c in others if (value_of(c) or value) < value]
    found: list[frozenset[str]] = []
    for size in range(2, len(numeric) + 1):
        for combo in combinations(numeric, size):
            if sum(value_of(c) or 0 for c in combo) == value:
                found.append(frozenset(combo))
    return found


def disjoint_collections(groups: list[frozenset[str]]) -> list[list[frozenset[str]]]:
    """Return every collection (possibly empty) of pairwise disjoint groups."""
    out: list[list[frozenset[str]]] = []

    def extend(start: int, chosen: list[frozenset[str]], used: frozenset[str]) -> None:
        out.append(list(chosen))
        for i in range(start, len(groups)):
            if not groups[i] & used:
                extend(i + 1, [*chosen, groups[i]], used | groups[i])

    extend(0, [], frozenset())
    return out


def is_maximal(collection: list[frozenset[str]], groups: list[frozenset[str]]) -> bool:
    """A collection is maximal when no further group can join it without reusing a card."""
    used: frozenset[str] = frozenset().union(*collection) if collection else frozenset()
    return all(g & used for g in groups)


def numeric_plans(card: str, floor: list[str]) -> list[frozenset[str]]:
    """Return the captured sets of a numeric card (A..10, not a played 7D), deduplicated."""
    value = value_of(card)
    assert value is not None
    same = frozenset(c for c in floor if rank_of(c) == rank_of(card))
    others = [c for c in floor if c not in same]
    groups = sum_groups(value, others)
    taken: list[frozenset[str]] = []
    for collection in disjoint_collections(groups):
        if not is_maximal(collection, groups):
            continue
        captured = same.union(*collection)
        if captured and captured not in taken:
            taken.append(captured)
    return taken


def order_key(captured: frozenset[str]) -> tuple[int, list[int]]:
    """More cards first; equal counts by the sorted canonical indices, lexicographically."""
    return (-len(captured), sorted(index_of(c) for c in captured))


def plans(card: str, floor: list[str]) -> list[BrutePlan]:
    """Return the plans offered for playing `card` on `floor`, in id order; empty: it trails."""
    split_code(card)
    for c in floor:
        split_code(c)
    if len(set(floor)) != len(floor) or card in floor:
        raise ValueError("a card appears twice")
    if not floor:
        return []
    rank = rank_of(card)
    if rank == "J" or card == "7D":
        basra = (
            card == "7D" and len(floor) <= 10 and not any(rank_of(c) in ("Q", "K") for c in floor)
        )
        return [BrutePlan(tuple(canonical(floor)), basra, True)]
    if rank in ("Q", "K"):
        same = [c for c in floor if rank_of(c) == rank]
        if not same:
            return []
        return [BrutePlan(tuple(canonical(same)), len(same) == len(floor), False)]
    taken = sorted(numeric_plans(card, floor), key=order_key)[:MAX_OFFERED]
    return [BrutePlan(tuple(canonical(list(t))), len(t) == len(floor), False) for t in taken]


def check_plan_parts(
    card: str, floor: list[str], cards: list[str], same_rank: list[str], groups: list[list[str]]
) -> None:
    """Assert that a numeric plan's parts are sound: R, disjoint groups summing to the value."""
    value = value_of(card)
    assert value is not None
    assert canonical(same_rank) == canonical([c for c in floor if rank_of(c) == rank_of(card)])
    seen = set(same_rank)
    for group in groups:
        assert len(group) >= 2
        assert sum(value_of(c) or 100 for c in group) == value
        assert not seen & set(group), "groups overlap each other or the same-rank cards"
        seen |= set(group)
    assert seen == set(cards)
    left = [c for c in floor if c not in seen and rank_of(c) != rank_of(card)]
    assert not sum_groups(value, left), "a further group could be added: not maximal"


def all_maximal_captured_sets(card: str, floor: list[str]) -> list[frozenset[str]]:
    """Every deduplicated captured set of a numeric card, in offered order, without the cap."""
    return sorted(numeric_plans(card, floor), key=order_key)


@dataclass(frozen=True)
class BruteScore:
    """One seat's points for a hand."""

    majority: int
    jacks: int
    aces: int
    two_of_clubs: int
    ten_of_diamonds: int
    basra_points: int

    @property
    def total(self) -> int:
        """Sum of all items."""
        return (
            self.majority
            + self.jacks
            + self.aces
            + self.two_of_clubs
            + self.ten_of_diamonds
            + self.basra_points
        )


def score(
    piles: tuple[list[str], list[str]], basras: tuple[int, int], carry: int
) -> tuple[tuple[BruteScore, BruteScore], int]:
    """Score a hand from the two piles (codes); return both seats' points and the new carry."""
    counts = [len(piles[0]), len(piles[1])]
    winners = [seat for seat in (0, 1) if counts[seat] >= 27]
    if winners:
        new_carry = 0
    elif counts == [26, 26]:
        new_carry = carry + 30
    else:
        new_carry = carry
    out = []
    for seat in (0, 1):
        pile = piles[seat]
        out.append(
            BruteScore(
                majority=30 + carry if seat in winners else 0,
                jacks=sum(1 for c in pile if rank_of(c) == "J"),
                aces=sum(1 for c in pile if rank_of(c) == "A"),
                two_of_clubs=2 if "2C" in pile else 0,
                ten_of_diamonds=3 if "10D" in pile else 0,
                basra_points=10 * basras[seat],
            )
        )
    return (out[0], out[1]), new_carry
