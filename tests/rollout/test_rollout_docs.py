"""The procedures that change a running deployment read the same wherever they are given, and
each is the rollout tests/rollout/test_rollout_procedures.py makes.

A procedure is a block of a page between `<!-- procedure: NAME -->` and
`<!-- end of procedure -->`. docs/service.md and the Helm chart's README each hold every
procedure, and every copy of a procedure (docs/deploy.md holds the upgrade too) is the same
text, character for character; the procedures are those the rollout tests know, each with as
many numbered steps as it has rollouts, and a step that begins "Once" exactly where the test
waits for every match to hold a state of the configuration before.
"""

from __future__ import annotations

from testkit.pki import PKI, Issued
from testkit.procedures import REPO, STEP, VARIANTS, Setting, blocks, procedure
from testkit.releases import LAST_RELEASE, Release

PAGES = ("docs/service.md", "helm/basra-rules/README.md", "docs/deploy.md")
EVERYWHERE = ("docs/service.md", "helm/basra-rules/README.md")
Pages = dict[str, dict[str, str]]


def copy_problems(by_page: Pages) -> list[str]:
    """Procedures missing from a page that must give them all, and copies that differ."""
    problems = [
        f"{page} lacks {sorted(set(VARIANTS) - set(by_page[page]))} or has others"
        for page in EVERYWHERE
        if set(by_page[page]) != set(VARIANTS)
    ]
    for name in VARIANTS:
        copies = {page: found[name] for page, found in by_page.items() if name in found}
        if len(set(copies.values())) > 1:
            problems.append(f"{name} differs between {sorted(copies)}")
    return problems


def _placeholder_setting() -> Setting:
    """A Setting whose objects are never started: only the steps' shape is read."""
    nothing = Issued(b"", b"", "", "")
    pki = PKI(nothing, nothing, nothing, nothing)
    return Setting(
        pki, nothing, nothing, nothing, Release(LAST_RELEASE, REPO), "http://127.0.0.1:1"
    )


def step_problems(name: str, text: str) -> list[str]:
    """How a procedure's numbered steps differ from the rollouts the test makes of it."""
    steps = STEP.findall(text)
    problems = []
    if [int(n) for n, _ in steps] != list(range(1, len(steps) + 1)):
        problems.append(f"{name}: steps are not numbered 1..{len(steps)}")
    waits = [first == "Once" for _, first in steps]
    for variant in VARIANTS[name]:
        plan = procedure(name, variant, _placeholder_setting())
        if waits != [step.wait for step in plan.steps]:
            problems.append(f"{name} ({variant}): steps or waits are not the test's")
    return problems


def test_every_copy_of_a_procedure_is_the_same_text() -> None:
    """service.md and the chart's README give every procedure; each copy reads the same."""
    by_page = {page: blocks(page) for page in PAGES}
    assert copy_problems(by_page) == []
    assert "upgrade-release" in by_page["docs/deploy.md"]


def test_each_procedure_has_a_step_per_rollout_and_waits_where_the_test_waits() -> None:
    """Numbered steps 1..n, n the rollouts; a step beginning "Once" is a waiting one."""
    for name, text in blocks("docs/service.md").items():
        assert step_problems(name, text) == []


def test_a_changed_copy_or_step_is_found() -> None:
    """The checks can fail: a word changed in one copy, a step the test does not make, a
    missing wait, a procedure missing from a page."""
    by_page = {page: blocks(page) for page in PAGES}
    text = by_page["docs/service.md"]["rotate-signing-key"]
    changed = {**by_page["docs/deploy.md"], "rotate-signing-key": text.replace("second", "1st")}
    assert copy_problems({**by_page, "docs/deploy.md": changed})
    assert step_problems("rotate-signing-key", text + "\n4. Then celebrate.\n")
    assert step_problems("rotate-signing-key", text.replace("3. Once", "3. After"))
    readme = dict(by_page["helm/basra-rules/README.md"])
    del readme["turn-signing-off"]
    assert copy_problems({**by_page, "helm/basra-rules/README.md": readme})
