"""Every configuration of deploy/ghz, run in ghz itself as docs/load-testing.md says.

ghz runs from the repository root (its `data-file` paths start there) against servers this
module starts with the chart's settings: first through server reflection, as the configs are
written, then with `--proto proto/basra/v1/rules.proto` against the same server started with
`--no-reflection`. Each run sends every item of the config's data file once (ghz takes the
items in turn), so ghz's own JSON decoding, which refuses an unknown field, checks each item,
and the server must answer each one OK.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from clients import load
from testkit import ghz_tool, harness
from testkit.harness import ServedProcess

REPO = Path(__file__).resolve().parents[2]
CONFIGS = sorted((REPO / "deploy" / "ghz").glob("*.json"))
CHART = yaml.safe_load((REPO / "helm" / "basra-rules" / "values.yaml").read_text())["server"]
PROTO = "proto/basra/v1/rules.proto"
RUN_SECONDS = 60.0


@pytest.fixture(scope="module")
def ghz() -> None:
    """ghz must be installed; in CI (CI=true) its absence fails instead of skipping."""
    if not ghz_tool.GHZ.is_file():
        if os.environ.get("CI") == "true":
            pytest.fail(ghz_tool.MISSING)
        pytest.skip(ghz_tool.MISSING)


def _chart_server(*flags: str) -> ServedProcess:
    chart = ["--workers", str(CHART["workers"]), *flags]
    return harness.start(chart, log_level=CHART["logLevel"], keep_calls=False, cwd=REPO)


@pytest.fixture(scope="module")
def reflecting(ghz: None) -> Iterator[ServedProcess]:
    """A server with the chart's settings (reflection on)."""
    served = _chart_server()
    yield served
    served.stop()


@pytest.fixture(scope="module")
def unreflecting(ghz: None) -> Iterator[ServedProcess]:
    """The same server with reflection off."""
    served = _chart_server("--no-reflection")
    yield served
    served.stop()


def _items(config: Path) -> int:
    return len(load.config_from_dict(json.loads(config.read_text()), REPO).data)


def _ghz(config: Path, target: str, *flags: str) -> dict[str, Any]:
    relative = config.relative_to(REPO).as_posix()
    done = ghz_tool.ghz(["--config", relative, *flags, "-O", "json", target], RUN_SECONDS)
    return done.report()


def _all_ok(report: dict[str, Any], config: Path, calls: int) -> None:
    raw = json.loads(config.read_text())
    assert report["endReason"] == "normal"
    assert report["options"]["call"] == raw["call"]
    assert report["options"]["connections"] == raw["connections"]
    assert report["count"] == calls
    assert report["statusCodeDistribution"] == {"OK": calls}, report["errorDistribution"]
    assert report["errorDistribution"] == {}
    assert [d["status"] for d in report["details"]] == ["OK"] * calls


@pytest.mark.parametrize("config", CONFIGS, ids=lambda p: p.stem)
def test_config_runs_in_ghz_through_reflection_then_from_the_proto(
    config: Path, reflecting: ServedProcess, unreflecting: ServedProcess
) -> None:
    calls = _items(config)
    through_reflection = _ghz(config, reflecting.target, "-n", str(calls))
    _all_ok(through_reflection, config, calls)
    from_the_proto = _ghz(config, unreflecting.target, "--proto", PROTO, "-n", str(calls))
    _all_ok(from_the_proto, config, calls)


def test_without_reflection_ghz_needs_the_proto(unreflecting: ServedProcess) -> None:
    """The reflection runs above used reflection: the same config fails without it."""
    done = ghz_tool.ghz(
        ["--config", "deploy/ghz/new_match.json", "-n", "1", unreflecting.target], RUN_SECONDS
    )
    assert done.returncode != 0
    assert "reflection" in done.stderr
