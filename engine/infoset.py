"""A seat's information set: everything that seat has seen of a match, and nothing else.

The value type the bot reads. It is built from a State by `engine.view.information_set`, but
this module imports nothing that can reach the state, the deck order or the seed: what the
bot can know is what these fields hold. Every captured card was face up when it was taken,
so both piles are public; the opponent's hand and the undealt deck are known only as counts,
and together they are exactly the unseen cards.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.cards import FULL_MASK, Card, mask_of, shows_codes


@shows_codes
@dataclass(frozen=True, slots=True)
class InformationSet:
    """What `seat` has seen: own hand, the floor, both piles, the public counts and scores."""

    seat: int
    seq: int
    """Actions applied since the match began."""
    hand_number: int
    dealer: int
    to_move: int | None
    """Seat to play next; None once the match is over."""
    hand: tuple[Card, ...]
    """The seat's own hand, in the order dealt."""
    floor: tuple[Card, ...]
    captured: tuple[tuple[Card, ...], tuple[Card, ...]]
    """This hand's piles of both seats, played cards included (all were seen face up)."""
    basras: tuple[int, int]
    totals: tuple[int, int]
    carry: int
    last_capturer: int | None
    opponent_hand_size: int
    deck_size: int
    match_over: bool

    @property
    def unseen_mask(self) -> int:
        """Bitmask of the cards this seat has not seen: the opponent's hand and the deck."""
        seen = mask_of(self.hand) | mask_of(self.floor)
        seen |= mask_of(self.captured[0]) | mask_of(self.captured[1])
        return FULL_MASK & ~seen

    @property
    def floor_mask(self) -> int:
        """Bitmask of the floor cards."""
        return mask_of(self.floor)

    def public_key(self) -> bytes:
        """A canonical encoding of the whole information set (same position, same bytes)."""
        parts = [
            self.seat,
            self.seq,
            self.hand_number,
            self.dealer,
            -1 if self.to_move is None else self.to_move,
            mask_of(self.hand),
            mask_of(self.floor),
            mask_of(self.captured[0]),
            mask_of(self.captured[1]),
            *self.basras,
            *self.totals,
            self.carry,
            -1 if self.last_capturer is None else self.last_capturer,
            self.opponent_hand_size,
            self.deck_size,
            int(self.match_over),
        ]
        return b"".join((p + 1).to_bytes(8, "big") for p in parts)
