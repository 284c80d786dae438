"""The capture-plan table's file: the table every worker installs at start, shipped built.

engine.plans.table.build() searches every reachable floor shape once (seconds of work; why a
table: engine.plans.table); the result ships gzipped beside this module, and workers install
it before they serve. The file is what the engine builds, byte for byte once decompressed
(tests/service/test_service_plan_table.py checks it):

    .venv/bin/python -m service.plan_table            # rewrite service/plan_table.bin.gz
    .venv/bin/python -m service.plan_table --check    # exit 1 if it is not what the engine builds
"""

from __future__ import annotations

import argparse
import gzip
import sys
from collections.abc import Sequence
from pathlib import Path

from engine.plans import install_plan_table
from engine.plans.table import build

PATH = Path(__file__).with_name("plan_table.bin.gz")


def shipped() -> bytes:
    """The shipped table, decompressed."""
    return gzip.decompress(PATH.read_bytes())


def install() -> int:
    """Install the shipped table in the engine; return its number of shapes."""
    return install_plan_table(shipped())


def main(argv: Sequence[str] | None = None) -> int:
    """Rewrite the shipped table from the engine, or (--check) compare it with the engine's."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the file is stale")
    args = parser.parse_args(argv)
    built = build()
    if args.check:
        current = PATH.exists() and shipped() == built
        print(f"{PATH.name}: {'current' if current else 'stale: rewrite it'}")
        return 0 if current else 1
    # mtime 0: the same table gives the same file (for one zlib version).
    PATH.write_bytes(gzip.compress(built, compresslevel=9, mtime=0))
    print(f"wrote {PATH} ({len(built)} bytes, {PATH.stat().st_size} gzipped)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
