"""What the opponent's trails of this round say about its hand (docs/bot.md, "Levers").

A seat may trail a card only when that card cannot capture, but it may choose that card
while another could capture. Players seldom do: a capture is worth more than a trail, and a
Basra is 10 points. So after a trail, hands that held a card able to capture, and above all
one able to clear the floor, are less likely. Every card the opponent holds now was in its
hand at each of its plays of this round (hands are refilled only when both are empty), so
each of its trails of this round speaks of its hand now.

Which plays were trails the information set tells for certain in two cases, from the floor
(kept in the order its cards were laid) and `last_capturer` alone:

- nobody has captured in this hand: every play of the hand was a trail, so the floor is the
  four dealt cards and then one card per play, in play order;
- otherwise, when the opponent is not the last capturer and has played in this round, its
  last play (the one just before this seat's turn) was a trail: the floor's last card, laid
  on the floor before it.

A lever screened for issue 18 and not kept: off unless engine.bot.levels.TRAIL_ODDS or
BASRA_ODDS is set.
"""

from __future__ import annotations

from engine.bot.moves import clearers, step_key, steps_on
from engine.cards import mask_of
from engine.facts import DECK_SIZE, FLOOR_CARDS, HAND_CARDS, ROUND_CARDS
from engine.infoset import InformationSet


def trail_floors(info: InformationSet) -> list[int]:
    """The floors (masks) the opponent certainly trailed on in this round, before its trail."""
    opponent = 1 - info.seat
    if info.opponent_hand_size >= HAND_CARDS or info.to_move != info.seat:
        return []
    if info.last_capturer is None:
        in_hands = len(info.hand) + info.opponent_hand_size
        plays = DECK_SIZE - info.deck_size - FLOOR_CARDS - in_hands
        if len(info.floor) != FLOOR_CARDS + plays:
            return []  # not a floor this hand could have: infer nothing
        first = 1 - info.dealer  # the non-dealer plays first
        return [
            mask_of(info.floor[: FLOOR_CARDS + ply])
            for ply in range(plays - (ROUND_CARDS - in_hands), plays)
            if (first + ply) % 2 == opponent
        ]
    if info.last_capturer != opponent and len(info.floor) > 1:
        return [mask_of(info.floor[:-1])]
    return []


def unlikely_cards(info: InformationSet, unseen: int) -> tuple[int, int]:
    """Of `unseen`, the cards that could have captured, and those that could have cleared the
    floor, where the opponent trailed instead."""
    capturers = basras = 0
    for floor in trail_floors(info):
        basras |= clearers(floor)
        left = unseen & ~capturers
        while left:
            bit = left & -left
            left ^= bit
            if steps_on(step_key(bit.bit_length() - 1, floor))[2]:
                capturers |= bit  # its first step takes cards: it has a plan
    return capturers & unseen, basras & unseen
