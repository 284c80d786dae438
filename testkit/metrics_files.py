"""Counters read from prometheus-client's multiprocess files, as a server's /metrics reads them.

Each worker writes its own file into the metrics directory; the image test reads what a
container's workers left there, the cluster tests what each pod's workers hold (one worker's
file alone gives that worker's own counts).
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from prometheus_client import CollectorRegistry
from prometheus_client.multiprocess import MultiProcessCollector


def counter_total(files: Sequence[Path], family: str, labels: Mapping[str, str]) -> float:
    """A family's samples with the given labels, summed, read from multiprocess files the way
    /metrics reads them (prometheus-client's MultiProcessCollector)."""
    with tempfile.TemporaryDirectory() as scratch:
        for path in files:
            shutil.copy2(path, Path(scratch) / path.name)
        registry = CollectorRegistry()
        MultiProcessCollector(registry, scratch)  # type: ignore[no-untyped-call]
        return sum(
            sample.value
            for metric in registry.collect()
            for sample in metric.samples
            if sample.name == family and all(sample.labels.get(k) == v for k, v in labels.items())
        )
