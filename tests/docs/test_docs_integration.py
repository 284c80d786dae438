"""docs/integration.md quotes the examples: every excerpt is the lines its link names."""

from __future__ import annotations

import re

from testkit.doc_commands import REPO, blocks

PAGE = REPO / "docs" / "integration.md"
# The link in the line that introduces an excerpt: (../examples/EXAMPLE/FILE#La-Lb)
LINK = re.compile(r"\(\.\./(examples/(?:lobby|go|java|php)/[\w./-]+)#L(\d+)-L(\d+)\)")
# The fenced blocks that quote an example, and how many each language's client must show at
# least: the Node.js lobby (js), the Go client (go), the Java client (java, and its pom: xml),
# the PHP lobby over HTTP/JSON (php).
QUOTED = {"js": 10, "go": 5, "java": 5, "xml": 1, "php": 4}


def test_every_excerpt_of_the_integration_page_is_the_code_its_link_names() -> None:
    """A change of the example that moves or alters quoted lines fails until the page follows."""
    text = PAGE.read_text(encoding="utf-8").splitlines()
    excerpts = [b for b in blocks(PAGE) if b.tag in QUOTED]
    for tag, least in QUOTED.items():
        assert sum(b.tag == tag for b in excerpts) >= least, f"fewer than {least} {tag} excerpts"
    for block in excerpts:
        intro = next(line for line in reversed(text[: block.line - 1]) if line.strip())
        link = LINK.search(intro)
        assert link, f"docs/integration.md:{block.line}: no link to the quoted lines in {intro!r}"
        path, first, last = link.group(1), int(link.group(2)), int(link.group(3))
        lines = (REPO / path).read_text(encoding="utf-8").splitlines()
        assert 1 <= first <= last <= len(lines), f"{path} has no lines {first}-{last}"
        assert block.body.splitlines() == lines[first - 1 : last], (
            f"docs/integration.md:{block.line} is not {path} lines {first}-{last}"
        )
