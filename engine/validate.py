"""Consistency check of a state received from outside; the first problem found is named."""

from __future__ import annotations

from engine import rng
from engine.cards import FULL_MASK, code, is_sweeper
from engine.errors import Reason, RuleError
from engine.facts import (
    BASRA_POINTS,
    DECK_AFTER_DEAL,
    DECK_SIZE,
    HAND_CARDS,
    ITEM_POINTS,
    MAJORITY_POINTS,
    MAX_LABEL_CHARS,
    MAX_SEED_BYTES,
    MIN_SEED_BYTES,
    PLAYS_PER_HAND,
    ROUND_CARDS,
    SEATS,
)
from engine.scoring import match_winner
from engine.state import State, Status

# A sanity bound, not a rule: far beyond any real match, it keeps the checks below finite.
MAX_HAND_NUMBER = 100_000
# Points one hand can add to both totals and the carry together: the majority, every J, A,
# the 2C and the 10D, and a Basra on every play.
MAX_POINTS_PER_HAND = MAJORITY_POINTS + ITEM_POINTS + BASRA_POINTS * PLAYS_PER_HAND
# A capture puts at least two cards on the pile: the played card and a floor card.
MIN_CARDS_PER_CAPTURE = 2


def is_label(label: object) -> bool:
    """Whether `label` may name a seat: printable text of at most MAX_LABEL_CHARS characters."""
    return isinstance(label, str) and len(label) <= MAX_LABEL_CHARS and label.isprintable()


def check_seat(seat: object) -> None:
    """Raise INVALID_SEAT unless `seat` is one of the two seats."""
    if type(seat) is not int or seat not in SEATS:
        raise RuleError(
            Reason.INVALID_SEAT, f"Seat {seat} does not exist; seats are 0 and 1.", seat=str(seat)
        )


def _bad(problem: str, **details: str | int) -> RuleError:
    return RuleError(Reason.INVALID_STATE, f"The state is inconsistent: {problem}.", **details)


def check_state(state: State) -> None:
    """Raise INVALID_STATE naming the first inconsistency of `state`; return None if sound."""
    seed = state.seed
    if not rng.is_seed(seed):
        raise _bad(f"the seed must be {MIN_SEED_BYTES} to {MAX_SEED_BYTES} bytes")
    if not isinstance(state.status, Status):
        raise _bad("the status is unknown")
    if type(state.hand_number) is not int or not 1 <= state.hand_number <= MAX_HAND_NUMBER:
        raise _bad(f"the hand number must be 1 to {MAX_HAND_NUMBER}", field="hand_number")
    if type(state.dealer) is not int or state.dealer not in SEATS:
        raise _bad("the dealer must be seat 0 or 1", field="dealer")
    expected_dealer = rng.dealer_of_hand(seed, state.hand_number)
    if state.dealer != expected_dealer:
        raise _bad(
            f"seat {expected_dealer} deals hand {state.hand_number} of this seed",
            field="dealer",
        )
    for seat, label in enumerate(state.labels):
        if not is_label(label):
            raise _bad(
                f"the label of seat {seat} is not printable text of at most {MAX_LABEL_CHARS}"
            )
    _check_cards(state)
    _check_counts(state)
    if state.status is Status.IN_PROGRESS:
        _check_in_progress(state)
    else:
        _check_over(state)


_EVERY_CARD = list(range(DECK_SIZE))
_INT_ONLY = {int}


def _check_cards(state: State) -> None:
    everything = (
        *state.deck,
        *state.hands[0],
        *state.hands[1],
        *state.floor,
        *state.captured[0],
        *state.captured[1],
        *state.unclaimed,
    )
    # Fast path for the usual sound state (52 ints that sort to 0..51, so each card once); the
    # walk below names the first problem otherwise. The type test comes first: sorting other
    # values could fail, and True or 1.0 would compare equal to a card.
    if len(everything) == DECK_SIZE and set(map(type, everything)) == _INT_ONLY:
        ordered = sorted(everything)
        if ordered == _EVERY_CARD:
            return
    seen = 0
    zones = (
        ("deck", state.deck),
        ("hand of seat 0", state.hands[0]),
        ("hand of seat 1", state.hands[1]),
        ("floor", state.floor),
        ("pile of seat 0", state.captured[0]),
        ("pile of seat 1", state.captured[1]),
        ("unclaimed leftovers", state.unclaimed),
    )
    for name, cards in zones:
        for card in cards:
            if type(card) is not int or not 0 <= card < DECK_SIZE:
                raise _bad(f"the {name} holds something that is not a card", zone=name)
            bit = 1 << card
            if seen & bit:
                raise _bad(f"card {code(card)} appears twice", card=code(card), zone=name)
            seen |= bit
    if seen != FULL_MASK:
        missing = next(c for c in range(DECK_SIZE) if not seen >> c & 1)
        raise _bad(f"card {code(missing)} is missing", card=code(missing))


def _check_counts(state: State) -> None:
    for field, pair in (("totals", state.totals), ("basras", state.basras)):
        if len(pair) != len(SEATS) or not all(type(x) is int and x >= 0 for x in pair):
            raise _bad(f"{field} must be two non-negative integers", field=field)
    carry = state.carry
    if type(carry) is not int or carry < 0 or carry % MAJORITY_POINTS:
        raise _bad(f"the carry must be a non-negative multiple of {MAJORITY_POINTS}", field="carry")
    finished_hands = state.hand_number - (1 if state.status is Status.IN_PROGRESS else 0)
    if carry > MAJORITY_POINTS * finished_hands:
        raise _bad("the carry is larger than the hands played allow", field="carry")
    if sum(state.totals) + carry > MAX_POINTS_PER_HAND * finished_hands:
        raise _bad("the totals are larger than the hands played allow", field="totals")
    for seat in SEATS:
        if MIN_CARDS_PER_CAPTURE * state.basras[seat] > len(state.captured[seat]):
            raise _bad(f"seat {seat} has more Basras than its pile allows", seat=seat)
    if type(state.seq) is not int or state.seq < 0:
        raise _bad("the sequence number must be a non-negative integer", field="seq")
    last = state.last_capturer
    if last is not None and (type(last) is not int or last not in SEATS):
        raise _bad("the last capturer must be seat 0, seat 1 or nobody", field="last_capturer")
    piles = (len(state.captured[0]), len(state.captured[1]))
    if last is None and (piles[0] or piles[1]):
        raise _bad("cards were captured but there is no last capturer", field="last_capturer")
    if last is not None and not piles[last]:
        raise _bad(f"seat {last} is the last capturer but its pile is empty", field="last_capturer")


def _check_in_progress(state: State) -> None:
    if state.winner is not None:
        raise _bad("a match in progress has no winner", field="winner")
    if state.unclaimed:
        raise _bad("unclaimed leftovers exist only once the match is over", field="unclaimed")
    if match_winner(state.totals) is not None:
        raise _bad("the totals already decide the match", field="totals")
    deck = len(state.deck)
    if deck > DECK_AFTER_DEAL or deck % ROUND_CARDS:
        raise _bad(f"{deck} undealt cards is not a whole number of rounds", field="deck")
    dealer = state.dealer
    held = (len(state.hands[1 - dealer]), len(state.hands[dealer]))  # (non-dealer, dealer)
    if held[0] == held[1] and 1 <= held[0] <= HAND_CARDS:
        expected = 1 - dealer
    elif held[1] == held[0] + 1 and held[1] <= HAND_CARDS:
        expected = dealer
    else:
        raise _bad(
            f"hands of {held[0]} (non-dealer) and {held[1]} (dealer) cards cannot occur",
            field="hands",
        )
    if state.to_move != expected:
        raise _bad(f"seat {expected} is the one to move", field="to_move")
    plays = state.plays_in_hand
    if state.seq != PLAYS_PER_HAND * (state.hand_number - 1) + plays:
        raise _bad(
            f"the sequence number must be {PLAYS_PER_HAND * (state.hand_number - 1) + plays}",
            field="seq",
        )
    if plays == 0 and any(is_sweeper(c) for c in state.floor):
        raise _bad("a freshly dealt floor holds no J and no 7D", field="floor")


def _check_over(state: State) -> None:
    if state.deck or state.hands[0] or state.hands[1] or state.floor:
        raise _bad("a finished match has no cards in the deck, the hands or the floor")
    if state.to_move is not None:
        raise _bad("nobody moves in a finished match", field="to_move")
    if state.winner != match_winner(state.totals) or state.winner is None:
        raise _bad("the winner does not follow from the totals", field="winner")
    if state.seq != PLAYS_PER_HAND * state.hand_number:
        raise _bad(f"the sequence number must be {PLAYS_PER_HAND * state.hand_number}", field="seq")
    if state.unclaimed and (state.captured[0] or state.captured[1]):
        raise _bad("leftovers belong to nobody only if nobody captured", field="unclaimed")
