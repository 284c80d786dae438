"""What docs/http.md says of the gateway is what the binary does, and what is generated from
proto/ (the gateway's stubs, the OpenAPI description) is what the pinned generators write."""

from __future__ import annotations

import filecmp
import json
import os
import subprocess
from pathlib import Path

from testkit import http_gateway
from testkit.http_gateway import REPO

GATEWAY = REPO / "deploy" / "gateway"
BUF = REPO / ".ci" / "tools" / "node_modules" / ".bin" / "buf"
PLUGINS = REPO / ".ci" / "tools" / "go" / "bin"
OPENAPI = REPO / "docs" / "openapi" / "rules.swagger.json"
RPCS = ("NewMatch", "Apply", "LegalMoves", "PlayerView", "Replay", "SuggestMove", "BatchApply")


def test_the_documented_refusals_and_code_mapping_are_the_binarys() -> None:
    described = http_gateway.described()
    reasons = {r["reason"]: (r["http"], r["code"], r["when"]) for r in described["reasons"]}
    assert http_gateway.documented_reasons() == reasons
    assert http_gateway.documented_mapping() == described["codes"]
    assert len(described["codes"]) == 17  # every google.rpc.Code


def _files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}


def test_regenerating_the_stubs_and_the_openapi_description_changes_nothing(
    tmp_path: Path,
) -> None:
    """buf generate with deploy/gateway/buf.gen.yaml and the pinned plugins, into a fresh
    folder, writes the committed pb/ and docs/openapi/ byte for byte."""
    for tool in (BUF, *(PLUGINS / p for p in ("protoc-gen-go", "protoc-gen-go-grpc"))):
        assert tool.exists(), f"{tool.relative_to(REPO)} is missing: run `bash .ci/setup dev`"
    for plugin in ("protoc-gen-grpc-gateway", "protoc-gen-openapiv2"):
        assert (PLUGINS / plugin).exists(), f"{plugin} is missing: run `bash .ci/setup dev`"
    # The OpenAPI output goes two folders up from the output root, as from deploy/gateway.
    out = tmp_path / "deploy" / "gateway"
    out.mkdir(parents=True)
    subprocess.run(
        [str(BUF), "generate", "--output", str(out)],
        cwd=GATEWAY,
        env={**os.environ, "PATH": f"{PLUGINS}{os.pathsep}{os.environ['PATH']}"},
        check=True,
        capture_output=True,
        timeout=120,
    )
    fresh, committed = out / "pb", GATEWAY / "pb"
    assert _files(fresh) == _files(committed) != set()
    for name in _files(committed):
        assert filecmp.cmp(fresh / name, committed / name, shallow=False), name
    assert (tmp_path / "docs" / "openapi" / OPENAPI.name).read_bytes() == OPENAPI.read_bytes()


def test_the_openapi_description_has_every_method_as_post_of_its_grpc_path() -> None:
    described = json.loads(OPENAPI.read_text(encoding="utf-8"))
    assert described["swagger"] == "2.0"
    paths = described["paths"]
    assert set(paths) == {f"/basra.v1.RulesService/{rpc}" for rpc in RPCS}
    for rpc in RPCS:
        (method,) = paths[f"/basra.v1.RulesService/{rpc}"]
        assert method == "post"
        operation = paths[f"/basra.v1.RulesService/{rpc}"]["post"]
        assert operation["responses"]["200"]["schema"]["$ref"] == f"#/definitions/v1{rpc}Response"
        assert (
            operation["responses"]["default"]["schema"]["$ref"] == "#/definitions/googleRpcStatus"
        )
