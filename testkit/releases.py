"""A previous release of the service, built from the repository's history to run beside this one.

The rolling-update tests (tests/rollout) upgrade from the last release to this checkout and
roll back, with matches in flight. The last release is named here by its commit; `build`
writes that commit's tree into a directory with `git archive` (the repository itself is left
alone: no worktree, no checkout), generates its gRPC code from its own `proto/` with its own
`proto/generate.py`, and checks that a Python started the way `Release.program` starts one
imports the release's packages, not this checkout's. The release runs on this environment's
interpreter and installed packages, which are the ones it was released with or newer within
the same bounds; what it imports and this checkout no longer does (grpcio-status) stays in the
development group of pyproject.toml for it.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
import tarfile
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

LAST_RELEASE = "78cc5142a52c5bab08908166295cfdba24554894"
"""The last released commit: main when zero-downtime operation was taken on (issue 21). The
project tags no releases yet; when it does, this names the newest tag's commit."""


class ReleaseUnavailableError(RuntimeError):
    """The commit cannot be had from this repository (a shallow clone, an archive)."""


@dataclass(frozen=True, slots=True)
class Release:
    """A release's tree, built, and how to run its `basra-rules`."""

    commit: str
    tree: Path

    @property
    def program(self) -> list[str]:
        """The release's `basra-rules` command (its clients.cli, on this interpreter)."""
        return [sys.executable, "-m", "clients.cli"]

    @property
    def env(self) -> dict[str, str]:
        """Variables that make the interpreter import the release's packages first."""
        return {"PYTHONPATH": os.pathsep.join((str(self.tree), str(self.tree / "gen")))}

    def imports(self, *modules: str) -> dict[str, Path]:
        """Where a Python started as `program` is would import each module from."""
        code = "import importlib, sys; " + "; ".join(
            f"print(importlib.import_module({m!r}).__file__)" for m in modules
        )
        done = subprocess.run(
            [sys.executable, "-c", code],
            cwd=self.tree,
            env={**os.environ, **self.env},
            capture_output=True,
            text=True,
            check=False,
            timeout=60,
        )
        assert done.returncode == 0, f"the release {self.commit[:7]} does not import: {done.stderr}"
        shown = done.stdout.split()
        return {m: Path(p) for m, p in zip(modules, shown, strict=True)}


def build(commit: str, into: Path, repo: Path = REPO) -> Release:
    """Write `commit`'s tree into the empty directory `into`, generate its code; return it."""
    archive = subprocess.run(
        # safe.directory: a checkout owned by another user (CI runs as root) is still read.
        ["git", "-c", f"safe.directory={repo}", "-C", str(repo), "archive", "--format=tar", commit],
        capture_output=True,
        check=False,
        timeout=120,
    )
    if archive.returncode != 0:
        raise ReleaseUnavailableError(
            f"git cannot give commit {commit[:12]} (the last release) from {repo}: "
            f"{archive.stderr.decode(errors='replace').strip()}; the rollout tests need the "
            "repository's history (a full clone, not a shallow one)"
        )
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tree:
        tree.extractall(into, filter="data")
    subprocess.run(
        [sys.executable, "proto/generate.py"],
        cwd=into,
        check=True,
        capture_output=True,
        timeout=120,
    )
    release = Release(commit, into)
    found = release.imports("service.server", "basra.v1.rules_pb2")
    for module, path in found.items():
        if not path.is_relative_to(into):
            raise RuntimeError(f"the release would import {module} from {path}, not from {into}")
    return release
