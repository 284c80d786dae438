"""The alerts' rule file is valid Prometheus, and each alert fires when, and only when, it should.

Both checks are promtool's (Debian's `prometheus` package, which .ci/setup installs as root):
with CI=true it must be there; elsewhere the test is skipped and says why.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
RULES = REPO / "helm/basra-rules/files/prometheus-rules.yaml"
UNIT_TESTS = REPO / "tests/prometheus/alerts_test.yaml"
TIMEOUT_SECONDS = 60


def _promtool(*args: str) -> subprocess.CompletedProcess[str]:
    found = shutil.which("promtool")
    if found is None:
        if os.environ.get("CI") == "true":
            pytest.fail("CI=true, yet there is no promtool (Debian's prometheus package)")
        pytest.skip("no promtool here (Debian's prometheus package)")
    return subprocess.run(
        [found, *args], capture_output=True, text=True, timeout=TIMEOUT_SECONDS, check=False
    )


def test_the_rule_file_is_valid() -> None:
    """promtool check rules: it parses, and every expression is valid PromQL."""
    done = _promtool("check", "rules", str(RULES))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS: 7 rules found" in done.stdout


def test_each_alert_fires_when_it_should_and_only_then() -> None:
    """promtool test rules, over a case where each alert fires and one where it stays silent."""
    done = _promtool("test", "rules", str(UNIT_TESTS))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout


def test_every_alert_has_its_unit_tests() -> None:
    """Each alert of the rule file is named by a test that fires it and one that does not."""
    alerts = [
        line.split(":", 1)[1].strip()
        for line in RULES.read_text().splitlines()
        if line.strip().startswith("- alert:")
    ]
    tests = UNIT_TESTS.read_text()
    assert len(alerts) == 7
    for alert in alerts:
        named = tests.count(f"alertname: {alert}\n")
        assert named >= 2, f"{alert}: {named} alert_rule_test cases"
