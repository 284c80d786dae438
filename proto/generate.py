"""Generate the Python gRPC code for proto/ into gen/ (reproducible, never edited by hand)."""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

from grpc_tools import protoc

ROOT = Path(__file__).resolve().parent.parent
PROTO_DIR = ROOT / "proto"
OUT_DIR = ROOT / "gen"


def main() -> int:
    """Regenerate gen/ from every .proto file under proto/."""
    with tempfile.TemporaryDirectory() as scratch:
        code = _generate(Path(scratch))
        if code == 0:
            _update(Path(scratch), OUT_DIR)
    return code


def _generate(out: Path) -> int:
    protos = sorted(p.relative_to(PROTO_DIR).as_posix() for p in PROTO_DIR.rglob("*.proto"))
    include = str(Path(protoc.__file__).resolve().parent / "_proto")
    args = [
        "grpc_tools.protoc",
        f"-I{PROTO_DIR}",
        f"-I{include}",
        f"--python_out={out}",
        f"--pyi_out={out}",
        f"--grpc_python_out={out}",
        *protos,
    ]
    code = protoc.main(args)
    if code != 0:
        print(f"protoc failed with exit code {code}", file=sys.stderr)
        return int(code)
    # The generated modules import each other as basra.v1.*, so every folder is a package.
    for folder in [p for p in out.rglob("*") if p.is_dir()]:
        (folder / "__init__.py").touch()
    for proto in protos:
        shutil.copy(PROTO_DIR / proto, out / proto)
    return 0


def _update(fresh: Path, out: Path) -> None:
    """Make `out` hold exactly the files of `fresh`, writing only those that differ.

    A server started from gen/ (the quick start's) may import from it while the test
    command's set-up runs this again: unchanged files are never removed or rewritten.
    """
    wanted = {p.relative_to(fresh) for p in fresh.rglob("*") if p.is_file()}
    for name in sorted(wanted):
        target = out / name
        data = (fresh / name).read_bytes()
        if not target.is_file() or target.read_bytes() != data:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
    if out.exists():
        for path in sorted(out.rglob("*"), reverse=True):
            stale = path.relative_to(out) not in wanted and "__pycache__" not in path.parts
            if stale and path.is_file():
                path.unlink()
            elif stale and path.is_dir() and not any(path.iterdir()):
                path.rmdir()


if __name__ == "__main__":
    sys.exit(main())
