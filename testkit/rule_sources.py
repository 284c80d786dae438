"""Where the rules and their worked examples are: docs/rules.md and the copies in tests/data/.

The repository holds everything the rules tests read: the worked examples, the two source
documents their quotes come from (tests/data/seeds/*.txt) and the test vectors, copied from
the specification the project started from.
"""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RULES_PAGE = REPO / "docs" / "rules.md"
DATA = REPO / "tests" / "data"
VECTORS = DATA / "vectors"
SEED_EXAMPLES = DATA / "seeds" / "examples.json"

_ID = r"([a-z]+(?:\.[a-z0-9-]+)+)"
# A rule as docs/rules.md states it, its id bold and in brackets: **[plans.order]**; a rule
# cited elsewhere, in plain brackets: [plans.order] (not a link such as [rules.md](rules.md)).
STATED = re.compile(r"\*\*\[" + _ID + r"\]\*\*")
CITED = re.compile(r"(?<!\*\*)\[" + _ID + r"\](?!\*\*|\()")
_HEADING = re.compile(r"^(#{2,3}) (.+)$", re.MULTILINE)


def stated_rules(text: str) -> list[str]:
    """The id of every rule a page states, in page order."""
    return STATED.findall(text)


def cited_rules(text: str) -> list[str]:
    """The id of every rule a page cites without stating it."""
    return CITED.findall(text)


def sections(text: str) -> dict[str, str]:
    """The page's `##` and `###` sections by heading, each up to the next heading."""
    found = list(_HEADING.finditer(text))
    ends = [m.start() for m in found[1:]] + [len(text)]
    return {m.group(2): text[m.end() : end] for m, end in zip(found, ends, strict=True)}
