"""ghz as the test command's set-up installs it, and a load generator run with its own CPU.

`.ci/setup` puts ghz (a pinned `go install`) into .ci/tools/go/bin, which is git-ignored; the
tests of tests/load and the load benchmarks run that binary from the repository root, where
the configurations' `data-file` paths start. `run` starts any load generator (ghz or
`basra-rules load`) as a child and reads its CPU seconds from the kernel's account of the
reaped child (wait4), so a benchmark can say what the generator itself cost the machine.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
GO_BIN = ROOT / ".ci" / "tools" / "go" / "bin"
GHZ = GO_BIN / "ghz"
MISSING = f"ghz is not installed: `bash .ci/setup dev` puts it into {GO_BIN.relative_to(ROOT)}"


@dataclass(frozen=True)
class Run:
    """One finished load-generator run: exit code, output, wall time and its own CPU."""

    returncode: int
    stdout: str
    stderr: str
    wall_seconds: float
    cpu_seconds: float
    """The generator's user + system CPU seconds, all its threads."""

    def report(self) -> dict[str, Any]:
        """The JSON report (ghz `-O json`, `basra-rules load --json`); raise if the run failed."""
        if self.returncode != 0:
            raise RuntimeError(f"exit {self.returncode}: {self.stderr.strip()[-2000:]}")
        report = json.loads(self.stdout)
        assert isinstance(report, dict)
        return report


def run(command: Sequence[str], timeout: float = 120.0) -> Run:
    """Run a command from the repository root; return what it printed and the CPU it used."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        process = subprocess.Popen(
            list(command), cwd=ROOT, stdout=out, stderr=err, stdin=subprocess.DEVNULL
        )
        # wait4 blocks; a timer kills a run that hangs (the status then says so).
        killer = threading.Timer(timeout, process.kill)
        killer.start()
        started = time.perf_counter()
        try:
            _, status, usage = os.wait4(process.pid, 0)
        finally:
            killer.cancel()
        wall = time.perf_counter() - started
        process.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
        out.seek(0)
        err.seek(0)
        return Run(
            process.returncode, out.read(), err.read(), wall, usage.ru_utime + usage.ru_stime
        )


def ghz(arguments: Sequence[str], timeout: float = 120.0) -> Run:
    """Run the installed ghz with these arguments from the repository root."""
    return run([str(GHZ), *arguments], timeout)
