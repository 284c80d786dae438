"""One way for test machinery to run a tool and fail with what it printed."""

from __future__ import annotations

import subprocess
from collections.abc import Mapping, Sequence


def run(
    argv: Sequence[str],
    *,
    name: str,
    env: Mapping[str, str] | None = None,
    stdin: str | None = None,
    timeout: float = 120.0,
    check: bool = True,
) -> subprocess.CompletedProcess[str]:
    """Run `argv`; its output as text. With `check`, a non-zero exit raises AssertionError
    naming `name` (what a reader knows the command by) with the ends of both outputs."""
    done = subprocess.run(
        list(argv),
        env=dict(env) if env is not None else None,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if check and done.returncode != 0:
        raise AssertionError(
            f"{name} exited {done.returncode}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        )
    return done
