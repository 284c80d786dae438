"""The shell commands the documentation shows, read from the pages themselves.

A command is a line of a fenced block marked sh, bash, shell or console (a line ending in a
backslash continues on the next; the lines of `# ` right after a command are what it prints),
or an inline code span that starts with a program (a `.venv/bin/...` or `.ci/...` path, or
one of PROGRAMS, after any `NAME=value` settings) and gives it arguments: a path program with
at least one, another with at least two or with a flag (so `basra-rules serve` names a
subcommand while `basra-rules serve --help` is a command).

A block marked `sh historical` (the word HISTORICAL after the shell's name) holds commands as
they were run for a figure measured against an older version of the code, kept beside that
figure with its commit and date. They are history, not instructions: they may need that
version (its files, its options, a checkout of its commit), so nobody is expected to run
them, and the documented-commands test does not.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHELL_TAGS = frozenset({"sh", "bash", "shell", "console"})
# Tags of the other fenced blocks the pages hold; a block without a tag is refused, so that a
# command block cannot hide from the extraction under no tag or a new one.
OTHER_TAGS = frozenset({"json", "yaml", "text", "vector", "js", "go", "java", "xml", "php"})
# The word after a shell block's tag that marks its commands as historical (module docstring).
HISTORICAL = "historical"
PROGRAMS = frozenset(
    {
        "basra-rules",
        "bash",
        "buf",
        "docker",
        "ghz",
        "git",
        "grpcurl",
        "helm",
        "kubectl",
        "mypy",
        "npm",
        "pip",
        "protoc",
        "pytest",
        "python",
        "python3",
        "ruff",
        "taskset",
    }
)
# Programs of the project's environment, which are on no PATH after the quick start.
ENVIRONMENT_PROGRAMS = ("basra-rules", "python", "python3", "pytest", "pip", "ruff", "mypy")
_FENCE = re.compile(r"^```([^\n`]*)\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)
_INLINE = re.compile(r"(?<!`)`([^`\n]+)`(?!`)")
SETTING = re.compile(r"^[A-Z_][A-Z0-9_]*=\S*$")


@dataclass(frozen=True)
class Command:
    """One documented command: where it is, its text, and what the page says it prints."""

    page: str
    line: int
    text: str
    prints: tuple[str, ...] = ()
    historical: bool = False
    """Whether it was run for a figure of an older version (a `sh historical` block)."""


@dataclass(frozen=True)
class Block:
    """One fenced block: where it starts, its info string and its body."""

    page: str
    line: int
    info: str
    body: str

    @property
    def tag(self) -> str:
        """What the block holds: the first word of its info string (sh, json, ...)."""
        return self.info.split()[0] if self.info else ""

    @property
    def historical(self) -> bool:
        """Whether its commands are historical (module docstring)."""
        return self.info.split()[1:] == [HISTORICAL]

    @property
    def well_marked(self) -> bool:
        """Whether the info string is a known tag, or a shell tag marked historical."""
        words = self.info.split()
        if len(words) == 1:
            return words[0] in SHELL_TAGS | OTHER_TAGS
        return self.historical and self.tag in SHELL_TAGS


def pages() -> list[Path]:
    """The documentation pages whose commands must work as written."""
    return [
        REPO / "README.md",
        REPO / "BENCHMARKS.md",
        REPO / "RELIABILITY.md",
        *sorted((REPO / "docs").glob("*.md")),
        *sorted((REPO / "docs" / "history").glob("*.md")),
    ]


def blocks(page: Path) -> list[Block]:
    """Every fenced block of a page."""
    text = page.read_text(encoding="utf-8")
    name = page.relative_to(REPO).as_posix()
    return [
        Block(name, text.count("\n", 0, m.start()) + 1, m.group(1).strip(), m.group(2))
        for m in _FENCE.finditer(text)
    ]


def without_comment(line: str) -> str:
    """The line without a trailing `# comment` (a # outside quotes, after a blank)."""
    quote = ""
    for i, char in enumerate(line):
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (i == 0 or line[i - 1] in " \t"):
            return line[:i].rstrip()
    return line.rstrip()


def _block_commands(block: Block) -> list[Command]:
    found: list[Command] = []
    pending = ""
    start = 0
    for offset, raw in enumerate(block.body.splitlines(), start=block.line + 1):
        if pending:
            pending += " " + raw.strip()
        else:
            start = offset
            stripped = raw.strip()
            if not stripped:
                continue
            if stripped.startswith("#"):
                if (
                    found
                    and stripped.startswith("# ")
                    and found[-1].line == start - 1 - len(found[-1].prints)
                ):
                    last = found[-1]
                    found[-1] = Command(
                        last.page,
                        last.line,
                        last.text,
                        (*last.prints, stripped[2:]),
                        last.historical,
                    )
                continue
            pending = stripped
        if pending.endswith("\\"):
            pending = pending[:-1].rstrip()
            continue
        text = " ".join(without_comment(pending).split())
        found.append(Command(block.page, start, text, historical=block.historical))
        pending = ""
    return found


def is_inline_command(span: str) -> bool:
    """Whether an inline code span is a command rather than the name of one (module docstring)."""
    words = span.split()
    while words and SETTING.match(words[0]):
        words = words[1:]
    if not words:
        return False
    program, arguments = words[0], words[1:]
    if program.startswith((".venv/bin/", ".ci/", "./")):
        return len(arguments) >= 1
    if program not in PROGRAMS:
        return False
    return len(arguments) >= 2 or any(a.startswith("-") for a in arguments)


def programs(text: str) -> list[str]:
    """The program of each simple command of a line (after settings and a `taskset -c N`)."""
    found = []
    for part in re.split(r"[;&|()]+|\bdo\b|\bthen\b", text):
        words = part.split()
        while words and SETTING.match(words[0]):
            words = words[1:]
        if words[:1] == ["taskset"]:
            words = words[3:] if words[1:2] == ["-c"] else words[1:]
        if words:
            found.append(words[0])
    return found


def commands() -> list[Command]:
    """Every documented command, page by page, in the order of the page."""
    found: list[Command] = []
    for page in pages():
        text = page.read_text(encoding="utf-8")
        name = page.relative_to(REPO).as_posix()
        for block in blocks(page):
            if block.tag in SHELL_TAGS:
                found += _block_commands(block)
        prose = _FENCE.sub(lambda m: "\n" * m.group(0).count("\n"), text)
        for match in _INLINE.finditer(prose):
            span = match.group(1)
            if is_inline_command(span):
                line = prose.count("\n", 0, match.start()) + 1
                found.append(Command(name, line, " ".join(span.split())))
    return found
