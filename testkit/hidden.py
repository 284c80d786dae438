"""Redistributing what a seat cannot see: the metamorphic move of the bot's no-peeking tests.

The opponent's hand and the undealt deck are, for a seat, one pool of unseen cards, and the
match seed is secret until the match is over. Dealing that pool out again in any order (the
opponent keeps as many cards, the deck as many) under another seed gives another valid state
that the seat cannot tell from the first; a bot that only reads what the seat has seen must
answer both alike.
"""

from __future__ import annotations

import random
from dataclasses import replace

from engine import State, check_state
from engine.rng import dealer_of_hand


def redistribute_hidden(state: State, seat: int, rnd: random.Random) -> State:
    """Return `state` with what `seat` cannot see drawn again at random.

    The cards of the opponent's hand and of the deck are dealt out again in a random order,
    and the match seed (hidden until the end) is replaced by a random one that makes the
    same seat deal this hand, so the state stays valid.
    """
    other = 1 - seat
    pool = [*state.hands[other], *state.deck]
    rnd.shuffle(pool)
    size = len(state.hands[other])
    hands = list(state.hands)
    hands[other] = tuple(pool[:size])
    seed = rnd.randbytes(16)
    while dealer_of_hand(seed, state.hand_number) != state.dealer:
        seed = rnd.randbytes(16)
    changed = replace(state, seed=seed, hands=(hands[0], hands[1]), deck=tuple(pool[size:]))
    check_state(changed)
    return changed
