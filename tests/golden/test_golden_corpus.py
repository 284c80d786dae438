"""The golden corpus, in process: every recorded request still gets its recorded answer.

Each request's bytes go through the server's own request reader, handlers and response
serializer (the path grpc takes in the server); the answer must be the recorded bytes, or the
recorded refusal: status code, details message and ErrorInfo (reason, domain, metadata).
The corpus is also checked against itself (its JSON is its bytes) and for what it covers.
"""

from __future__ import annotations

from collections import Counter

import pytest
from basra.v1 import rules_pb2 as pb
from google.protobuf.message import DecodeError

from service import errors
from service.servicer import METHODS
from testkit.golden import (
    OK,
    Case,
    Outcome,
    canonical,
    in_process_runners,
    load_cases,
    load_manifest,
    match_response,
    mismatches,
    to_json,
    unb64,
)

FILES = load_manifest()["files"]
# Every reason a request can bring about. Left out: the reasons of the server's load
# (OVERLOADED, DEADLINE_*), which no request alone causes, and BatchApply's own refusal of a
# whole batch (TOO_MANY_ITEMS): the corpus holds the unary RPCs, whose Apply answers
# test_golden_batch.py sends again in batches.
REACHABLE_REASONS = (
    frozenset(errors.known_reasons()) - {errors.ServiceReason.TOO_MANY_ITEMS} - errors.LOAD_REASONS
)


def _cases_of(file: str) -> list[Case]:
    return [c for c in load_cases() if c.id.startswith(file.removesuffix(".json") + "/")]


@pytest.mark.parametrize("file", FILES)
def test_every_request_gets_the_recorded_answer_in_process(file: str) -> None:
    """Same request bytes, same response bytes (or the same refusal), case by case."""
    cases = _cases_of(file)
    assert cases
    assert mismatches(cases, in_process_runners()) == []


def test_the_stored_json_of_each_case_is_its_bytes() -> None:
    """The readable JSON of each request and response is what its bytes parse to."""
    for case in load_cases():
        request_type, response_type = METHODS[case.rpc]
        readable = case.data["request"]["json"]
        if readable is None:
            with pytest.raises(DecodeError):
                request_type.FromString(case.request)
        else:
            assert to_json(request_type.FromString(case.request)) == readable, case.id
        expect = case.data["expect"]
        if expect["code"] == OK:
            body = unb64(expect["bytes"])
            assert to_json(response_type.FromString(body)) == expect["json"], case.id
            # Stored as the recorder writes it (testkit.golden.canonical), or, for four Replay
            # refusals recorded when map entries were sorted by their encoding, with the same
            # entries in another order: the same bytes either way, rearranged.
            stored = canonical(response_type, body)
            assert stored == body or sorted(stored) == sorted(body), case.id
        else:
            assert set(expect) == {"code", "details", "error_info"}, case.id
            assert expect["error_info"]["domain"] == errors.DOMAIN, case.id


def test_the_case_ids_are_unique_and_every_file_is_listed() -> None:
    """One id per case; the manifest names every file of the corpus and counts every case."""
    cases = load_cases()
    assert len({c.id for c in cases}) == len(cases) == load_manifest()["cases"]
    assert sum(len(_cases_of(f)) for f in FILES) == len(cases)


def test_every_rpc_and_every_reachable_reason_is_in_both_signing_modes() -> None:
    """Each RPC answered and refused, and every reason a request can cause, signed or not."""
    for signed in (False, True):
        cases = [c for c in load_cases() if c.profile.startswith("signed") == signed]
        answered = {c.rpc for c in cases if c.expected.code == OK}
        refused = {c.rpc for c in cases if c.expected.code != OK}
        assert answered == refused == set(METHODS)
        reasons = {c.expected.reason for c in cases if c.expected.code != OK}
        in_replays = {
            c.data["expect"]["json"]["refusal"]["reason"]
            for c in cases
            if c.rpc == "Replay" and c.expected.code == OK and "refusal" in c.data["expect"]["json"]
        }
        wanted = REACHABLE_REASONS - ({errors.ServiceReason.BAD_SIGNATURE} if not signed else set())
        assert reasons == wanted, sorted(wanted ^ reasons)
        assert len(in_replays) >= 6


def test_the_matches_hold_every_event_and_the_rare_ones() -> None:
    """Floor fixes, sweeps, Basras (7D and Q/K), leftovers, a carry that grows and is taken."""
    kinds: Counter[str] = Counter()
    carries: set[tuple[int, int]] = set()
    basra_cards: set[str] = set()
    for case in load_cases():
        if case.rpc not in ("NewMatch", "Apply") or case.expected.code != OK:
            continue
        result = match_response(case.rpc, case.expected.body)
        for seat_events in result.seat_events:
            kinds.update(e.WhichOneof("kind") for e in seat_events.events)
        for event in result.events:
            kind = event.WhichOneof("kind")
            kinds[kind] += 1
            if kind == "hand_scored":
                carries.add((event.hand_scored.carry_before, event.hand_scored.carry_after))
            if kind == "basra_scored":
                basra_cards.add(event.basra_scored.card)
    assert set(kinds) == {f.name for f in pb.Event.DESCRIPTOR.oneofs_by_name["kind"].fields}
    assert {(0, 30), (30, 60), (60, 0)} <= carries
    assert "7D" in basra_cards and basra_cards & {"QC", "QD", "QH", "QS", "KC", "KD", "KH", "KS"}


def test_an_encoding_with_map_entries_reordered_counts_as_the_same_and_nothing_else() -> None:
    """Only the order of map entries may differ (the upb encoder changes it between runs)."""
    metadata = {"seat": "0", "toMove": "1"}
    one = pb.ReplayResponse(
        refused_index=3, refusal=pb.Refusal(reason="NOT_YOUR_TURN", message="m", metadata=metadata)
    )
    entries = [pb.Refusal(metadata={k: v}).SerializeToString() for k, v in metadata.items()]
    written = one.SerializeToString()
    # The entries are one after the other in the refusal's body; either order, same length.
    orders = [entries[0] + entries[1], entries[1] + entries[0]]
    written_as = next(o for o in orders if o in written)
    forms = [written.replace(written_as, o) for o in orders]
    assert forms[0] != forms[1]
    assert all(pb.ReplayResponse.FromString(f) == one for f in forms)
    ok = [Outcome(OK, f) for f in forms]
    assert (
        Outcome.from_json(ok[0].to_json("Replay")).body
        == Outcome.from_json(ok[1].to_json("Replay")).body
    )
    changed = forms[0].replace(b"toMove\x12\x011", b"toMove\x12\x010")
    assert canonical(pb.ReplayResponse, changed) != canonical(pb.ReplayResponse, forms[0])
    # Messages without maps are compared byte for byte: a field moved is a difference.
    state = pb.State(seq=1, dealer=1).SerializeToString()
    moved = state[2:] + state[:2]
    assert pb.State.FromString(moved) == pb.State.FromString(state)
    assert canonical(pb.State, moved) != canonical(pb.State, state)


def test_the_manifest_profiles_mark_the_signing_keys_as_test_only() -> None:
    """The corpus's signing keys are public test keys, named so nobody mistakes them."""
    profiles = load_manifest()["profiles"]
    for name, profile in profiles.items():
        keys = profile.get("signing_keys")
        assert (keys is not None) == name.startswith("signed"), name
        if keys:
            for entry in keys.split(","):
                key_id, _, secret = entry.partition(":")
                assert key_id.startswith("golden-test-")
                assert b"TEST-ONLY" in unb64(secret)
