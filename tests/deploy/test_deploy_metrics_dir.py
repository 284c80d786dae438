"""A metrics directory the server cannot use stops it at once with one clear line and exit 1.

(The read-only root filesystem of a container with no volume there is run for real by
test_deploy_image.py; here the same check meets a missing parent and a directory of another
user, on the host.)
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from testkit import harness

ERROR_EVENT = "cannot use the metrics directory"
NOBODY = 65534


def _serve(metrics_dir: Path, prefix: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*prefix, *harness.serve_command("--metrics-dir", str(metrics_dir))],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def _one_error_line(done: subprocess.CompletedProcess[str], metrics_dir: Path) -> str:
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stderr == "", done.stderr  # no traceback, no second account
    (line,) = done.stdout.splitlines()
    parsed = json.loads(line)
    assert parsed["event"] == ERROR_EVENT and parsed["level"] == "error", parsed
    assert parsed["metrics_dir"] == str(metrics_dir)
    return str(parsed["error"])


def test_a_directory_below_a_file_cannot_be_made(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    metrics_dir = blocker / "metrics"
    assert _one_error_line(_serve(metrics_dir), metrics_dir) == f"Not a directory: {metrics_dir}"


def test_a_directory_of_another_user_is_refused(tmp_path: Path) -> None:
    """Owned by another user, mode 755: the server may read it but not write its values."""
    metrics_dir = tmp_path / "metrics"
    metrics_dir.mkdir()
    prefix: tuple[str, ...] = ()
    if os.geteuid() == 0:
        # Root writes anywhere through CAP_DAC_OVERRIDE; without it, as a user would.
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            pytest.skip("running as root without setpriv (util-linux) to drop DAC override")
        os.chown(metrics_dir, NOBODY, NOBODY)
        prefix = (setpriv, "--bounding-set=-dac_override,-dac_read_search", "--")
    metrics_dir.chmod(0o555)
    try:
        error = _one_error_line(_serve(metrics_dir, prefix), metrics_dir)
    finally:
        metrics_dir.chmod(0o755)
    assert error.startswith("Permission denied: ") and str(metrics_dir) in error, error


def test_a_missing_directory_that_can_be_made_is_made(tmp_path: Path) -> None:
    metrics_dir = tmp_path / "not" / "yet" / "there"
    server = harness.start(["--metrics-dir", str(metrics_dir)])
    try:
        assert metrics_dir.is_dir()
    finally:
        assert server.stop(30) == 0
