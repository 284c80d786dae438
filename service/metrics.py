"""Prometheus metrics: plan-generation timing, standard gRPC server series, refusals by reason.

With several workers, prometheus-client runs in multiprocess mode: PROMETHEUS_MULTIPROC_DIR is
set before any worker starts, each worker writes its values to files there, and the parent
serves /metrics by aggregating them with MultiProcessCollector.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from prometheus_client import CollectorRegistry, Counter, Histogram, start_http_server
from prometheus_client.multiprocess import MultiProcessCollector

from engine.bot import Suggestion

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"

# 1 microsecond to 100 milliseconds, roughly three buckets per decade.
PLAN_BUCKETS = (
    1e-6,
    2.5e-6,
    5e-6,
    1e-5,
    2.5e-5,
    5e-5,
    1e-4,
    2.5e-4,
    5e-4,
    1e-3,
    2.5e-3,
    5e-3,
    1e-2,
    2.5e-2,
    5e-2,
    1e-1,
)
# Calls take well under a millisecond, so the buckets start far below Prometheus' defaults.
HANDLING_BUCKETS = (
    1e-4,
    2.5e-4,
    5e-4,
    1e-3,
    2.5e-3,
    5e-3,
    1e-2,
    2.5e-2,
    5e-2,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
)
_CALL_LABELS = ("grpc_type", "grpc_service", "grpc_method")
# One STRONG suggestion takes milliseconds; RANDOM and GREEDY take microseconds.
SUGGEST_BUCKETS = (1e-5, 1e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 1e-2, 2.5e-2, 5e-2, 0.1, 0.25, 1.0)
# Work per suggestion: deals sampled (at most a few dozen) and search nodes (thousands).
DEALS_BUCKETS = (0, 1, 2, 4, 8, 16, 32, 64, 128)
NODES_BUCKETS = (0, 10, 100, 500, 1000, 2500, 5000, 10_000, 25_000, 100_000)


@dataclass(frozen=True, slots=True)
class Metrics:
    """The service's metric families; create one set per process."""

    plan_seconds: Histogram
    started: Counter
    handled: Counter
    handling_seconds: Histogram
    refusals: Counter
    suggest_seconds: Histogram
    suggest_deals: Histogram
    suggest_nodes: Histogram

    @classmethod
    def create(cls, registry: CollectorRegistry | None) -> Metrics:
        """Create the families in `registry` (None: unregistered, as multiprocess workers do)."""
        return cls(
            plan_seconds=Histogram(
                "basra_plan_generation_seconds",
                "Time to generate the capture plans of one card.",
                buckets=PLAN_BUCKETS,
                registry=registry,
            ),
            started=Counter(
                "grpc_server_started_total",
                "Total number of RPCs started on the server.",
                _CALL_LABELS,
                registry=registry,
            ),
            handled=Counter(
                "grpc_server_handled_total",
                "Total number of RPCs completed on the server, regardless of success or failure.",
                (*_CALL_LABELS, "grpc_code"),
                registry=registry,
            ),
            handling_seconds=Histogram(
                "grpc_server_handling_seconds",
                "Histogram of response latency (seconds) of gRPC that had been application-level "
                "handled by the server.",
                _CALL_LABELS,
                buckets=HANDLING_BUCKETS,
                registry=registry,
            ),
            refusals=Counter(
                "basra_refusals_total",
                "Refused calls by the reason given in their ErrorInfo.",
                ("grpc_method", "reason"),
                registry=registry,
            ),
            suggest_seconds=Histogram(
                "basra_suggest_seconds",
                "Time the bot took to choose one SuggestMove action, by level.",
                ("level",),
                buckets=SUGGEST_BUCKETS,
                registry=registry,
            ),
            suggest_deals=Histogram(
                "basra_suggest_deals",
                "Deals the bot sampled and searched for one SuggestMove, by level.",
                ("level",),
                buckets=DEALS_BUCKETS,
                registry=registry,
            ),
            suggest_nodes=Histogram(
                "basra_suggest_nodes",
                "Search nodes the bot visited for one SuggestMove, by level.",
                ("level",),
                buckets=NODES_BUCKETS,
                registry=registry,
            ),
        )

    def observe_suggestion(self, suggestion: Suggestion, seconds: float) -> None:
        """Record one suggestion: its time and its work, by level."""
        level = suggestion.level.value
        self.suggest_seconds.labels(level).observe(seconds)
        self.suggest_deals.labels(level).observe(suggestion.deals)
        self.suggest_nodes.labels(level).observe(suggestion.nodes)


def multiprocess_registry(directory: str) -> CollectorRegistry:
    """Return a registry that aggregates the values every worker wrote to `directory`."""
    registry = CollectorRegistry()
    MultiProcessCollector(registry, path=directory)  # type: ignore[no-untyped-call]
    return registry


def prepare_directory(directory: str) -> str:
    """Create the multiprocess directory and remove values left by an earlier run."""
    path = Path(directory)
    path.mkdir(parents=True, exist_ok=True)
    for stale in path.glob("*.db"):
        stale.unlink()
    return str(path)


def enable_multiprocess(directory: str) -> None:
    """Point prometheus-client at `directory`; processes started afterwards inherit it."""
    os.environ[MULTIPROC_ENV] = directory


def serve(host: str, port: int, registry: CollectorRegistry) -> int:
    """Serve /metrics over HTTP on a daemon thread; return the bound port."""
    server, _thread = start_http_server(port, addr=host.strip("[]"), registry=registry)
    return int(server.server_address[1])
