"""Generate the Python gRPC code for proto/ into gen/ (reproducible, never edited by hand)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from grpc_tools import protoc

ROOT = Path(__file__).resolve().parent.parent
PROTO_DIR = ROOT / "proto"
OUT_DIR = ROOT / "gen"


def main() -> int:
    """Regenerate gen/ from every .proto file under proto/."""
    protos = sorted(p.relative_to(PROTO_DIR).as_posix() for p in PROTO_DIR.rglob("*.proto"))
    if OUT_DIR.exists():
        shutil.rmtree(OUT_DIR)
    OUT_DIR.mkdir()
    include = str(Path(protoc.__file__).resolve().parent / "_proto")
    args = [
        "grpc_tools.protoc",
        f"-I{PROTO_DIR}",
        f"-I{include}",
        f"--python_out={OUT_DIR}",
        f"--pyi_out={OUT_DIR}",
        f"--grpc_python_out={OUT_DIR}",
        *protos,
    ]
    code = protoc.main(args)
    if code != 0:
        print(f"protoc failed with exit code {code}", file=sys.stderr)
        return int(code)
    # The generated modules import each other as basra.v1.*, so every folder is a package.
    for folder in [p for p in OUT_DIR.rglob("*") if p.is_dir()]:
        (folder / "__init__.py").touch()
    for proto in protos:
        shutil.copy(PROTO_DIR / proto, OUT_DIR / proto)
    return 0


if __name__ == "__main__":
    sys.exit(main())
