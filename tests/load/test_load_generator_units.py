"""The load generator's config reading and report arithmetic, without a server."""

from __future__ import annotations

import base64
import json
import socket
from pathlib import Path

import grpc
import pytest
from basra.v1 import rules_pb2 as pb

from clients import load
from clients.channels import ClientTLS
from clients.load import ConfigError, Report
from wire.signing import parse_keys


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
        ({"skipTLS": True}, "skipTLS"),
        ({"insecure": True, "cacert": "ca.pem"}, "insecure"),
        ({"insecure": "no"}, "true or false"),
        ({"cert": 5}, "strings"),
    ],
)
def test_configs_that_cannot_run_as_written_are_refused(
    extra: dict[str, object], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        load.config_from_dict({"call": "a.B.C", "host": "127.0.0.1:1", **extra})


def test_tls_is_what_ghz_keys_ask_for() -> None:
    """insecure false, or any of cacert, cert, key and cname, means TLS with those files;
    insecure true, or none of them, plaintext."""
    base = {"call": "a.B.C", "host": "h:1"}
    assert load.config_from_dict(base).tls is None
    assert load.config_from_dict({**base, "insecure": True}).tls is None
    assert load.config_from_dict({**base, "insecure": False}).tls == ClientTLS()
    files = {"cacert": "ca.pem", "cert": "c.pem", "key": "k.pem", "cname": "rules"}
    assert load.config_from_dict({**base, **files}).tls == ClientTLS(
        "ca.pem", "c.pem", "k.pem", "rules"
    )


def test_host_from_the_command_line_wins_and_fills_a_config_without_one() -> None:
    """`load --host` stands in for a config's missing host, and wins over a given one."""
    without = {"call": "a.B.C"}
    assert load.config_from_dict(without, host="10.0.0.1:50051").host == "10.0.0.1:50051"
    assert load.config_from_dict({**without, "host": "h:1"}, host="g:2").host == "g:2"
    with pytest.raises(ConfigError, match="--host"):
        load.config_from_dict(without)


def test_states_are_sealed_as_a_server_with_the_keys_seals_them() -> None:
    """With keys, each request's plain state moves into a signed_state under the first key;
    requests without a state are left alone."""
    keyring = parse_keys("k2:" + base64.b64encode(bytes(range(32))).decode())
    state = pb.State(seq=7, dealer=1)
    requests = (
        pb.ApplyRequest(state=state, expected_seq=7).SerializeToString(),
        pb.ApplyRequest(expected_seq=8).SerializeToString(),
    )
    first, second = load.seal_states(pb.ApplyRequest, requests, keyring)
    sealed = pb.ApplyRequest.FromString(first)
    assert not sealed.HasField("state") and sealed.expected_seq == 7
    assert pb.State.FromString(sealed.signed_state.state) == state
    assert sealed.signed_state.key_id == "k2"
    assert keyring.verify("k2", sealed.signed_state.state, sealed.signed_state.signature)
    assert second == requests[1]
    news = (pb.NewMatchRequest(seed=b"x").SerializeToString(),)
    assert load.seal_states(pb.NewMatchRequest, news, keyring) == news


def test_each_item_of_a_batch_is_sealed_as_a_unary_request_is() -> None:
    """A BatchApplyRequest's items each get the signed_state a unary ApplyRequest of the same
    item would get; an item without a state is left alone, and so is the batch's order."""
    keyring = parse_keys("k2:" + base64.b64encode(bytes(range(32))).decode())
    items = [
        pb.ApplyRequest(state=pb.State(seq=3), expected_seq=3),
        pb.ApplyRequest(expected_seq=9),
        pb.ApplyRequest(state=pb.State(seq=5, dealer=1)),
    ]
    (data,) = load.seal_states(
        pb.BatchApplyRequest,
        (pb.BatchApplyRequest(requests=items).SerializeToString(),),
        keyring,
    )
    alone = load.seal_states(pb.ApplyRequest, [i.SerializeToString() for i in items], keyring)
    sealed = pb.BatchApplyRequest.FromString(data).requests
    assert [item.SerializeToString() for item in sealed] == list(alone)
    assert [item.HasField("signed_state") for item in sealed] == [True, False, True]
    assert keyring.verify("k2", sealed[2].signed_state.state, sealed[2].signed_state.signature)


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
