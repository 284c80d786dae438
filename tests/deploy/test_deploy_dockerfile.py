"""deploy/Dockerfile and .dockerignore, checked by parsing them (test_deploy_image.py builds
and runs the image)."""

from __future__ import annotations

import ast
import json
import re
import shlex
import tomllib
from pathlib import Path

import pytest
import yaml

from testkit.deployment import (
    CHART_DIR,
    CONTRACT_DEFAULTS,
    DOCKERFILE,
    DOCKERIGNORE,
    REPO,
    Stage,
    copy_parts,
    ignore_rules,
    is_ignored,
    parse_dockerfile,
)

# The one source a COPY may leave out: the gateway's binary, which `bash deploy/gateway/build`
# makes on the host before `docker build` (a bracket makes a pattern that may match nothing).
GATEWAY_BINARY = ".cache/gateway/basra-gateway"
GATEWAY_COPY = "deploy/grpc-service-config.json .cach[e]/gateway/basra-gateway /opt/basra-gateway/"


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
                if "[" in source:
                    # Optional: the built gateway, kept by the dockerignore, made by its script.
                    plain = re.sub(r"\[(.)\]", r"\1", source)
                    assert plain == GATEWAY_BINARY, f"{source}: only the gateway is optional"
                    assert not is_ignored(plain, rules), f"{plain} is dockerignored"
                    build = (REPO / "deploy" / "gateway" / "build").read_text()
                    assert f"../../{GATEWAY_BINARY}" in build
                    continue
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
    for path in (
        ".venv/bin/python",
        "gen/basra/v1/rules_pb2.py",
        ".git/HEAD",
        "tests/x.py",
        "testkit/harness.py",
        "benchmarks/x.py",
        ".cache/python-base/trixie.tar",
        "deploy/Dockerfile",
        "helm/basra-rules/values.yaml",
    ):
        assert is_ignored(path, rules), path
    for path in (
        "engine/__pycache__/cards.cpython-311.pyc",
        "proto/basra/v1/rules_pb2.py",
        "proto/released.binpb",
    ):
        assert is_ignored(path, rules), path
    for path in (
        "pyproject.toml",
        "README.md",
        "deploy/requirements.lock",
        "proto/generate.py",
        "proto/basra/v1/rules.proto",
    ):
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
    locks = {"deploy/requirements.lock", "deploy/build-requirements.lock"}
    metadata = {"pyproject.toml", "README.md"}  # README.md: the package's long description
    assert copied == {*metadata, *locks, "proto", *_installed_packages()}
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
    assert _first_party_imports("service") <= {"engine", "wire", "service", "basra"}
    assert _first_party_imports("wire") <= {"engine", "wire", "basra"}
    assert _first_party_imports("engine") <= {"engine"}


def test_generated_code_is_built_before_install(parsed: tuple[dict[str, str], list[Stage]]) -> None:
    """Locked tools, then proto/generate.py, then the project's wheel built and installed."""
    build = parsed[1][0]
    runs = build.all("RUN")
    locked = next(i for i, r in enumerate(runs) if "build-requirements.lock" in r)
    generate = next(i for i, r in enumerate(runs) if "proto/generate.py" in r)
    install = next(i for i, r in enumerate(runs) if re.search(r"pip wheel .*--no-deps.* \.", r))
    assert locked < generate < install
    assert "pip install --no-deps --no-index /tmp/dist/" in runs[install]
    assert "pip check" in runs[install]


def test_every_third_party_package_is_installed_from_a_lock_by_hash(
    parsed: tuple[dict[str, str], list[Stage]],
) -> None:
    """Each pip install of the build stage names a lock file with --require-hashes, or the
    project's own wheel with --no-deps; none resolves a version range on the day of the build."""
    installs = [
        part.strip()
        for run in parsed[1][0].all("RUN")
        for part in run.split("&&")
        if re.search(r"\bpip install\b", part)
    ]
    assert len(installs) == 3, installs
    for command in installs:
        words = shlex.split(command)
        if "--require-hashes" in words:
            lock = words[words.index("-r") + 1]
            assert lock in {"deploy/requirements.lock", "deploy/build-requirements.lock"}
        else:
            assert {"--no-deps", "--no-index"} <= set(words), command
            assert words[-1].endswith(".whl"), command
    assert "--no-build-isolation" in " ".join(parsed[1][0].all("RUN")), "a backend is fetched"


def test_no_parser_directive_asks_for_a_frontend_image() -> None:
    """No `# syntax=` line: BuildKit would fetch that frontend from a registry first."""
    for line in DOCKERFILE.read_text().splitlines():
        if not line.startswith("#"):
            break
        assert not re.match(r"#\s*(syntax|escape|check)\s*=", line, re.IGNORECASE), line


def test_one_ignore_file_for_both_builders() -> None:
    """The legacy builder reads only the root .dockerignore; BuildKit would prefer a
    Dockerfile-specific one over it, so there must be none for the two to agree."""
    assert DOCKERIGNORE.is_file()
    assert not DOCKERFILE.with_name(DOCKERFILE.name + ".dockerignore").exists()
    assert not (REPO / "deploy" / ".dockerignore").exists()


def test_final_stage_has_no_build_tools(parsed: tuple[dict[str, str], list[Stage]]) -> None:
    """No compiler, no grpcio-tools, no package installs; pip itself is removed."""
    final = final_stage(parsed)
    runs = " ".join(final.all("RUN"))
    for tool in ("grpcio-tools", "gcc", "build-essential", "apt-get install", "pip install"):
        assert tool not in runs, tool
    assert re.search(r"pip uninstall -y pip\b", runs)
    # From the context, only the gateway's static binary and the service config it loads.
    copied = [a for a in final.all("COPY") if "--from" not in a]
    assert copied == [GATEWAY_COPY], "final stage copies sources"


def test_a_package_mirror_can_be_named_for_the_installs(
    parsed: tuple[dict[str, str], list[Stage]],
) -> None:
    """`--build-arg PIP_INDEX_URL=...` (docs/deploy.md): declared in the build stage before its
    first install, so docker passes it to those RUNs as the variable pip reads."""
    build = parsed[1][0]
    keywords = [(i.keyword, i.args) for i in build.instructions]
    declared = keywords.index(("ARG", "PIP_INDEX_URL"))
    first_install = next(
        n for n, (k, a) in enumerate(keywords) if k == "RUN" and "pip install" in a
    )
    assert declared < first_install
