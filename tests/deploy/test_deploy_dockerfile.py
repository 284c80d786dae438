"""deploy/Dockerfile, checked by parsing it (no Docker engine runs here)."""

from __future__ import annotations

import ast
import json
import re
import shlex
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from tests.deploy.deploy_support import CHART_DIR, CONTRACT_DEFAULTS, DOCKERFILE, REPO

DOCKERIGNORE = DOCKERFILE.with_name(DOCKERFILE.name + ".dockerignore")


@dataclass(frozen=True)
class Instruction:
    """One Dockerfile instruction: its keyword (upper case) and the raw rest of the line."""

    keyword: str
    args: str


@dataclass(frozen=True)
class Stage:
    """One build stage: its base, its name and its instructions after FROM."""

    base: str
    name: str
    instructions: tuple[Instruction, ...]

    def all(self, keyword: str) -> list[str]:
        """The arguments of every instruction with this keyword."""
        return [i.args for i in self.instructions if i.keyword == keyword]


def parse_dockerfile(text: str) -> tuple[dict[str, str], list[Stage]]:
    """Global ARG defaults and the stages, with line continuations joined."""
    logical: list[str] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1].rstrip() + " "
            continue
        logical.append(pending + line)
        pending = ""
    assert not pending, "dangling line continuation"

    global_args: dict[str, str] = {}
    stages: list[Stage] = []
    current: list[Instruction] | None = None
    for line in logical:
        keyword, _, args = line.partition(" ")
        keyword = keyword.upper()
        args = args.strip()
        if keyword == "FROM":
            words = args.split()
            base = words[0]
            name = words[2] if len(words) == 3 and words[1].upper() == "AS" else str(len(stages))
            current = []
            stages.append(Stage(base=base, name=name, instructions=()))
        elif current is None:
            assert keyword == "ARG", f"{keyword} before the first FROM"
            name, _, default = args.partition("=")
            global_args[name] = default
        else:
            current.append(Instruction(keyword, args))
            stages[-1] = Stage(stages[-1].base, stages[-1].name, tuple(current))
    return global_args, stages


def copy_parts(args: str) -> tuple[dict[str, str], list[str], str]:
    """A COPY's --flags, its sources and its destination (shell or JSON form)."""
    words = json.loads(args) if args.startswith("[") else shlex.split(args)
    flags = {}
    while words and words[0].startswith("--"):
        flag, _, value = words.pop(0)[2:].partition("=")
        flags[flag] = value
    assert len(words) >= 2, f"COPY needs a source and a destination: {args}"
    return flags, words[:-1], words[-1]


def ignore_pattern(pattern: str) -> re.Pattern[str]:
    """A .dockerignore pattern as a regex over slash-separated context paths."""
    out = ""
    i = 0
    pattern = pattern.strip("/")
    while i < len(pattern):
        if pattern.startswith("**", i):
            out += ".*"
            i += 2
        elif pattern[i] == "*":
            out += "[^/]*"
            i += 1
        elif pattern[i] == "?":
            out += "[^/]"
            i += 1
        else:
            out += re.escape(pattern[i])
            i += 1
    # A pattern that matches a directory also covers everything below it.
    return re.compile(f"^{out}(?:/.*)?$")


def is_ignored(path: str, rules: list[tuple[bool, re.Pattern[str]]]) -> bool:
    """Docker's rule: the last matching pattern wins, '!' patterns re-include."""
    ignored = False
    for include, regex in rules:
        if regex.match(path):
            ignored = not include
    return ignored


def ignore_rules() -> list[tuple[bool, re.Pattern[str]]]:
    """The dockerignore beside the Dockerfile, in order."""
    rules = []
    for raw in DOCKERIGNORE.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        include = line.startswith("!")
        rules.append((include, ignore_pattern(line.lstrip("!"))))
    return rules


@pytest.fixture(scope="module")
def parsed() -> tuple[dict[str, str], list[Stage]]:
    """The parsed Dockerfile."""
    return parse_dockerfile(DOCKERFILE.read_text())


def final_stage(parsed: tuple[dict[str, str], list[Stage]]) -> Stage:
    """The stage the image is made of."""
    return parsed[1][-1]


def test_parser_reads_continuations_and_stages() -> None:
    """The parser itself: joined lines, named stages, global ARGs."""
    args, stages = parse_dockerfile(
        "ARG X=1\nFROM a AS one\nRUN echo a \\\n    && echo b\nFROM b\nUSER 5\n"
    )
    assert args == {"X": "1"}
    assert [s.name for s in stages] == ["one", "1"]
    assert stages[0].all("RUN") == ["echo a && echo b"]
    assert stages[1].all("USER") == ["5"]


def test_multi_stage_on_slim_python_311(parsed: tuple[dict[str, str], list[Stage]]) -> None:
    """A build stage and a runtime stage, both on the same slim Python 3.11 image."""
    global_args, stages = parsed
    assert len(stages) >= 2
    bases = {s.base for s in stages}
    assert bases == {"${PYTHON_IMAGE}"}
    assert re.fullmatch(r"python:3\.11(\.\d+)?-slim(-\w+)?", global_args["PYTHON_IMAGE"])


def test_final_user_is_numeric_and_not_root(parsed: tuple[dict[str, str], list[Stage]]) -> None:
    """The image runs as a numeric non-root user, the one the chart expects."""
    users = final_stage(parsed).all("USER")
    assert users, "no USER in the final stage"
    user, _, group = users[-1].partition(":")
    assert user.isdigit() and int(user) > 0
    assert not group or (group.isdigit() and int(group) > 0)
    values = yaml.safe_load((CHART_DIR / "values.yaml").read_text())
    assert values["podSecurityContext"]["runAsUser"] == int(user)


def test_exposed_ports_match_the_server_defaults(
    parsed: tuple[dict[str, str], list[Stage]],
) -> None:
    """EXPOSE lists exactly the gRPC and metrics ports the server binds by default."""
    exposed = {
        int(p.split("/")[0]) for args in final_stage(parsed).all("EXPOSE") for p in args.split()
    }
    assert exposed == {
        int(CONTRACT_DEFAULTS["BASRA_PORT"]),
        int(CONTRACT_DEFAULTS["BASRA_METRICS_PORT"]),
    }


def test_entrypoint_serves_with_defaults(parsed: tuple[dict[str, str], list[Stage]]) -> None:
    """Exec-form ENTRYPOINT running `basra-rules serve`, the console script pyproject declares."""
    (entrypoint,) = final_stage(parsed).all("ENTRYPOINT")
    argv = json.loads(entrypoint)
    assert Path(argv[0]).name == "basra-rules"
    assert argv[1:] == ["serve"]
    assert not final_stage(parsed).all("CMD")
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["basra-rules"] == "clients.cli:main"


def test_no_healthcheck(parsed: tuple[dict[str, str], list[Stage]]) -> None:
    """Kubernetes probes the health service; the image carries no HEALTHCHECK."""
    assert not [s for s in parsed[1] if s.all("HEALTHCHECK")]


def test_every_copy_source_exists(parsed: tuple[dict[str, str], list[Stage]]) -> None:
    """Context sources exist and pass the dockerignore; stage sources come from earlier stages."""
    rules = ignore_rules()
    _, stages = parsed
    copies = 0
    for index, stage in enumerate(stages):
        for args in stage.all("COPY") + stage.all("ADD"):
            flags, sources, _ = copy_parts(args)
            copies += 1
            if "from" in flags:
                earlier = {s.name: s for s in stages[:index]}
                assert flags["from"] in earlier, f"--from={flags['from']} is not an earlier stage"
                producer = earlier[flags["from"]]
                for source in sources:
                    made = " ".join(producer.all("RUN"))
                    assert source.rstrip("/") in made, f"{source} is not made in {producer.name}"
                continue
            for source in sources:
                path = REPO / source
                assert path.exists(), f"COPY source {source} missing from the repository"
                assert not is_ignored(source.rstrip("/"), rules), f"{source} is dockerignored"
                if path.is_dir():
                    kept = [
                        p
                        for p in path.rglob("*")
                        if p.is_file() and not is_ignored(p.relative_to(REPO).as_posix(), rules)
                    ]
                    assert kept, f"{source} copies nothing"
    assert copies >= 2


def test_dockerignore_keeps_local_artifacts_out() -> None:
    """gen/, the venv, caches and git never reach the build context."""
    rules = ignore_rules()
    for path in (".venv/bin/python", "gen/basra/v1/rules_pb2.py", ".git/HEAD", "tests/x.py"):
        assert is_ignored(path, rules), path
    for path in (
        "engine/__pycache__/cards.cpython-311.pyc",
        "proto/basra/v1/rules_pb2.py",
        "proto/released.binpb",
    ):
        assert is_ignored(path, rules), path
    for path in ("pyproject.toml", "proto/generate.py", "proto/basra/v1/rules.proto"):
        assert not is_ignored(path, rules), path


def _installed_packages() -> set[str]:
    """The top-level packages pyproject installs from the repository (gen/ is made in the build)."""
    tool = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    generated = set(tool.get("package-dir", {}))
    patterns = tool["packages"]["find"]["include"]
    return {pattern.split(".")[0] for pattern in patterns} - generated


def _first_party_imports(package: str) -> set[str]:
    """The repository's own top-level packages that the modules of `package` import."""
    ours = {p.name for p in REPO.iterdir() if (p / "__init__.py").is_file()}
    found = set()
    for path in (REPO / package).rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            found |= {name.split(".")[0] for name in names} & ours
    return found


def test_the_image_gets_what_pyproject_installs_and_no_test_machinery(
    parsed: tuple[dict[str, str], list[Stage]],
) -> None:
    """The build stage copies the installed packages, proto/ and pyproject; testkit/ stays out."""
    build = parsed[1][0]
    copied = {
        source.rstrip("/")
        for args in build.all("COPY")
        for source in copy_parts(args)[1]
        if "from" not in copy_parts(args)[0]
    }
    assert copied == {"pyproject.toml", "proto", *_installed_packages()}
    assert "testkit" not in copied and "tests" not in copied
    rules = ignore_rules()
    for path in ("testkit/harness.py", "testkit/soak.py", "tests/x.py", "benchmarks/x.py"):
        assert is_ignored(path, rules), path


def test_the_shipped_code_imports_nothing_the_image_lacks() -> None:
    """Every package of the image imports only packages of the image (or installed ones)."""
    shipped = _installed_packages()
    assert {"engine", "service", "clients"} <= shipped
    for package in sorted(shipped):
        assert _first_party_imports(package) <= shipped | {"basra"}, package


def test_the_server_imports_neither_the_clients_nor_the_test_machinery() -> None:
    """service/ is the server alone; the clients and testkit build on it, not it on them."""
    assert _first_party_imports("service") <= {"engine", "service", "basra"}
    assert _first_party_imports("engine") <= {"engine"}


def test_generated_code_is_built_before_install(parsed: tuple[dict[str, str], list[Stage]]) -> None:
    """The build stage runs proto/generate.py, then installs the project."""
    build = parsed[1][0]
    runs = build.all("RUN")
    generate = next(i for i, r in enumerate(runs) if "proto/generate.py" in r)
    install = next(i for i, r in enumerate(runs) if re.search(r"pip install \.(\s|$)", r))
    assert generate < install
    assert any("grpcio-tools" in r for r in runs[:generate])


def test_final_stage_has_no_build_tools(parsed: tuple[dict[str, str], list[Stage]]) -> None:
    """No compiler, no grpcio-tools, no package installs; pip itself is removed."""
    final = final_stage(parsed)
    runs = " ".join(final.all("RUN"))
    for tool in ("grpcio-tools", "gcc", "build-essential", "apt-get install", "pip install"):
        assert tool not in runs, tool
    assert re.search(r"pip uninstall -y pip\b", runs)
    assert not [a for a in final.all("COPY") if "--from" not in a], "final stage copies sources"
