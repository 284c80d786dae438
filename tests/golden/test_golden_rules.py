"""The golden corpus against the rules, by code that is not the service's.

The recorded JSON of whole matches is replayed here with plain lists of card codes: the floor,
the hands and the piles are rebuilt from the events alone, every capture is checked against
the independent plan enumerator and every hand score against the independent scorer
(testkit/brute.py, written from docs/rules.md and sharing no code with engine/). The
states, the legal moves, the seat events and the player views of the corpus are then held
against that reconstruction. Only protobuf's own parser and JSON printer are used to read the
corpus; none of the service's reading or writing.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest
from basra.v1 import rules_pb2 as pb

from testkit import brute
from testkit.golden import OK, Case, load_cases, to_json

Json = Mapping[str, Any]
TARGET = 121


def _whole_matches() -> dict[str, list[Case]]:
    """The cases of each recorded whole match, by file, in order."""
    matches: dict[str, list[Case]] = {}
    for case in load_cases():
        file = case.id.rsplit("/", 1)[0]
        if "-match-" in file:
            matches.setdefault(file, []).append(case)
    return matches


MATCHES = _whole_matches()


def _request_state(case: Case) -> Json:
    """The state a request carries, read from its JSON (the signed bytes parsed by protobuf)."""
    request = case.data["request"]["json"]
    if request.get("signed_state"):
        data = base64.b64decode(request["signed_state"]["state"])
        return to_json(pb.State.FromString(data))
    state: Json = request["state"]
    return state


def _is_sweeper(card: str) -> bool:
    return brute.rank_of(card) == "J" or card == "7D"


@dataclass
class Table:
    """A match as the events tell it, in card codes: floor, hands, piles, points."""

    hand_number: int = 0
    dealer: int | None = None
    floor: list[str] = field(default_factory=list)
    hands: tuple[list[str], list[str]] = field(default_factory=lambda: ([], []))
    piles: tuple[list[str], list[str]] = field(default_factory=lambda: ([], []))
    basras: list[int] = field(default_factory=lambda: [0, 0])
    last_capturer: int | None = None
    totals: list[int] = field(default_factory=lambda: [0, 0])
    carry: int = 0
    winner: int | None = None
    hands_scored: int = 0
    checked_captures: int = 0

    def follow(self, events: Sequence[Json]) -> None:
        """Apply the events of one call, checking each against the rules."""
        queue = list(events)
        while queue:
            event = queue.pop(0)
            ((kind, body),) = event.items()
            getattr(self, "_" + kind)(body, queue)

    def _hand_started(self, body: Json, queue: list[Json]) -> None:
        assert body["hand_number"] == self.hand_number + 1
        if self.dealer is not None:
            assert body["dealer"] == 1 - self.dealer, "the dealer alternates every hand"
        self.hand_number, self.dealer = body["hand_number"], body["dealer"]
        self.floor, self.hands, self.piles = [], ([], []), ([], [])
        self.basras, self.last_capturer = [0, 0], None

    def _cards_dealt(self, body: Json, queue: list[Json]) -> None:
        cards = body["cards"]
        assert len(cards) == 4
        if "seat" not in body:
            assert not self.floor, "the floor is dealt once per hand, when it is empty"
            self.floor = list(cards)
            return
        assert not self.hands[body["seat"]], "cards are dealt when both hands are empty"
        self.hands[body["seat"]].extend(cards)

    def _floor_fixed(self, body: Json, queue: list[Json]) -> None:
        returned, replacements = body["returned"], body["replacements"]
        assert returned == [c for c in self.floor if _is_sweeper(c)] and returned
        assert len(replacements) == len(returned)
        self.floor = [c for c in self.floor if c not in returned] + replacements

    def _card_played(self, body: Json, queue: list[Json]) -> None:
        seat, card = body["seat"], body["card"]
        assert card in self.hands[seat]
        if len(self.hands[0]) + len(self.hands[1]) == 8 and not self.piles[0] + self.piles[1]:
            assert not any(_is_sweeper(c) for c in self.floor), "a fixed floor has no J, no 7D"
        self.hands[seat].remove(card)
        plans = brute.plans(card, self.floor)
        ((kind, taken),) = queue.pop(0).items()
        assert (taken["seat"], taken["card"]) == (seat, card)
        if kind == "trailed":
            assert not plans, f"{card} had a capture on {self.floor}, so it could not trail"
            self.floor.append(card)
            return
        assert kind == "captured"
        plan = plans[taken["plan_id"] - 1]
        assert tuple(taken["cards"]) == plan.cards
        if not _is_sweeper(card) and brute.value_of(card) is not None:
            groups = [list(g["cards"]) for g in taken["groups"]]
            brute.check_plan_parts(card, self.floor, taken["cards"], taken["same_rank"], groups)
        else:
            rank = brute.rank_of(card)
            same = [c for c in taken["cards"] if brute.rank_of(c) == rank]
            assert taken["groups"] == [] and taken["same_rank"] == (
                [] if _is_sweeper(card) else same
            )
        if plan.sweep:
            assert queue.pop(0) == {"swept": {"seat": seat, "card": card, "cards": taken["cards"]}}
        if plan.basra:
            assert queue.pop(0) == {"basra_scored": {"seat": seat, "card": card}}
            self.basras[seat] += 1
        assert not queue or not {"swept", "basra_scored"} & set(queue[0]), "no Basra is owed"
        self.floor = [c for c in self.floor if c not in taken["cards"]]
        self.piles[seat].extend([card, *taken["cards"]])
        self.last_capturer = seat
        self.checked_captures += 1

    def _leftovers_awarded(self, body: Json, queue: list[Json]) -> None:
        assert not self.hands[0] and not self.hands[1]
        assert body["cards"] == self.floor and self.floor
        assert body.get("seat") == self.last_capturer
        if self.last_capturer is not None:
            self.piles[self.last_capturer].extend(self.floor)
        self.floor = []

    def _hand_scored(self, body: Json, queue: list[Json]) -> None:
        assert not self.hands[0] and not self.hands[1] and not self.floor
        assert body["hand_number"] == self.hand_number
        scores, carry_after = brute.score(
            (self.piles[0], self.piles[1]), (self.basras[0], self.basras[1]), self.carry
        )
        assert body["carry_before"] == self.carry
        assert body["carry_after"] == carry_after
        assert len(body["seats"]) == 2
        for seat, (score, got) in enumerate(zip(scores, body["seats"], strict=True)):
            total = self.totals[seat] + score.total
            assert got == {
                "cards": len(self.piles[seat]),
                "majority": score.majority,
                "jacks": score.jacks,
                "aces": score.aces,
                "two_of_clubs": score.two_of_clubs,
                "ten_of_diamonds": score.ten_of_diamonds,
                "basras": self.basras[seat],
                "basra_points": score.basra_points,
                "hand_total": score.total,
                "running_total": total,
            }, f"hand {self.hand_number}, seat {seat}"
            self.totals[seat] = total
        self.carry = carry_after
        self.hands_scored += 1

    def _match_over(self, body: Json, queue: list[Json]) -> None:
        over = [seat for seat in (0, 1) if self.totals[seat] >= TARGET]
        assert over and self.totals[0] != self.totals[1]
        winner = over[0] if len(over) == 1 else max((0, 1), key=lambda s: self.totals[s])
        assert body == {"winner": winner, "totals": self.totals}
        self.winner = winner

    def check_state(self, state: Json) -> None:
        """A recorded state is the reconstruction, and its zones hold each card exactly once."""
        seats = state["seats"]
        zones = [*state["deck"], *state["floor"], *state["unclaimed"]]
        for seat in seats:
            zones += [*seat["hand"], *seat["captured"]]
        assert sorted(zones) == sorted(brute.ALL_CODES), "the zones are not a partition"
        assert state["floor"] == self.floor
        for s in (0, 1):
            assert seats[s]["hand"] == self.hands[s]
            assert seats[s]["captured"] == self.piles[s]
            assert (seats[s]["basras"], seats[s]["total"]) == (self.basras[s], self.totals[s])
        assert (state["hand_number"], state["dealer"], state["carry"]) == (
            self.hand_number,
            self.dealer,
            self.carry,
        )
        assert state.get("winner") == self.winner
        assert state.get("last_capturer") == self.last_capturer
        assert state["status"] == (
            "STATUS_OVER" if self.winner is not None else "STATUS_IN_PROGRESS"
        )


def _plans_json(card: str, floor: list[str]) -> list[Json]:
    """The plans of a card as the independent enumerator gives them, in the recorded form."""
    out: list[Json] = []
    for number, plan in enumerate(brute.plans(card, floor), start=1):
        out.append(
            {"id": number, "cards": list(plan.cards), "basra": plan.basra, "sweep": plan.sweep}
        )
    return out


def check_legal_moves(state: Json, moves: Json) -> None:
    """The recorded legal moves are the independent enumerator's, card by card."""
    if state["status"] == "STATUS_OVER":
        assert moves == {"moves": []}
        return
    seat = state["to_move"]
    assert moves["seat"] == seat
    hand = state["seats"][seat]["hand"]
    assert [m["card"] for m in moves["moves"]] == hand
    for move in moves["moves"]:
        expected = _plans_json(move["card"], state["floor"])
        shown = [{k: p[k] for k in ("id", "cards", "basra", "sweep")} for p in move["plans"]]
        assert shown == expected, move["card"]
        assert move["trails"] == (not expected)
        for plan in move["plans"]:
            card = move["card"]
            if not _is_sweeper(card) and brute.value_of(card) is not None:
                groups = [g["cards"] for g in plan["groups"]]
                brute.check_plan_parts(
                    card, state["floor"], plan["cards"], plan["same_rank"], groups
                )


def _hiding_deals(events: Sequence[Json], shown: int | None) -> list[Json]:
    """The events with the cards dealt to any seat but `shown` as their count."""
    expected: list[Json] = []
    for event in events:
        dealt = event.get("cards_dealt")
        if dealt is not None and "seat" in dealt and dealt["seat"] != shown:
            expected.append({"hidden_deal": {"seat": dealt["seat"], "count": len(dealt["cards"])}})
        else:
            expected.append(event)
    return expected


def check_seat_events(events: Sequence[Json], seat_events: Sequence[Json]) -> None:
    """Each seat sees every event, except the faces of the cards dealt to the other seat."""
    assert [s["seat"] for s in seat_events] == [0, 1]
    for seen in seat_events:
        assert seen["events"] == _hiding_deals(events, seen["seat"])


def check_public_events(events: Sequence[Json], public: Sequence[Json]) -> None:
    """Anybody sees every event, except the faces of the cards dealt to either seat."""
    assert public == _hiding_deals(events, None)


def _walk(cases: list[Case]) -> Iterator[tuple[Table, Case, Json]]:
    """Follow a whole match call by call; yield the table after each answered NewMatch/Apply."""
    table = Table()
    for case in cases:
        if case.rpc in ("NewMatch", "Apply") and case.expected.code == OK:
            result = case.data["expect"]["json"]
            table.follow(result["events"])
            yield table, case, result


@pytest.mark.parametrize("file", sorted(MATCHES))
def test_a_whole_match_follows_the_rules_event_by_event(file: str) -> None:
    """Captures, trails, sweeps, Basras, leftovers and every field of every hand score."""
    table = Table()
    for table, _, result in _walk(MATCHES[file]):
        table.check_state(result["state"])
        check_legal_moves(result["state"], result["legal_moves"])
        check_seat_events(result["events"], result["seat_events"])
        check_public_events(result["events"], result["public_events"])
        digest = hashlib.sha256(base64.b64decode(result["state"]["seed"])).digest()
        assert base64.b64decode(result["seed_commitment"]) == digest
    assert table.winner is not None and table.hands_scored >= 3
    assert table.checked_captures >= 40


@pytest.mark.parametrize("file", sorted(MATCHES))
def test_a_whole_match_replayed_gives_the_events_it_was_played_with(file: str) -> None:
    """Replay of the recorded actions: the events and the final state of the played match."""
    played = [r for _, _, r in _walk(MATCHES[file])]
    mode = file.split("-", maxsplit=1)[0]
    replays = [
        c
        for c in load_cases()
        if c.id.startswith(f"{mode}-replay/") and c.data["note"] == "the whole match"
    ]
    seed = base64.b64decode(played[0]["state"]["seed"])
    for case in replays:
        if base64.b64decode(case.data["request"]["json"]["seed"]) != seed:
            continue
        answer = case.data["expect"]["json"]
        assert answer["events"] == [e for r in played for e in r["events"]]
        assert answer["state"] == played[-1]["state"]
        assert "refused_index" not in answer
        return
    assert "match-ties" not in file, "the whole-match replay of match-ties is missing"


def _views(public: bool) -> Iterator[Case]:
    """The answered PlayerView cases: a seat's views, or (public) the spectators'."""
    for case in load_cases():
        asked = (
            bool(case.data["request"]["json"].get("spectator"))
            if case.data["request"]["json"]
            else False
        )
        if case.rpc == "PlayerView" and case.expected.code == OK and asked == public:
            yield case


def _public_facts(state: Json) -> dict[str, Any]:
    """What anybody may see of a recorded state, as the JSON of a view shows it."""
    seats = state["seats"]
    deck = len(state["deck"])
    facts = {
        "seq": state["seq"],
        "hand_number": state["hand_number"],
        "round_number": min(6, (40 - deck) // 8 + 1),
        "dealer": state["dealer"],
        "floor": state["floor"],
        "deck_size": deck,
        "seats": [
            {
                "label": s["label"],
                "hand_size": len(s["hand"]),
                "captured_count": len(s["captured"]),
                "basras": s["basras"],
                "total": s["total"],
            }
            for s in seats
        ],
        "carry": state["carry"],
        "status": state["status"],
        "seed_commitment": base64.b64encode(
            hashlib.sha256(base64.b64decode(state["seed"])).digest()
        ).decode(),
    }
    for optional in ("to_move", "winner"):
        if optional in state:
            facts[optional] = state[optional]
    if state["status"] == "STATUS_OVER":
        facts["seed"] = state["seed"]
    return facts


def test_every_recorded_view_shows_the_seat_what_the_state_allows_and_no_more() -> None:
    """PlayerView: own hand, public counts, no seed until the end, moves only for the mover."""
    views = list(_views(public=False))
    assert len(views) >= 100
    for case in views:
        state = _request_state(case)
        seat = case.data["request"]["json"]["seat"]
        answer = case.data["expect"]["json"]
        assert "public_view" not in answer, case.id
        view = answer["view"]
        expected = {"seat": seat, "hand": state["seats"][seat]["hand"], **_public_facts(state)}
        shown = {k: v for k, v in view.items() if k != "legal_moves"}
        assert shown == expected, case.id
        if state.get("to_move") == seat:
            check_legal_moves(state, view["legal_moves"])
        else:
            assert "legal_moves" not in view, case.id


def test_every_recorded_public_view_shows_what_anybody_may_see_and_no_more() -> None:
    """PlayerView for spectators: the public facts alone, no hand, the seed only at the end."""
    views = list(_views(public=True))
    assert len(views) >= 40
    for case in views:
        state = _request_state(case)
        answer = case.data["expect"]["json"]
        assert "view" not in answer, case.id
        assert answer["public_view"] == _public_facts(state), case.id


def test_every_recorded_list_of_legal_moves_is_the_independent_one() -> None:
    """LegalMoves answers: the plans of each card of the hand to move, as the rules list them."""
    answered = [c for c in load_cases() if c.rpc == "LegalMoves" and c.expected.code == OK]
    assert len(answered) >= 50
    for case in answered:
        check_legal_moves(_request_state(case), case.data["expect"]["json"]["legal_moves"])


def test_every_recorded_state_holds_each_card_exactly_once() -> None:
    """The state of every answer: deck, hands, floor, piles and leftovers split the 52 cards."""
    count = 0
    for case in load_cases():
        answer = case.data["expect"].get("json") or {}
        if "state" in answer:
            state = answer["state"]
            zones = [*state["deck"], *state["floor"], *state["unclaimed"]]
            for seat in state["seats"]:
                zones += [*seat["hand"], *seat["captured"]]
            assert sorted(zones) == sorted(brute.ALL_CODES), case.id
            count += 1
    assert count >= 600
