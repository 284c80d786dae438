"""The lock files: the project's (uv.lock, what the test command's set-up installs) and the
image's; they satisfy pyproject.toml, agree with each other and with the generated code, carry
a hash for every pin, and are refreshed by the one command docs/deploy.md gives (.ci/lock); the
set-up scripts install nothing unpinned."""

from __future__ import annotations

import re
import shlex
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from testkit.deployment import BUILD_LOCK, REPO, RUNTIME_LOCK, Pin, read_lock

BUILD_INPUT = REPO / "deploy" / "build-requirements.in"
LOWEST_LOCK = REPO / "deploy" / "requirements-lowest.lock"
BASE_INPUT = REPO / "deploy" / "python-base.in"
BASE_LOCK = REPO / "deploy" / "python-base.lock"
UV_INPUT = REPO / ".ci" / "uv.in"
UV_LOCK = REPO / ".ci" / "uv.txt"
PROJECT_LOCK = REPO / "uv.lock"
REFRESH = REPO / ".ci" / "lock"
GENERATED = REPO / "gen" / "basra" / "v1"
DEPLOY_DOC = REPO / "docs" / "deploy.md"
# The grpcio packages whose floor is the code generator's version.
GRPC_FAMILY = ("grpcio", "grpcio-health-checking", "grpcio-reflection")
PYTHONS = ("3.11", "3.12", "3.13")  # the base images the project builds on (trixie: 3.13)


def _pyproject() -> dict[str, object]:
    return tomllib.loads((REPO / "pyproject.toml").read_text())


def _satisfied(requirements: list[str], pins: dict[str, Pin], where: str) -> None:
    for line in requirements:
        wanted = Requirement(line)
        pin = pins.get(canonicalize_name(wanted.name))
        assert pin is not None, f"{where}: {wanted.name} is not in the lock"
        assert wanted.specifier.contains(pin.version, prereleases=True), (
            f"{where}: {wanted.name}=={pin.version} does not satisfy {wanted.specifier}"
        )


def _dependencies() -> list[str]:
    project = _pyproject()["project"]
    assert isinstance(project, dict)
    dependencies = project["dependencies"]
    assert isinstance(dependencies, list)
    return dependencies


def _project_lock() -> dict[str, str]:
    """uv.lock's version of each package, by canonical name."""
    lock = tomllib.loads(PROJECT_LOCK.read_text())
    return {
        str(canonicalize_name(p["name"])): p["version"] for p in lock["package"] if "version" in p
    }


def _generator() -> str:
    """The code generator's version: the one pin of pyproject.toml's "generate" group."""
    groups = _pyproject()["dependency-groups"]
    assert isinstance(groups, dict)
    (line,) = groups["generate"]
    requirement = Requirement(line)
    (specifier,) = requirement.specifier
    assert (requirement.name, specifier.operator) == ("grpcio-tools", "=="), line
    return specifier.version


def test_every_runtime_dependency_is_pinned_within_its_range() -> None:
    """pyproject.toml's dependencies, each pinned to a version its range admits, at both ends."""
    for lock in (RUNTIME_LOCK, LOWEST_LOCK):
        _, pins = read_lock(lock)
        _satisfied(_dependencies(), pins, f"pyproject.toml in {lock.name}")


def test_the_lowest_lock_holds_the_floors() -> None:
    """Each direct dependency of the lowest lock is at its declared floor, or at the lowest
    version the others admit (opentelemetry's packages require each other's patch releases);
    never above the newest lock's."""
    _, lowest = read_lock(LOWEST_LOCK)
    _, newest = read_lock(RUNTIME_LOCK)
    above = []
    for line in _dependencies():
        wanted = Requirement(line)
        name = canonicalize_name(wanted.name)
        (floor,) = (s for s in wanted.specifier if s.operator == ">=")
        version, least = Version(lowest[name].version), Version(floor.version)
        assert least <= version <= Version(newest[name].version), name
        if (version.major, version.minor) != (least.major, least.minor):
            above.append(f"{name}: {version} for {floor}")
    assert not above, f"floors the lowest resolution cannot reach: {above}"


def test_the_generated_code_and_the_declared_floors_agree() -> None:
    """gen/ refuses a grpcio older than the grpcio-tools that wrote it, and a protobuf older
    than its gencode: those two versions are exactly the declared floors, the generator is the
    one version everywhere (pyproject.toml's group, the image's build input, uv.lock), and the
    checked-out gen/ was written by it."""
    generator = _generator()
    floors: dict[str, str] = {}
    for line in _dependencies():
        wanted = Requirement(line)
        (floor,) = (s for s in wanted.specifier if s.operator == ">=")
        floors[str(canonicalize_name(wanted.name))] = floor.version
    for name in GRPC_FAMILY:
        assert floors[name] == generator, f"{name}'s floor is not the generator's {generator}"
    assert f"grpcio-tools=={generator}" in BUILD_INPUT.read_text().splitlines()
    assert _project_lock()["grpcio-tools"] == generator
    stubs = (GENERATED / "rules_pb2_grpc.py").read_text()
    assert f"GRPC_GENERATED_VERSION = '{generator}'" in stubs
    messages = (GENERATED / "rules_pb2.py").read_text()
    found = re.search(
        r"ValidateProtobufRuntimeVersion\(\s*_runtime_version\.Domain\.PUBLIC,"
        r"\s*(\d+),\s*(\d+),\s*(\d+),",
        messages,
    )
    assert found, "gen/basra/v1/rules_pb2.py names no protobuf gencode version"
    assert floors["protobuf"] == ".".join(found.groups()), "protobuf's floor is not the gencode's"


def test_the_project_lock_runs_what_the_image_runs() -> None:
    """The test command's environment (uv.lock) holds each runtime pin of the image's lock at
    its version, so the suite tests what the image runs; uv is one version in uv.lock and in
    the bootstrap pin (.ci/uv.txt)."""
    project = _project_lock()
    for lock in (RUNTIME_LOCK, BUILD_LOCK):
        _, pins = read_lock(lock)
        for name, pin in pins.items():
            assert project.get(name) == pin.version, f"{lock.name}: {name} differs from uv.lock"
    _, uv = read_lock(UV_LOCK)
    assert set(uv) == {"uv"}
    assert project["uv"] == uv["uv"].version


def test_the_runtime_lock_is_exactly_what_the_project_needs() -> None:
    """Every pin is asked for by pyproject.toml or by another pin: no stray package, so no dev
    tool (pytest, grpcio-tools, ...) is ever installed in the image."""
    _, pins = read_lock(RUNTIME_LOCK)
    needed: set[str] = set()
    frontier = [n for n, pin in pins.items() if "basra-rules (pyproject.toml)" in pin.via]
    while frontier:
        name = frontier.pop()
        if name not in needed:
            needed.add(name)
            frontier += [n for n, pin in pins.items() if name in pin.via]
    assert needed == set(pins), sorted(set(pins) - needed)
    for tool in ("grpcio-tools", "pytest", "mypy", "ruff", "setuptools", "uv"):
        assert tool not in pins, tool


def test_every_pin_has_hashes_and_applies_to_every_supported_python() -> None:
    """pip's --require-hashes refuses a pin without a hash; a marker that leaves a package out
    on some supported Python would make the image differ by base."""
    for lock in (RUNTIME_LOCK, LOWEST_LOCK, BUILD_LOCK, BASE_LOCK, UV_LOCK):
        _, pins = read_lock(lock)
        assert pins
        pythons = ("3.13",) if lock == BASE_LOCK else PYTHONS
        for name, pin in pins.items():
            assert pin.hashes, f"{lock.name}: {name} has no hash"
            assert all(re.fullmatch(r"[0-9a-f]{64}", h) for h in pin.hashes), name
            if pin.marker is not None:
                marker = Requirement(f"x; {pin.marker}").marker
                assert marker is not None
                evaluated = {
                    marker.evaluate({"python_version": v, "python_full_version": f"{v}.0"})
                    for v in pythons
                }
                assert evaluated == {True}, f"{lock.name}: {name} only on some Pythons"


def test_the_build_lock_holds_the_tools_and_agrees_with_the_runtime_lock() -> None:
    """grpcio-tools and the build backend, at versions the inputs admit; every package both
    locks hold (protobuf, grpcio) at one version, so the generated code matches the runtime."""
    _, runtime = read_lock(RUNTIME_LOCK)
    _, build = read_lock(BUILD_LOCK)
    inputs = [
        line.strip()
        for line in BUILD_INPUT.read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    _satisfied(inputs, build, BUILD_INPUT.name)
    backend = _pyproject()["build-system"]
    assert isinstance(backend, dict)
    _satisfied(backend["requires"], build, "[build-system] requires")
    assert {canonicalize_name(Requirement(r).name) for r in backend["requires"]} <= {
        canonicalize_name(Requirement(line).name) for line in inputs
    }, "the build backend is not among deploy/build-requirements.in"
    shared = set(runtime) & set(build)
    assert {"grpcio", "protobuf"} <= shared
    for name in shared:
        same = (runtime[name].version, runtime[name].hashes) == (
            build[name].version,
            build[name].hashes,
        )
        assert same, f"{name}: the two locks differ"


def test_the_locks_are_refreshed_by_the_one_documented_command() -> None:
    """Each lock's header records the uv command that wrote it; .ci/lock runs each of them (and
    uv lock for uv.lock), and docs/deploy.md shows .ci/lock."""
    script = REFRESH.read_text()
    assert "lock --upgrade" in script
    inputs = {
        RUNTIME_LOCK: "pyproject.toml",
        LOWEST_LOCK: "pyproject.toml",
        BUILD_LOCK: BUILD_INPUT.name,
        BASE_LOCK: BASE_INPUT.name,
    }
    for lock, source in inputs.items():
        command, _ = read_lock(lock)
        words = shlex.split(command)
        assert source in command
        assert words[-2:] == ["-o", f"deploy/{lock.name}"]
        assert {"--generate-hashes", "--universal"} <= set(words)
        assert f"-o deploy/{lock.name}" in script, f".ci/lock does not write {lock.name}"
        for option in ("--resolution", "-c"):
            if option in words:
                value = words[words.index(option) + 1]
                assert f"{option} {value}" in script, f"{lock.name}: {option} {value}"
    command, _ = read_lock(UV_LOCK)
    assert command.endswith("-o .ci/uv.txt") and ".ci/uv.in" in command
    assert "bash .ci/lock" in DEPLOY_DOC.read_text(), "docs/deploy.md lacks: bash .ci/lock"


def _script_commands(path: Path) -> list[str]:
    """The script's commands, continuation lines joined, comments dropped."""
    text = re.sub(r"\\\n\s*", " ", path.read_text())
    return [line.strip() for line in text.splitlines() if not line.strip().startswith("#")]


def test_the_set_up_installs_nothing_unpinned() -> None:
    """Every install of the set-up scripts names a lock or a version: pip only with hashes,
    uv only from uv.lock, npm only `npm ci` (package-lock.json), go install only at a version;
    apt-get installs Debian's packages of the release the machine runs (docs/deploy.md says
    why those stay unpinned)."""
    scripts = [REPO / ".ci" / n for n in ("setup", "uv", "test", "cluster-tools", "serve")]
    scripts.append(REPO / "deploy" / "python-base.sh")
    seen = set()
    for path in scripts:
        for line in _script_commands(path):
            where = f"{path.relative_to(REPO)}: {line}"
            if re.search(r"\bpip (install|download)\b", line):
                assert "--require-hashes" in line, where
                seen.add("pip")
            if re.search(r"\bnpm (install|i|update)\b", line):
                raise AssertionError(f"npm outside its lock: {where}")
            if "npm ci" in line:
                seen.add("npm")
            if re.search(r"\buv\b.*\bsync\b", line):
                assert "--locked" in line, where
                seen.add("uv")
            if re.search(r"\buv\b.*pip install", line):
                raise AssertionError(f"uv pip install outside a lock: {where}")
            for tool in re.findall(
                r"\b(?:github\.com|google\.golang\.org|helm\.sh|sigs\.k8s\.io)/\S+", line
            ):
                assert re.search(r"@v\d+\.\d+\.\d+", tool), f"Go tool without a version: {where}"
                seen.add("go")
    assert seen == {"pip", "npm", "uv", "go"}, seen
