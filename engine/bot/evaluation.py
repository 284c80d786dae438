"""How the bot values a position it does not search further (docs/bot.md, "Evaluation").

Values are integers in thousandths of a point, from the point of view of one seat, and
count only what is still to be decided; points already in the piles are added by the search.
- Special cards and Basras count their points when they are taken (engine.bot.moves).
- The majority (30 plus the carry for 27 cards or more) is valued by the chance each seat
  has of reaching 27 from the cards both piles hold now: the cards not yet in a pile are
  taken in clumps of CLUMP cards, each clump by either seat with even odds. This is the
  "weight on the card difference", made exact where it matters: a card is worth most when
  the piles are close and nothing once a seat has 27.
- The next round: when a round ends and new cards are dealt, the seat that plays first gets
  a Basra when its new hand holds a card that clears the floor (the chance is counted from
  how many of the cards still in the deck do), and the first chance at what lies on the
  floor: 0.7 point per card and half its special points. These weights were fitted on the
  round starts of the bot's own play (benchmarks/bot_round_ends.py, docs/bot.md).
"""

from __future__ import annotations

from math import comb

from engine.bot.moves import MILLI
from engine.facts import BASRA_POINTS, DECK_SIZE, HAND_CARDS, MAJORITY_CARDS

CLUMP = 3
"""Cards one capture takes on average, for the spread of the majority estimate."""
FLOOR_CARD = 700
"""Thousandths of a point per floor card for the seat that plays first in the next round."""
FLOOR_POINTS = 500
"""Thousandths of the floor's points for the seat that plays first in the next round."""


def _share(mine: int, theirs: int) -> int:
    """Chance of taking the majority minus the other seat's, in thousandths (exact integers)."""
    rest = DECK_SIZE - mine - theirs
    if rest <= 0:
        return MILLI if mine >= MAJORITY_CARDS else -MILLI if theirs >= MAJORITY_CARDS else 0
    clumps = -(-rest // CLUMP)
    wins = losses = 0
    for taken in range(clumps + 1):
        # This seat takes `taken` of the clumps, so rest * taken / clumps of the cards.
        ways = comb(clumps, taken)
        if (mine - MAJORITY_CARDS) * clumps + rest * taken >= 0:
            wins += ways
        elif (theirs - MAJORITY_CARDS) * clumps + rest * (clumps - taken) >= 0:
            losses += ways
    total = 1 << clumps
    return (2 * MILLI * (wins - losses) + total) // (2 * total)


MAJORITY_SHARE: tuple[tuple[int, ...], ...] = tuple(
    tuple(
        _share(mine, theirs) if mine + theirs <= DECK_SIZE else 0 for theirs in range(DECK_SIZE + 1)
    )
    for mine in range(DECK_SIZE + 1)
)
"""MAJORITY_SHARE[mine][theirs]: the seat's majority chance minus the other's, thousandths."""


def _exposure(unseen: int, clearing: int, cards: int) -> int:
    """Thousandths of a point: a Basra times the chance `cards` of `unseen` hold a clearer."""
    if cards > unseen or cards <= 0:
        return 0
    miss = comb(unseen - clearing, cards)
    total = comb(unseen, cards)
    return (2 * MILLI * BASRA_POINTS * (total - miss) + total) // (2 * total)


EXPOSURE: tuple[tuple[tuple[int, ...], ...], ...] = tuple(
    tuple(
        tuple(_exposure(unseen, k, cards) for k in range(unseen + 1))
        for unseen in range(DECK_SIZE + 1)
    )
    for cards in range(HAND_CARDS + 1)
)
"""EXPOSURE[cards][unseen][clearing]: value of a Basra chance, in thousandths of a point."""
