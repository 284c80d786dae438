"""Every link of the documentation leads to a file of the repository, and every anchor to a heading.

The pages stand alone: a link or a relative path that leaves the repository (the specification
the project started from lies beside it in CI, and nowhere for a reader) fails here, as does
a link to a file or a section that was moved or renamed.
"""

from __future__ import annotations

import re
from pathlib import Path

from testkit.doc_commands import REPO, pages

_FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)
_LINK = re.compile(r"\[[^\]\n]*\]\(([^)\s]+)\)")
_SPAN = re.compile(r"`(\.\./[^`\s]*)`")
_HEADING = re.compile(r"^#{1,6} (.+)$", re.MULTILINE)
# A relative path in a code span that is not the repository's: the kustomize overlay example
# of docs/deploy.md names paths from the reader's overlay directory.
OVERLAY_PAGE = "docs/deploy.md"


def _prose(page: Path) -> str:
    return _FENCE.sub("", page.read_text(encoding="utf-8"))


def _anchors(page: Path) -> set[str]:
    """The anchors GitHub gives the page's headings: lower case, punctuation dropped."""
    return {
        re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")
        for heading in _HEADING.findall(_prose(page))
    }


def _inside(path: Path) -> bool:
    return path.resolve().is_relative_to(REPO)


def test_every_relative_link_leads_to_a_file_or_heading_of_the_repository() -> None:
    """Links to web pages aside, each target exists inside the repository, anchor included."""
    broken = []
    checked = 0
    for page in pages():
        name = page.relative_to(REPO).as_posix()
        for target in _LINK.findall(_prose(page)):
            if re.match(r"[a-z]+:", target):
                continue
            path, _, anchor = target.partition("#")
            destination = (page.parent / path) if path else page
            checked += 1
            if not _inside(destination) or not destination.exists():
                broken.append(f"{name}: {target}")
            elif anchor and destination.suffix == ".md" and anchor not in _anchors(destination):
                broken.append(f"{name}: {target} (no such heading)")
    assert broken == []
    assert checked >= 30


def test_no_page_names_a_path_outside_the_repository() -> None:
    """A relative path written in a page (`../...`) stays inside the repository."""
    outside = [
        f"{page.relative_to(REPO).as_posix()}: {span}"
        for page in pages()
        if page.relative_to(REPO).as_posix() != OVERLAY_PAGE
        for span in _SPAN.findall(_prose(page))
        if not _inside(page.parent / span)
    ]
    assert outside == []
    assert not any("shared/" in _prose(page) for page in pages())
