"""What the pages state of the contract and the server's limits, held against the source of each
fact: README's table of RPCs against the service in the proto, the multiples of
`--max-message-bytes` against the server's factors, a flag's default stated in prose against
`basra-rules serve --help`, and the two pages that list what the commands need against each
other (docs/history states past figures on purpose and is left out)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from service.server import RECEIVE_FACTOR, RECEIVE_HEADROOM_BYTES
from testkit.doc_commands import REPO
from testkit.rpcs import methods

PAGES = [
    REPO / "README.md",
    REPO / "RELIABILITY.md",
    REPO / "BENCHMARKS.md",
    *sorted((REPO / "docs").glob("*.md")),
    REPO / "helm" / "basra-rules" / "README.md",
]
WORDS = {"twice": 2, "two times": 2, "three times": 3, "four times": 4, "eight times": 8}
MULTIPLE = re.compile(
    r"\b(twice|two times|three times|four times|eight times|\d+ times|\d+x)\s+"
    r"(?:the\s+)?`--max-message-bytes`",
    re.IGNORECASE,
)
HEADROOM = re.compile(r"`--max-message-bytes`\)?\s+\(?plus\s+(\d+)\s*KiB")
STATED_DEFAULT = re.compile(r"`(--[a-z-]+)`[^.()`]{0,40}\((\d[\d,]*)\)")
# What the quick start's commands may need, as the pages name it (a name either page gives
# must be in both: the two lists are of one set-up, .ci/setup and .ci/cluster-tools).
NEEDS = (
    "Python 3.11",
    "Node.js 20",
    "npm",
    "PyPI",
    "Go module proxy",
    "Java",
    "Maven",
    "Maven Central",
    "chromium",
    "docker.io",
    "debootstrap",
    "containerd",
    "etcd",
    "prometheus",
)


def _text(page: Path) -> str:
    """A page's text with its line breaks and runs of spaces as single spaces."""
    return re.sub(r"\s+", " ", page.read_text(encoding="utf-8"))


def test_readmes_table_of_rpcs_is_the_service_of_the_proto() -> None:
    """Every RPC of basra.v1.RulesService, in the order of the proto, each with what it does."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    table = readme.split("| RPC (`basra.v1.RulesService`) | does |", 1)[1].split("\n\n", 1)[0]
    rows = re.findall(r"^\| `(\w+)` \| (.+) \|$", table, re.MULTILINE)
    assert [name for name, _ in rows] == list(methods())
    assert all(does.strip() for _, does in rows)


def test_multiples_of_the_message_bound_are_the_servers_factors() -> None:
    """gRPC's own limits are RECEIVE_FACTOR times `--max-message-bytes` plus
    RECEIVE_HEADROOM_BYTES (service/server.py); every page that says so says these."""
    factors, headrooms = [], []
    for page in PAGES:
        text = _text(page)
        for found in MULTIPLE.finditer(text):
            said = found.group(1).lower()
            factor = WORDS.get(said) or int(re.sub(r"\D", "", said))
            factors.append((page.name, factor))
        headrooms += [(page.name, int(n) * 1024) for n in HEADROOM.findall(text)]
    assert factors and headrooms  # the statements are there to check
    assert {f for _, f in factors} == {RECEIVE_FACTOR}, factors
    assert {h for _, h in headrooms} == {RECEIVE_HEADROOM_BYTES}, headrooms


def _help_defaults() -> dict[str, str]:
    """Each flag of `basra-rules serve --help` and the default it states."""
    shown = subprocess.run(
        [str(REPO / ".venv" / "bin" / "basra-rules"), "serve", "--help"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    options = shown.split("\noptions:\n", 1)[1]
    defaults = {}
    for flag, body in re.findall(r"^  (--[a-z-]+)(.*?)(?=^  -|\Z)", options, re.M | re.S):
        stated = re.search(r"\(default ([^)]*)\)", re.sub(r"\s+", " ", body))
        if stated:
            defaults[flag] = stated.group(1)
    return defaults


def test_defaults_stated_beside_a_flag_are_the_servers() -> None:
    """ "at most `--max-batch-items` requests (64)": the number is the flag's default."""
    defaults = _help_defaults()
    assert defaults["--max-message-bytes"] == "1048576"  # the help was read
    stated = [
        (page.name, flag, number.replace(",", ""))
        for page in PAGES
        for flag, number in STATED_DEFAULT.findall(_text(page))
        if flag in defaults
    ]
    assert stated
    assert [s for s in stated if s[2] != defaults[s[1]]] == []


def _needs(page: str, opening: str) -> set[str]:
    """The names of NEEDS in the paragraph of `page` that begins with `opening`."""
    text = (REPO / page).read_text(encoding="utf-8")
    paragraph = re.sub(r"\s+", " ", text.split(opening, 1)[1].split("\n\n", 1)[0])
    return {name for name in NEEDS if re.search(rf"\b{re.escape(name)}\b", paragraph)}


def test_the_quick_start_and_getting_started_need_the_same() -> None:
    readme = _needs("README.md", "Both need")
    guide = _needs("docs/getting-started.md", "Besides the repository")
    assert readme == guide == set(NEEDS)
