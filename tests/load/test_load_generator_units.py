"""The load generator's config reading and report arithmetic, without a server."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import grpc
import pytest

from clients import load
from clients.load import ConfigError, Report


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("0", 0.0), ("10s", 10.0), ("1m30s", 90.0), ("250ms", 0.25), ("1.5h", 5400.0)],
)
def test_go_durations_parse(text: str, seconds: float) -> None:
    assert load.parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "10", "s", "10 s", "5sec", "-1s", 10])
def test_bad_durations_are_refused(text: object) -> None:
    with pytest.raises(ConfigError):
        load.parse_duration(text)


@pytest.mark.parametrize(
    "call",
    ["basra.v1.RulesService.Apply", "basra.v1.RulesService/Apply", "/basra.v1.RulesService/Apply"],
)
def test_calls_split_into_service_and_method(call: str) -> None:
    assert load.split_call(call) == ("basra.v1.RulesService", "Apply")


def test_defaults_are_ghz_defaults() -> None:
    config = load.config_from_dict({"call": "a.B.C", "host": "127.0.0.1:1"})
    assert (config.total, config.concurrency, config.connections) == (200, 50, 1)
    assert (config.timeout, config.rps, config.duration) == (20.0, 0.0, 0.0)
    assert config.data == ({},)
    assert config.path == "/a.B/C"


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"async": True}, "not supported"),
        ({"connections": 8, "concurrency": 4}, "cannot exceed"),
        ({"total": 0}, "total"),
        ({"data": []}, "non-empty"),
        ({"data": {}, "data-file": "x.json"}, "not both"),
        ({"metadata": {"a": 1}}, "metadata"),
        ({"rps": -5}, "rps"),
        ({"insecure": False}, "plaintext"),
        ({"cacert": "ca.pem"}, "not supported"),
    ],
)
def test_configs_that_cannot_run_as_written_are_refused(
    extra: dict[str, object], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        load.config_from_dict({"call": "a.B.C", "host": "127.0.0.1:1", **extra})


def test_data_file_is_found_beside_the_config(tmp_path: Path) -> None:
    (tmp_path / "items.json").write_text(json.dumps([{"seed": "AQ=="}, {"seed": "Ag=="}]))
    raw = {"call": "a.B.C", "host": "h:1", "data-file": "items.json"}
    config = load.config_from_dict(raw, tmp_path)
    assert [dict(item) for item in config.data] == [{"seed": "AQ=="}, {"seed": "Ag=="}]


def test_go_code_names_match_ghz() -> None:
    assert load.go_code_name(grpc.StatusCode.OK) == "OK"
    assert load.go_code_name(grpc.StatusCode.INVALID_ARGUMENT) == "InvalidArgument"
    assert load.go_code_name(grpc.StatusCode.CANCELLED) == "Canceled"
    assert load.go_code_name(grpc.StatusCode.FAILED_PRECONDITION) == "FailedPrecondition"


def test_report_percentiles_are_nearest_rank() -> None:
    # 1..1000 microseconds, shuffled order: the p-th percentile is p * 10 microseconds.
    latencies = tuple(((i * 389) % 1000 + 1) * 1000 for i in range(1000))
    report = Report(total_ns=2_000_000_000, latencies_ns=latencies, statuses={"OK": 1000})
    assert report.percentile_ns(10) == 100_000
    assert report.percentile_ns(50) == 500_000
    assert report.percentile_ns(99) == 990_000
    assert report.percentile_ns(99.9) == 999_000
    assert report.rps == pytest.approx(500.0)


def test_report_summary_and_json_add_up() -> None:
    latencies = (3_000_000, 1_000_000, 2_000_000, 10_000_000)
    report = Report(
        total_ns=50_000_000,
        latencies_ns=latencies,
        statuses={"OK": 3, "Aborted": 1},
        errors={"rpc error: code = Aborted desc = stale": 1},
    )
    data = report.as_json()
    assert data["count"] == 4
    assert (data["fastest"], data["slowest"], data["average"]) == (1_000_000, 10_000_000, 4_000_000)
    assert sum(h["count"] for h in data["histogram"]) == 4
    assert data["histogram"][0]["mark"] == pytest.approx(0.001)
    assert data["histogram"][-1]["mark"] == pytest.approx(0.010)
    assert [e["percentage"] for e in data["latencyDistribution"]] == list(load.PERCENTILES)
    text = report.summary()
    assert "  Count:\t4\n" in text
    assert "  Requests/sec:\t80.00\n" in text
    assert "  [Aborted]\t1 responses\n" in text
    assert "  [1]\trpc error: code = Aborted desc = stale\n" in text
    assert "  99.9 % in 10.00 ms" in text


def test_an_empty_report_prints_without_failing() -> None:
    report = Report(total_ns=0, latencies_ns=())
    assert report.as_json()["count"] == 0
    assert "Count:\t0" in report.summary()


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.mark.parametrize("flags", [[], ["--no-reflection"]])
def test_an_unreachable_server_is_reported_not_raised(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str]
) -> None:
    config = tmp_path / "config.json"
    config.write_text(
        json.dumps(
            {
                "call": "basra.v1.RulesService.NewMatch",
                "host": f"127.0.0.1:{_closed_port()}",
                "insecure": True,
                "connect-timeout": "300ms",
            }
        )
    )
    assert load.main([str(config), *flags]) == 2
    assert "cannot" in capsys.readouterr().err
