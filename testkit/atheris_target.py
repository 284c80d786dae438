"""The coverage-guided fuzz target of each RPC of the contract (atheris: libFuzzer for Python).

An input (testkit.fuzz_inputs) is run through the handler a worker registers for the RPC, from
request bytes to response bytes, and held to the rules of testkit.fuzz_calls; an unexpected
outcome raises, which ends the run with libFuzzer's crash report and the input saved under
-artifact_prefix. engine/, wire/ and service/ are instrumented, so libFuzzer keeps the inputs
that reach new code. Half the mutations are structure-aware (a state, an action, a field, a
batch's items and header, changed in the request parsed), half libFuzzer's own on the bytes.

    .venv/bin/python -m testkit.atheris_target Apply -runs=20000 -artifact_prefix=/tmp/fz/ DIR

The first argument names the RPC, the others are libFuzzer's (flags, then corpus directories;
new inputs go to the first, DIR). The RPC's seeds (from the golden corpus, written to a
temporary directory that goes when the run ends) and the repository's corpus of it
(tests/fuzz/corpus/<RPC>/) are added after them, so libFuzzer writes in neither. Unless given,
inputs are bounded just past the service's own request bound (for BatchApply: a batch of
items at most a few hundred bytes each; its huge items are made by padding, see fuzz_inputs),
each input to 20 s (-timeout) and the process to 1024 MiB (-rss_limit_mb): a slower or larger
one is a finding. libFuzzer exits the process it runs in without Python's clean-up, so the
command runs it in a child process of its own.
"""

from __future__ import annotations

import random
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from testkit.rpcs import methods

CHILD = "--in-process"
TIMEOUT_SECONDS = 20
RSS_LIMIT_MB = 1024
LIMIT_SLACK = 64  # bytes past the request bound, so that inputs just past it are made too
BATCH_INPUT_BYTES = 128 * 1024


class Finding(Exception):  # noqa: N818 (the target's failure: the input broke a rule)
    """An input whose outcome broke the rules."""


def fuzz(method: str, argv: list[str]) -> None:
    """Run `method`'s target under libFuzzer with `argv` (which exits the process)."""
    import atheris  # type: ignore[import-untyped]

    with atheris.instrument_imports(include=["engine", "wire", "service"]):
        from testkit import fuzz_inputs
        from testkit.fuzz_calls import Worker

    worker = Worker()

    def test_one_input(data: bytes) -> None:
        found = fuzz_inputs.run_input(worker, method, data)
        if found:
            raise Finding("; ".join(found))

    def mutator(data: bytes, max_size: int, seed: int) -> bytes:
        rnd = random.Random(seed)
        if rnd.random() < 0.5:
            changed = fuzz_inputs.mutate(method, data, rnd, max_size)
            if changed is not None:
                return changed
        return bytes(atheris.Mutate(data, max_size))

    # libFuzzer runs its argv[0] through the shell for -merge's inner runs: this command.
    itself = f"{shlex.quote(sys.executable)} -m testkit.atheris_target {CHILD} {method}"
    atheris.Setup([itself, *argv], test_one_input, custom_mutator=mutator)
    atheris.Fuzz()


def libfuzzer_args(method: str, args: list[str], seeds: Path) -> list[str]:
    """libFuzzer's arguments: the caller's, the defaults it left out, the seed directories."""
    from service.config import Config
    from testkit.fuzz_calls import BATCH
    from testkit.fuzz_inputs import CORPUS

    limit = BATCH_INPUT_BYTES if method == BATCH else Config().max_message_bytes + LIMIT_SLACK
    defaults = {"-max_len": limit, "-timeout": TIMEOUT_SECONDS, "-rss_limit_mb": RSS_LIMIT_MB}
    flags = [a for a in args if a.startswith("-")]
    given = {flag.split("=", 1)[0] for flag in flags}
    flags += [f"{name}={value}" for name, value in defaults.items() if name not in given]
    directories = [a for a in args if not a.startswith("-")]
    directories += [str(seeds), str(CORPUS / method)]
    return flags + [d for d in directories if Path(d).is_dir()]


def run(method: str, args: list[str], **options: Any) -> subprocess.CompletedProcess[Any]:
    """Run `method`'s target in a child process with libFuzzer's `args` and the seeds; return
    the finished child (`options` go to subprocess.run)."""
    from testkit.fuzz_inputs import seeds

    with tempfile.TemporaryDirectory(prefix=f"fuzz-seeds-{method}-") as folder:
        for number, data in enumerate(seeds(method)):
            (Path(folder) / f"golden-{number:04d}").write_bytes(data)
        argv = libfuzzer_args(method, args, Path(folder))
        command = [sys.executable, "-m", "testkit.atheris_target", CHILD, method, *argv]
        return subprocess.run(command, check=False, **options)


def main() -> int:
    """Command line: the RPC's target under libFuzzer, in a child process; its exit status."""
    if len(sys.argv) > 2 and sys.argv[1] == CHILD:
        fuzz(sys.argv[2], sys.argv[3:])
    if len(sys.argv) < 2 or sys.argv[1] not in methods():
        sys.exit(f"usage: python -m testkit.atheris_target {{{','.join(methods())}}} [libFuzzer]")
    return run(sys.argv[1], sys.argv[2:]).returncode


if __name__ == "__main__":
    sys.exit(main())
