"""The lock files the image installs from: they satisfy pyproject.toml, agree with each other,
carry a hash for every pin, and are refreshed by the commands docs/deploy.md gives."""

from __future__ import annotations

import re
import tomllib

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from testkit.deployment import BUILD_LOCK, REPO, RUNTIME_LOCK, Pin, read_lock

BUILD_INPUT = REPO / "deploy" / "build-requirements.in"
DEPLOY_DOC = REPO / "docs" / "deploy.md"
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


def test_every_runtime_dependency_is_pinned_within_its_range() -> None:
    """pyproject.toml's dependencies, each pinned to a version its range admits."""
    _, pins = read_lock(RUNTIME_LOCK)
    project = _pyproject()["project"]
    assert isinstance(project, dict)
    _satisfied(project["dependencies"], pins, "pyproject.toml")


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
    for lock in (RUNTIME_LOCK, BUILD_LOCK):
        _, pins = read_lock(lock)
        assert pins
        for name, pin in pins.items():
            assert pin.hashes, f"{lock.name}: {name} has no hash"
            assert all(re.fullmatch(r"[0-9a-f]{64}", h) for h in pin.hashes), name
            if pin.marker is not None:
                marker = Requirement(f"x; {pin.marker}").marker
                assert marker is not None
                evaluated = {
                    marker.evaluate({"python_version": v, "python_full_version": f"{v}.0"})
                    for v in PYTHONS
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


def test_the_locks_are_refreshed_by_the_documented_commands() -> None:
    """Each lock's header records the command that wrote it; docs/deploy.md shows exactly it."""
    documented = DEPLOY_DOC.read_text()
    for lock, source in ((RUNTIME_LOCK, "pyproject.toml"), (BUILD_LOCK, BUILD_INPUT.name)):
        command, _ = read_lock(lock)
        assert source in command
        assert f"-o deploy/{lock.name}" in command
        assert "--generate-hashes" in command and "--universal" in command
        assert f".venv/bin/{command}" in documented, f"docs/deploy.md lacks: {command}"
