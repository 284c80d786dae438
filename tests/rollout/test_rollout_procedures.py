"""Every documented change to a running deployment, rolled out with matches in flight.

Each procedure of docs/service.md and the Helm chart's README (testkit/procedures.py)
is walked through step by step with testkit.rollout: sixteen matches go on while pods of the
next configuration replace those of the last one, every call going to a pod drawn at random.
No call may be refused or lost, and every pod must drain and exit 0. Two more rollouts show
that the harness sees what the procedures avoid: keys added without the migration window, and
a new key put first in one step.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from testkit import otlp, releases
from testkit.pki import issue, make_pki
from testkit.procedures import OFF, REQUIRED, VARIANTS, Setting, procedure, signing
from testkit.releases import Release
from testkit.rollout import Rollout, failures_by_kind

# Each rollout takes seconds (under ten on a quiet machine); a stuck one fails here, well
# before the suite's own limit, and its pods are stopped on the way out.
pytestmark = pytest.mark.timeout(120)

CASES = [(name, variant) for name, variants in VARIANTS.items() for variant in variants]
BAD_SIGNATURE = ("UNAUTHENTICATED", "BAD_SIGNATURE")


@pytest.fixture(scope="session")
def last_release(tmp_path_factory: pytest.TempPathFactory) -> Release:
    """The last release, built from the repository's history."""
    return releases.build(releases.LAST_RELEASE, tmp_path_factory.mktemp("release") / "tree")


@pytest.fixture(scope="module")
def setting(tmp_path_factory: pytest.TempPathFactory, last_release: Release) -> Iterator[Setting]:
    """Certificates (two server certificates of one CA, one of another), the last release, a
    collector."""
    directory = tmp_path_factory.mktemp("pki")
    pki = make_pki(directory)
    renewed = issue(directory, "renewed", pki.ca, "server")
    other_ca = issue(directory, "renewal-ca")
    elsewhere = issue(directory, "elsewhere", other_ca, "server")
    with otlp.receiving(keep=False) as receiver:
        yield Setting(pki, renewed, other_ca, elsewhere, last_release, receiver.endpoint)


def check_clean(rollout: Rollout) -> None:
    """No call refused, lost or answered wrong; every pod answered and drained to exit 0."""
    tally = rollout.tally
    assert tally.failures == [], (failures_by_kind(tally.failures), tally.failures[:3])
    assert [pod.exit_code for pod in rollout.retired] == [0] * len(rollout.retired)
    for pod in rollout.retired:
        assert tally.by_pod[pod.spec.name] > 0, pod.spec.name
        assert pod.served.find("stopped"), pod.spec.name
    assert tally.calls["Apply"] > 0 and tally.calls["NewMatch"] >= 16
    crossed = sum(tally.crossings.values())
    print(  # shown with -s: what one walk-through checked
        f"{sum(tally.calls.values())} calls ({crossed} with a state another configuration "
        f"made), {tally.matches} matches begun, {tally.finished} finished, "
        f"{len(rollout.retired)} pods drained"
    )


@pytest.mark.parametrize(("name", "variant"), CASES, ids=[f"{n}-{v}".strip("-") for n, v in CASES])
def test_each_documented_procedure_rolls_out_with_matches_in_flight(
    name: str, variant: str, setting: Setting
) -> None:
    """Step by step as documented, waits included: no refusal, no lost call, clean drains."""
    plan = procedure(name, variant, setting)
    with Rollout(plan.first, seed=f"{name}/{variant}") as rollout:
        for step in plan.steps:
            if step.wait:
                rollout.wait_for_every_match()
            rollout.roll_to(step.spec)
        if plan.back:
            rollout.roll_to(plan.first)
        rollout.wait_for_every_match()  # and the matches go on in the last configuration
    check_clean(rollout)
    stepped = len(plan.steps) + plan.back
    assert len(rollout.retired) == stepped + 1


def test_keys_added_without_the_window_refuse_matches_in_progress() -> None:
    """Off to required in one rollout: a plain state reaching a new pod is refused."""
    with Rollout(OFF, seed="no-window") as rollout:
        rollout.roll_to(REQUIRED)
    failures = rollout.tally.failures
    assert failures, "the harness must see the refusals"
    assert set(failures_by_kind(failures)) == {BAD_SIGNATURE}
    assert {(f.pod, f.state_from) for f in failures} == {("k1", "off")}


def test_a_new_key_put_first_in_one_step_is_refused_mid_rollout() -> None:
    """k1 to k2,k1 in one rollout: the pods not yet updated refuse what k2 signs."""
    with Rollout(REQUIRED, seed="two-step") as rollout:
        rollout.roll_to(signing("k2,k1", "k2", "k1"))
    failures = rollout.tally.failures
    assert failures, "the harness must see the refusals"
    assert set(failures_by_kind(failures)) == {BAD_SIGNATURE}
    assert {(f.pod, f.state_from, f.metadata) for f in failures} == {
        ("k1", "k2,k1", (("keyId", "k2"),))
    }
