"""What every benchmark measures with and reports by: timers, percentiles, the machine, JSON.

A benchmark runs as a module from the repository root (`python -m benchmarks.NAME`), prints
a header naming itself, the time and its command (`header`), its figures, and ends with
`finish`: the load average at the end (other work on the machine skews every figure) and,
when asked, the run's figures as JSON with the machine and software versions beside them.
"""

from __future__ import annotations

import atexit
import datetime
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import grpc

T = TypeVar("T")


def scratch(prefix: str) -> str:
    """A new directory of this run's own, removed when the process exits."""
    directory = tempfile.mkdtemp(prefix=prefix)
    atexit.register(shutil.rmtree, directory, ignore_errors=True)
    return directory


def memo_fill(*memos: Any) -> str:
    """How full each lru_cache memo is and how often it answered, by name."""
    out = []
    for memo in memos:
        info = memo.cache_info()
        rate = info.hits / max(1, info.hits + info.misses)
        out.append(f"{memo.__name__} {info.currsize}/{info.maxsize} ({rate:.1%} hits)")
    return ", ".join(out)


def now() -> datetime.datetime:
    """The current time in UTC: when a run started."""
    return datetime.datetime.now(datetime.UTC)


def command(name: str, argv: Sequence[str] | None = None) -> str:
    """The command line that runs benchmark `name` with these arguments (default: this run's)."""
    return " ".join(["python -m", f"benchmarks.{name}", *(sys.argv[1:] if argv is None else argv)])


def header(name: str, started: datetime.datetime, argv: Sequence[str] | None = None) -> str:
    """The first line of a benchmark's output: what ran, when, and its command."""
    return f"{name} {started:%Y-%m-%d %H:%M} UTC; command: {command(name, argv)}"


def machine() -> dict[str, Any]:
    """The machine and the software versions the figures were measured with."""
    model = ""
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return {
        "loadavg": load_average(),
        "cpus": os.cpu_count(),
        "cpu_model": model,
        "python": platform.python_version(),
        "grpcio": grpc.__version__,
        "platform": platform.platform(),
    }


def load_average() -> list[str]:
    """The 1, 5 and 15 minute load averages, as /proc/loadavg writes them."""
    return Path("/proc/loadavg").read_text().split()[:3]


def finish(
    json_out: Path | None,
    started: datetime.datetime,
    argv: Sequence[str] | None,
    figures: dict[str, Any],
) -> None:
    """Say how busy the machine was at the end; write the run's figures as JSON when asked."""
    print(f"load average at the end: {' '.join(load_average())}")
    if json_out:
        head = {
            "started": started.isoformat(),
            "argv": list(sys.argv[1:] if argv is None else argv),
        }
        json_out.write_text(json.dumps({**head, "machine": machine(), **figures}, indent=2))


def percentile(ordered: Sequence[float], q: float) -> float:
    """The q-quantile (0 <= q <= 1) of sorted values, by nearest rank."""
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def summary(ns: Sequence[int]) -> dict[str, float]:
    """Count, median, 90th and 99th percentile, max and mean of nanosecond timings, in µs."""
    ordered = sorted(ns)
    return {
        "n": len(ordered),
        "median": percentile(ordered, 0.5) / 1000,
        "p90": percentile(ordered, 0.90) / 1000,
        "p99": percentile(ordered, 0.99) / 1000,
        "max": ordered[-1] / 1000,
        "mean": statistics.fmean(ordered) / 1000,
    }


def timings(items: Sequence[T], call: Callable[[T], object]) -> list[int]:
    """Time `call` on each item, in order: nanoseconds per call, the timer's own cost included."""
    clock = time.perf_counter_ns
    out = []
    for item in items:
        start = clock()
        call(item)
        out.append(clock() - start)
    return out


def _nothing() -> None:
    return None


def pass_us(
    call: Callable[[T], object], items: Sequence[T], end: Callable[[], object] = _nothing
) -> float:
    """Microseconds per call of one pass of `call` over every item (`end` ends the pass and is
    charged to it: work deferred by the calls, such as exporting their spans)."""
    started = time.perf_counter()
    for item in items:
        call(item)
    end()
    return (time.perf_counter() - started) / len(items) * 1e6
