"""The golden tests import the corpus helpers as tests.golden.* and the independent scorer."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# The repository root (for tests.golden.*) and the engine tests' directory (for brute, the
# scorer written from docs/rules.md alone), whichever way pytest was started.
for path in (ROOT, ROOT / "tests" / "engine"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))
