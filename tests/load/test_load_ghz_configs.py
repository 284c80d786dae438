"""The ghz configs of deploy/ghz as files, and `basra-rules load`, which runs them too.

ghz itself runs every config against a live server in test_ghz.py.
"""

from __future__ import annotations

import base64
import json
import subprocess
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
import yaml
from basra.v1 import rules_pb2 as pb

from clients import load
from service.config import Config
from testkit import ghz_data, harness
from testkit.harness import ServedProcess

REPO = Path(__file__).resolve().parents[2]
GHZ_DIR = REPO / "deploy" / "ghz"

CONFIGS = sorted(GHZ_DIR.glob("*.json"))
CHART_VALUES = REPO / "helm" / "basra-rules" / "values.yaml"
RUN_SECONDS = 60


@pytest.fixture(scope="module")
def server() -> Iterator[ServedProcess]:
    """One server for the module (logs at warning, as the load figures are measured)."""
    served = harness.start(log_level="warning", cwd=REPO)
    yield served
    served.stop()


def _raw(path: Path) -> dict[str, Any]:
    raw = json.loads(path.read_text(encoding="utf-8"))
    assert isinstance(raw, dict)
    return raw


def test_there_is_a_config_for_each_load_tested_rpc() -> None:
    calls = {_raw(path)["call"] for path in CONFIGS}
    assert calls == {
        "basra.v1.RulesService.NewMatch",
        "basra.v1.RulesService.Apply",
        "basra.v1.RulesService.LegalMoves",
        "basra.v1.RulesService.SuggestMove",
        "basra.v1.RulesService.BatchApply",
    }


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_config_uses_reflection_and_enough_connections(path: Path) -> None:
    raw = _raw(path)
    config = load.config_from_dict(raw, REPO)
    assert "proto" not in raw and "protoset" not in raw, "configs rely on server reflection"
    assert raw.get("insecure") is True
    # SO_REUSEPORT balances connections, not calls: each worker process needs one at least.
    workers = yaml.safe_load(CHART_VALUES.read_text())["server"]["workers"]
    assert config.connections >= workers
    assert config.concurrency >= config.connections
    # ghz opens data-file relative to its working directory: the docs run it from the root.
    assert (REPO / raw["data-file"]).is_file()


def test_the_batch_config_never_holds_more_items_than_a_worker_admits() -> None:
    """All its batches in flight, landed on one worker, fit that worker's default bound."""
    config = load.config_from_dict(_raw(GHZ_DIR / "batch_apply.json"), REPO)
    assert config.concurrency * ghz_data.BATCH_ITEMS <= Config().admission_limit


def test_data_files_are_what_the_script_generates() -> None:
    for name, text in ghz_data.render_all().items():
        committed = (GHZ_DIR / "data" / name).read_text(encoding="utf-8")
        assert committed == text, f"{name} is stale: run python -m testkit.ghz_data"


@pytest.mark.parametrize(
    "source",
    [
        {"proto": "proto/basra/v1/rules.proto", "import-paths": ["proto"]},
        {"protoset": "no/such/file.protoset"},
    ],
    ids=["proto", "protoset"],
)
def test_a_proto_or_protoset_key_is_accepted_and_ignored(
    server: ServedProcess, tmp_path: Path, source: dict[str, Any]
) -> None:
    """A config a ghz user gave a .proto or protoset runs unchanged: the request type still
    comes from reflection (the file is not read, so it need not even exist)."""
    raw = {**_raw(GHZ_DIR / "new_match.json"), "total": 20, "concurrency": 2, "connections": 1}
    report = json.loads(_load(server, tmp_path, {**raw, **source}, "--json"))
    assert report["statusCodeDistribution"] == {"OK": 20}


def _load(server: ServedProcess, tmp_path: Path, raw: dict[str, Any], *flags: str) -> str:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**raw, "host": server.target}))
    done = subprocess.run(
        [*harness.command(), "load", str(path), *flags],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=RUN_SECONDS,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_load_run_summary_adds_up(server: ServedProcess, tmp_path: Path) -> None:
    raw = {**_raw(GHZ_DIR / "apply.json"), "total": 300, "concurrency": 6, "connections": 2}
    report = json.loads(_load(server, tmp_path, raw, "--json"))
    assert report["count"] == 300
    assert report["statusCodeDistribution"] == {"OK": 300}
    assert report["errorDistribution"] == {}
    latencies = [entry["latency"] for entry in report["latencyDistribution"]]
    assert [entry["percentage"] for entry in report["latencyDistribution"]] == list(
        load.PERCENTILES
    )
    assert report["fastest"] <= latencies[0]
    assert latencies == sorted(latencies)
    assert latencies[-1] <= report["slowest"]
    assert report["fastest"] <= report["average"] <= report["slowest"]
    assert sum(bucket["count"] for bucket in report["histogram"]) == 300
    assert report["rps"] == pytest.approx(300 / (report["total"] / 1e9), rel=1e-6)
    # A call cannot take longer than the whole run, and the run took some time.
    assert 0 < report["slowest"] <= report["total"]


def test_load_summary_text_and_refusals_are_counted(server: ServedProcess, tmp_path: Path) -> None:
    # The same states with a stale expected_seq: every call is refused with ABORTED.
    items = json.loads((GHZ_DIR / "data" / "apply.json").read_text())[:5]
    stale = [{**item, "expected_seq": item.get("expected_seq", 0) + 1} for item in items]
    raw = {
        "call": "basra.v1.RulesService.Apply",
        "host": server.target,
        "insecure": True,
        "total": 40,
        "concurrency": 4,
        "connections": 2,
        "data": stale,
    }
    text = _load(server, tmp_path, raw)
    assert "Summary:" in text
    assert "  Count:\t40\n" in text
    assert "  [Aborted]\t40 responses\n" in text
    assert "Error distribution:" in text
    counted = [
        int(line.split("]")[0].strip(" ["))
        for line in text.split("Error distribution:")[1].split("\n")
        if line.strip()
    ]
    assert sum(counted) == 40


def test_rate_limited_duration_run_stays_within_its_rate(
    server: ServedProcess, tmp_path: Path
) -> None:
    raw = {**_raw(GHZ_DIR / "legal_moves.json"), "concurrency": 4, "connections": 2}
    report = json.loads(_load(server, tmp_path, raw, "--json", "--rps", "100", "-z", "500ms"))
    # Pacing admits call k at k/rps seconds: at most 51 start within half a second.
    assert 1 <= report["count"] <= 51
    assert sum(report["statusCodeDistribution"].values()) == report["count"]


def test_a_method_the_server_lacks_is_refused_before_any_load(server: ServedProcess) -> None:
    with pytest.raises(load.ConfigError, match="does not list"):
        load.request_class(server.target, "basra.v1.RulesService", "Shuffle")
    with pytest.raises(load.ConfigError, match="does not list"):
        load.request_class(server.target, "basra.v9.Nothing", "Apply")


def test_without_reflection_the_generated_code_names_the_request(tmp_path: Path) -> None:
    bare = harness.start(["--no-reflection"], log_level="warning", cwd=REPO)
    try:
        with pytest.raises(load.ConfigError):
            load.request_class(bare.target, "basra.v1.RulesService", "Apply")
        cls = load.request_class(
            bare.target, "basra.v1.RulesService", "Apply", use_reflection=False
        )
        assert cls.DESCRIPTOR.full_name == "basra.v1.ApplyRequest"
        raw = {**_raw(GHZ_DIR / "new_match.json"), "total": 20, "concurrency": 2, "connections": 1}
        report = json.loads(_load(bare, tmp_path, raw, "--json", "--no-reflection"))
        assert report["statusCodeDistribution"] == {"OK": 20}
    finally:
        bare.stop()


def test_each_item_of_the_batch_data_is_answered(server: ServedProcess) -> None:
    """A BatchApply call is OK even when its items are refused: every item of the committed
    batches must get its answer, not a refusal, for the load to be Apply's."""
    batches = ghz_data.read("batch_apply.json", pb.BatchApplyRequest)
    assert batches and all(len(b.requests) == ghz_data.BATCH_ITEMS for b in batches)
    with grpc.insecure_channel(server.target) as channel:
        call = channel.unary_unary(
            "/basra.v1.RulesService/BatchApply",
            pb.BatchApplyRequest.SerializeToString,
            pb.BatchApplyResponse.FromString,
        )
        for request in batches:
            answer = call(request, timeout=10)
            kinds = [result.WhichOneof("result") for result in answer.results]
            assert kinds == ["response"] * len(request.requests), answer


def test_load_drives_batch_apply_through_reflection(server: ServedProcess, tmp_path: Path) -> None:
    """`basra-rules load` runs the BatchApply config as it is (a batch is a unary call)."""
    raw = {**_raw(GHZ_DIR / "batch_apply.json"), "total": 40, "concurrency": 4, "connections": 2}
    report = json.loads(_load(server, tmp_path, raw, "--json"))
    assert report["count"] == 40
    assert report["statusCodeDistribution"] == {"OK": 40}


def test_a_signed_batch_load_has_every_item_answered(tmp_path: Path) -> None:
    """Against a server that signs, `load` with its keys seals each batch item's state: every
    item of every batch is answered OK (the server's line of each batch counts its items'
    outcomes); without the keys every item is refused, though each call is OK."""
    keys = tmp_path / "keys"
    keys.write_text("k1:" + base64.b64encode(bytes(range(32))).decode() + "\n")
    served = harness.start(["--workers", "1"], env={"BASRA_SIGNING_KEYS_FILE": str(keys)}, cwd=REPO)
    try:
        raw = {
            **_raw(GHZ_DIR / "batch_apply.json"),
            "total": 30,
            "concurrency": 4,
            "connections": 2,
        }
        signed = _load(served, tmp_path, raw, "--json", "--signing-keys-file", str(keys))
        assert json.loads(signed)["statusCodeDistribution"] == {"OK": 30}
        assert _item_outcomes(served, 30) == {"OK": 30 * ghz_data.BATCH_ITEMS}
        unsigned = _load(served, tmp_path, raw, "--json")
        assert json.loads(unsigned)["statusCodeDistribution"] == {"OK": 30}
        assert _item_outcomes(served, 60) - Counter({"OK": 30 * ghz_data.BATCH_ITEMS}) == {
            "BAD_SIGNATURE": 30 * ghz_data.BATCH_ITEMS
        }
    finally:
        assert served.stop() == 0


def _item_outcomes(served: ServedProcess, batches: int) -> Counter[str]:
    """The items' outcomes summed over the first `batches` BatchApply lines of the server."""
    method = "basra.v1.RulesService/BatchApply"
    served.wait_for("rpc", count=batches, method=method)
    lines = served.find("rpc", method=method)[:batches]
    return sum((Counter(line["outcomes"]) for line in lines), Counter())
