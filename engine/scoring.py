"""Scoring of a finished hand (docs/rules.md section 4) and the end of the match (section 5)."""

from __future__ import annotations

from engine.cards import ACES_MASK, JACKS_MASK, card_points
from engine.events import HandScored, SeatScore
from engine.facts import (
    BASRA_POINTS,
    MAJORITY_CARDS,
    MAJORITY_POINTS,
    SEATS,
    TARGET,
    TEN_OF_DIAMONDS,
    TIE_CARDS,
    TWO_OF_CLUBS,
)


def score_hand(
    hand_number: int,
    piles: tuple[int, int],
    basras: tuple[int, int],
    carry: int,
    totals: tuple[int, int],
) -> HandScored:
    """Score a finished hand from the two piles (bitmasks), Basra counts, carry and totals."""
    counts = (piles[0].bit_count(), piles[1].bit_count())
    majority_seat = next((s for s in SEATS if counts[s] >= MAJORITY_CARDS), None)
    if majority_seat is not None:
        carry_after = 0
    elif counts == (TIE_CARDS, TIE_CARDS):
        carry_after = carry + MAJORITY_POINTS
    else:
        carry_after = carry  # nobody has the majority because leftovers belonged to nobody
    seats: list[SeatScore] = []
    for seat in SEATS:
        pile = piles[seat]
        majority = MAJORITY_POINTS + carry if seat == majority_seat else 0
        # The special cards' points item by item: the pile's cards of each item alone.
        jacks = card_points(pile & JACKS_MASK)
        aces = card_points(pile & ACES_MASK)
        two = card_points(pile & 1 << TWO_OF_CLUBS)
        ten = card_points(pile & 1 << TEN_OF_DIAMONDS)
        basra_points = BASRA_POINTS * basras[seat]
        hand_total = majority + jacks + aces + two + ten + basra_points
        seats.append(
            SeatScore(
                cards=counts[seat],
                majority=majority,
                jacks=jacks,
                aces=aces,
                two_of_clubs=two,
                ten_of_diamonds=ten,
                basras=basras[seat],
                basra_points=basra_points,
                hand_total=hand_total,
                running_total=totals[seat] + hand_total,
            )
        )
    return HandScored(hand_number, (seats[0], seats[1]), carry, carry_after)


def match_winner(totals: tuple[int, int]) -> int | None:
    """Return the winning seat after a complete hand, or None if another hand is played."""
    over = [totals[0] >= TARGET, totals[1] >= TARGET]
    if over[0] and over[1]:
        if totals[0] == totals[1]:
            return None
        return 0 if totals[0] > totals[1] else 1
    if over[0]:
        return 0
    if over[1]:
        return 1
    return None
