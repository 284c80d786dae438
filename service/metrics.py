"""Prometheus metrics: plan-generation timing, standard gRPC server series, refusals by reason,
the bot's time and work per suggestion, the requests per batch, and the load a worker holds
(calls held against the admission bound, the wait before work starts).

With several workers, prometheus-client runs in multiprocess mode: PROMETHEUS_MULTIPROC_DIR is
set before any worker starts, each worker writes its values to files there, and the parent
serves /metrics by aggregating them with MultiProcessCollector.

In that mode every update of a value takes a lock and writes a memory-mapped file, several
microseconds each, and a call makes several (one per card for the plan timing). So calls
update a Tally instead: plain counts added up under one lock, which a worker writes to the
families every FLUSH_SECONDS and once more when it stops, off the calls' path, through
prometheus-client's public calls only. Its public API adds a count to a counter in one call
but observes one value at a time into a Histogram, so each histogram is written as two
counters (`Tallied`: per bucket, and the sum) and shown as the histogram it is by a collector
(`HistogramView`) in the registry /metrics serves. The totals in /metrics are exact; they
only trail the calls by up to FLUSH_SECONDS.
"""

from __future__ import annotations

import os
import tempfile
import threading
from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from prometheus_client import CollectorRegistry, Counter, Gauge, Metric, start_http_server
from prometheus_client.core import HistogramMetricFamily
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from engine.bot import Suggestion

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"


def _decades(first: int, last: int) -> tuple[float, ...]:
    """Buckets at 1, 2.5 and 5 times each power of ten from 10**first, then 10**last."""
    steps = [float(f"{m}e{e}") for e in range(first, last) for m in ("1", "2.5", "5")]
    return (*steps, float(f"1e{last}"))


# 1 microsecond to 100 milliseconds, three buckets per decade.
PLAN_BUCKETS = _decades(-6, -1)
# Calls take well under a millisecond, so the buckets start far below Prometheus' defaults.
HANDLING_BUCKETS = _decades(-4, 1)
# The standard grpc_server_* labels, and the transport a call came by: "grpc", or "http" for a
# call of the HTTP/JSON port (basra-gateway marks its calls; service/interceptors.py reads it).
_CALL_LABELS = ("grpc_type", "grpc_service", "grpc_method", "transport")
# How often a worker writes its tallied counts to the metric families.
FLUSH_SECONDS = 1.0
# One STRONG suggestion takes milliseconds; RANDOM and GREEDY take microseconds.
SUGGEST_BUCKETS = (1e-5, 1e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 1e-2, 2.5e-2, 5e-2, 0.1, 0.25, 1.0)
# Work per suggestion: deals sampled (at most a few dozen) and search nodes (thousands).
DEALS_BUCKETS = (0, 1, 2, 4, 8, 16, 32, 64, 128)
NODES_BUCKETS = (0, 10, 100, 500, 1000, 2200, 5000, 10_000, 20_000, 100_000)
_SUGGEST_FAMILIES = (SUGGEST_BUCKETS, DEALS_BUCKETS, NODES_BUCKETS)
# The wait before work: from well under a millisecond (an idle worker) to past any deadline.
WAIT_BUCKETS = HANDLING_BUCKETS
# Requests per BatchApply call: powers of two up to past the default bound (64), then on to
# the highest bound a server may set (--max-batch-items, 10,000).
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 1024, 10_000)


@dataclass(frozen=True, slots=True)
class HistogramSpec:
    """A histogram family: name, help, labels and bucket bounds."""

    name: str
    documentation: str
    labelnames: tuple[str, ...] = ()
    buckets: tuple[float, ...] = ()

    def family(self, counts: Metric | None, sums: Metric | None) -> HistogramMetricFamily:
        """The histogram that the two counters of a Tallied hold (cumulative buckets)."""
        family = HistogramMetricFamily(self.name, self.documentation, labels=self.labelnames)
        by_series: dict[tuple[str, ...], dict[str, float]] = {}
        totals: dict[tuple[str, ...], float] = {}
        for sample in counts.samples if counts is not None else ():
            if sample.name.endswith("_total"):
                series = tuple(sample.labels[name] for name in self.labelnames)
                by_series.setdefault(series, {})[sample.labels["le"]] = sample.value
        for sample in sums.samples if sums is not None else ():
            if sample.name.endswith("_total"):
                totals[tuple(sample.labels[name] for name in self.labelnames)] = sample.value
        if not self.labelnames:
            by_series.setdefault((), {})  # an unlabelled histogram shows from the start
        for series, counted in by_series.items():
            running, buckets = 0.0, []
            for le in bucket_labels(self.buckets):
                running += counted.get(le, 0.0)
                buckets.append((le, running))
            family.add_metric(list(series), buckets, totals.get(series, 0.0))
        return family


def bucket_labels(bounds: tuple[float, ...]) -> tuple[str, ...]:
    """The `le` labels of a histogram's buckets, as prometheus-client writes them."""
    return (*(floatToGoString(bound) for bound in bounds), "+Inf")  # type: ignore[no-untyped-call]


PLAN_SECONDS = HistogramSpec(
    "basra_plan_generation_seconds",
    "Time to generate the capture plans of one card.",
    buckets=PLAN_BUCKETS,
)

HANDLING_SECONDS = HistogramSpec(
    "grpc_server_handling_seconds",
    "Histogram of response latency (seconds) of gRPC that had been application-level "
    "handled by the server.",
    _CALL_LABELS,
    buckets=HANDLING_BUCKETS,
)

SUGGEST_SECONDS = HistogramSpec(
    "basra_suggest_seconds",
    "Time the bot took to choose one SuggestMove action, by level.",
    ("level",),
    buckets=SUGGEST_BUCKETS,
)

SUGGEST_DEALS = HistogramSpec(
    "basra_suggest_deals",
    "Deals the bot sampled and searched for one SuggestMove, by level.",
    ("level",),
    buckets=DEALS_BUCKETS,
)

SUGGEST_NODES = HistogramSpec(
    "basra_suggest_nodes",
    "Search nodes the bot visited for one SuggestMove, by level.",
    ("level",),
    buckets=NODES_BUCKETS,
)

QUEUE_WAIT_SECONDS = HistogramSpec(
    "basra_queue_wait_seconds",
    "Time an admitted RulesService call waited in its worker before work started.",
    buckets=WAIT_BUCKETS,
)

BATCH_ITEMS = HistogramSpec(
    "basra_batch_items",
    "Requests per BatchApply call the service read, refused whole or not (each item "
    "is also counted as an Apply call).",
    buckets=BATCH_BUCKETS,
)

HISTOGRAMS = (
    PLAN_SECONDS,
    HANDLING_SECONDS,
    SUGGEST_SECONDS,
    SUGGEST_DEALS,
    SUGGEST_NODES,
    QUEUE_WAIT_SECONDS,
    BATCH_ITEMS,
)
# The names of the two counters of a Tallied histogram, after the histogram's own.
COUNTS_SUFFIX = "_tallied_bucket"
SUMS_SUFFIX = "_tallied_sum"
_PARTS = {spec.name + suffix for spec in HISTOGRAMS for suffix in (COUNTS_SUFFIX, SUMS_SUFFIX)}


@dataclass(frozen=True, slots=True)
class Tallied:
    """A histogram written as two counters, observations per bucket (label `le`, not
    cumulative) and their sum: prometheus-client's public API adds any count to a counter in
    one call, but only one observation at a time to a Histogram. HistogramView shows the
    two as the histogram."""

    spec: HistogramSpec
    counts: Counter
    sums: Counter

    @classmethod
    def of(cls, spec: HistogramSpec, registry: CollectorRegistry | None) -> Tallied:
        """The two counters of a histogram, in `registry` (None: unregistered)."""
        labels = spec.labelnames
        counts = Counter(
            spec.name + COUNTS_SUFFIX, spec.documentation, (*labels, "le"), registry=registry
        )
        return cls(spec, counts, Counter(spec.name + SUMS_SUFFIX, "", labels, registry=registry))

    def add(self, labelvalues: tuple[str, ...], taken: Taken) -> None:
        """Add the observations taken from a tally to the series of `labelvalues`."""
        for le, count in taken.counts:
            self.counts.labels(*labelvalues, le).inc(count)
        sums = self.sums.labels(*labelvalues) if labelvalues else self.sums
        sums.inc(taken.total)


class HistogramView(Collector):
    """A registry's families as /metrics shows them: each Tallied pair of counters as its
    histogram, every other family as it is."""

    def __init__(self, source: CollectorRegistry) -> None:
        self._source = source

    def describe(self) -> list[Metric]:
        """Nothing to check ahead: the names are the source's."""
        return []

    def collect(self) -> Iterator[Metric]:
        """The source's families, the Tallied ones as histograms."""
        parts: dict[str, Metric] = {}
        for family in self._source.collect():
            if family.name in _PARTS:
                parts[family.name] = family
            else:
                yield family
        for spec in HISTOGRAMS:
            counts, sums = parts.get(spec.name + COUNTS_SUFFIX), parts.get(spec.name + SUMS_SUFFIX)
            if counts is not None or sums is not None:
                yield spec.family(counts, sums)


@dataclass(frozen=True, slots=True)
class Metrics:
    """The service's metric families; create one set per process."""

    plan_seconds: Tallied
    started: Counter
    handled: Counter
    handling_seconds: Tallied
    refusals: Counter
    seals: Counter
    suggest_seconds: Tallied
    suggest_deals: Tallied
    suggest_nodes: Tallied
    queue_wait_seconds: Tallied
    calls_held: Gauge
    calls_held_limit: Gauge
    calls_arrived: Counter
    calls_taken_in: Counter
    batch_items: Tallied

    @classmethod
    def create(cls, registry: CollectorRegistry | None) -> Metrics:
        """Create the families in `registry` (None: unregistered, as multiprocess workers do;
        their parent shows them through multiprocess_registry)."""
        if registry is None:
            return cls._in(None)
        families = CollectorRegistry()
        registry.register(HistogramView(families))
        return cls._in(families)

    @classmethod
    def _in(cls, registry: CollectorRegistry | None) -> Metrics:
        return cls(
            plan_seconds=Tallied.of(PLAN_SECONDS, registry),
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
            handling_seconds=Tallied.of(HANDLING_SECONDS, registry),
            refusals=Counter(
                "basra_refusals_total",
                "Refused calls by the reason given in their ErrorInfo.",
                ("grpc_method", "reason"),
                registry=registry,
            ),
            seals=Counter(
                "basra_states_received_total",
                "States a server that signs took, by the id of the key that sealed them; "
                'key_id="" counts unsigned ones taken in the migration window.',
                ("key_id",),
                registry=registry,
            ),
            suggest_seconds=Tallied.of(SUGGEST_SECONDS, registry),
            suggest_deals=Tallied.of(SUGGEST_DEALS, registry),
            suggest_nodes=Tallied.of(SUGGEST_NODES, registry),
            queue_wait_seconds=Tallied.of(QUEUE_WAIT_SECONDS, registry),
            # One series per live worker (label pid in multiprocess mode), sampled every flush.
            calls_held=Gauge(
                "basra_calls_held",
                "Calls a worker holds, in flight plus queued (sampled every second).",
                registry=registry,
                multiprocess_mode="liveall",
            ),
            calls_held_limit=Gauge(
                "basra_calls_held_limit",
                "The admission bound of a worker: most calls it holds; 0 = no bound.",
                registry=registry,
                multiprocess_mode="liveall",
            ),
            # What arrived minus what was taken in is what gRPC core refused (or still holds)
            # before the service saw it: sampled every flush.
            calls_arrived=Counter(
                "basra_calls_arrived",
                "Calls gRPC core started on a worker's server (channelz), any method.",
                registry=registry,
            ),
            calls_taken_in=Counter(
                "basra_calls_taken_in",
                "Calls a worker's server took in from gRPC core (its first interceptor saw them).",
                registry=registry,
            ),
            batch_items=Tallied.of(BATCH_ITEMS, registry),
        )


@dataclass(frozen=True, slots=True)
class Taken:
    """Observations taken from a tally: per non-empty bucket (its `le`), how many; their sum."""

    counts: list[tuple[str, int]]
    total: float


class Observations:
    """The observations of one histogram series since the last flush: how many per bucket
    (the last one is +Inf) and their sum. Its Tally's lock guards it."""

    __slots__ = ("bounds", "counts", "les", "total")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.les = bucket_labels(bounds)
        self.counts = [0] * (len(bounds) + 1)
        self.total = 0.0

    def add(self, value: float) -> None:
        """Count one observation."""
        self.counts[bisect_left(self.bounds, value)] += 1
        self.total += value

    def take(self) -> Taken | None:
        """The observations since the last take (None: none); start again from none."""
        if not any(self.counts):
            return None
        counted = [(le, n) for le, n in zip(self.les, self.counts, strict=True) if n]
        taken = Taken(counted, self.total)
        self.counts = [0] * len(self.counts)
        self.total = 0.0
        return taken


class MethodTally:
    """The counts of one RPC method since the last flush, and its labels."""

    __slots__ = ("handled", "labels", "seconds", "started")

    def __init__(self, labels: tuple[str, str, str, str]) -> None:
        self.labels = labels
        self.started = 0
        self.handled: dict[str, int] = {}
        self.seconds = Observations(HANDLING_BUCKETS)


class Tally:
    """The per-call metric updates of one process, added up and written to `metrics` by flush.

    Every method is safe to call from any thread. Counting costs a lock and a few additions;
    flush writes the counts gathered since the previous flush to the metric families, through
    prometheus-client's public calls (inc, set, observe), so it is their one writer.
    """

    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics
        self._lock = threading.Lock()
        self._methods: dict[tuple[str, str, str, str], MethodTally] = {}
        self._refusals: dict[tuple[str, str], int] = {}
        self._seals: dict[str, int] = {}
        self._plans = Observations(PLAN_BUCKETS)
        # Per level: the seconds, the deals and the nodes of its suggestions.
        self._suggestions: dict[str, tuple[Observations, ...]] = {}
        self._waits = Observations(WAIT_BUCKETS)
        self._batches = Observations(BATCH_BUCKETS)
        self._held: Callable[[], int] | None = None
        self._intake: tuple[Callable[[], int], Callable[[], int], list[int]] | None = None
        self._flush_lock = threading.Lock()

    def declare(
        self,
        grpc_service: str,
        methods: Iterable[str],
        reasons: Iterable[str],
        transports: Iterable[str] = ("grpc",),
    ) -> None:
        """Make the series that alerts read exist at 0 before anything happens: each unary
        method's started calls and INTERNAL ends by each of `transports`, and its refusals for
        each of `reasons` (a series that first appears at 1 shows no increase, and a sum over
        none is no data)."""
        family = self.metrics
        transports = tuple(transports)
        for method in methods:
            for transport in transports:
                family.started.labels("UNARY", grpc_service, method, transport)
                family.handled.labels("UNARY", grpc_service, method, transport, "INTERNAL")
            for reason in reasons:
                family.refusals.labels(method, reason)

    def watch_intake(self, arrived: Callable[[], int], taken_in: Callable[[], int]) -> None:
        """Add the growth of `arrived()` and `taken_in()` (running totals) to their counters
        at every flush."""
        self._intake = (arrived, taken_in, [0, 0])

    def _flush_intake(self) -> None:
        if self._intake is None:
            return
        arrived, taken_in, last = self._intake
        for index, (total, counter) in enumerate(
            ((arrived(), self.metrics.calls_arrived), (taken_in(), self.metrics.calls_taken_in))
        ):
            if total > last[index]:
                counter.inc(total - last[index])
                last[index] = total

    def watch_held(self, held: Callable[[], int], limit: int) -> None:
        """Sample `held()` into basra_calls_held at every flush; state the bound once."""
        self._held = held
        self.metrics.calls_held_limit.set(limit)

    def method(
        self, grpc_type: str, grpc_service: str, grpc_method: str, transport: str = "grpc"
    ) -> MethodTally:
        """The tally of one method's calls by one transport (the same object for the same
        labels)."""
        labels = (grpc_type, grpc_service, grpc_method, transport)
        with self._lock:
            return self._methods.setdefault(labels, MethodTally(labels))

    def started(self, method: MethodTally) -> None:
        """Count a call as started."""
        with self._lock:
            method.started += 1

    def finished(self, method: MethodTally, code: str, seconds: float, reason: str | None) -> None:
        """Count a finished call with its status code, duration and refusal reason (if any)."""
        with self._lock:
            method.handled[code] = method.handled.get(code, 0) + 1
            method.seconds.add(seconds)
            if reason is not None:
                key = (method.labels[2], reason)
                self._refusals[key] = self._refusals.get(key, 0) + 1

    def observe_seal(self, key_id: str) -> None:
        """Count one state taken by a server that signs, by its key id ("": unsigned)."""
        with self._lock:
            self._seals[key_id] = self._seals.get(key_id, 0) + 1

    def observe_plan(self, seconds: float) -> None:
        """Count one plan generation that took `seconds`."""
        with self._lock:
            self._plans.add(seconds)

    def observe_wait(self, seconds: float) -> None:
        """Count one admitted call that waited `seconds` before its work started."""
        with self._lock:
            self._waits.add(seconds)

    def observe_batch(self, items: int) -> None:
        """Count one BatchApply call of `items` requests."""
        with self._lock:
            self._batches.add(items)

    def observe_suggestion(self, suggestion: Suggestion, seconds: float) -> None:
        """Count one suggestion: its time and its work (deals, nodes), by level."""
        values = (seconds, suggestion.deals, suggestion.nodes)
        with self._lock:
            tallies = self._suggestions.get(suggestion.level.value)
            if tallies is None:
                tallies = tuple(Observations(bounds) for bounds in _SUGGEST_FAMILIES)
                self._suggestions[suggestion.level.value] = tallies
            for observations, value in zip(tallies, values, strict=True):
                observations.add(value)

    def flush(self) -> None:
        """Write the counts gathered since the last flush to the metric families."""
        with self._flush_lock:  # two flushes at once would still add up, but in any order
            with self._lock:
                methods = [
                    (m.labels, m.started, m.handled, m.seconds.take())
                    for m in self._methods.values()
                ]
                for m in self._methods.values():
                    m.started, m.handled = 0, {}
                refusals, self._refusals = self._refusals, {}
                seals, self._seals = self._seals, {}
                plans, waits, batches = self._plans.take(), self._waits.take(), self._batches.take()
                suggestions = {
                    level: [observations.take() for observations in tallies]
                    for level, tallies in self._suggestions.items()
                }
            family = self.metrics
            if self._held is not None:
                family.calls_held.set(self._held())
            self._flush_intake()
            for histogram, taken in (
                (family.queue_wait_seconds, waits),
                (family.batch_items, batches),
            ):
                if taken is not None:
                    histogram.add((), taken)
            for labels, started, handled, seconds in methods:
                if started:
                    family.started.labels(*labels).inc(started)
                for code, count in handled.items():
                    family.handled.labels(*labels, code).inc(count)
                if seconds is not None:
                    family.handling_seconds.add(labels, seconds)
            for (method, reason), count in refusals.items():
                family.refusals.labels(method, reason).inc(count)
            for key_id, count in seals.items():
                family.seals.labels(key_id).inc(count)
            if plans is not None:
                family.plan_seconds.add((), plans)
            for level, by_family in suggestions.items():
                histograms = (family.suggest_seconds, family.suggest_deals, family.suggest_nodes)
                for histogram, observed in zip(histograms, by_family, strict=True):
                    if observed is not None:
                        histogram.add((level,), observed)

    def flush_every(self, seconds: float) -> Callable[[], None]:
        """Flush on a daemon thread every `seconds`; return a function that stops it and
        flushes one last time."""
        stop = threading.Event()

        def run() -> None:
            while not stop.wait(seconds):
                self.flush()

        thread = threading.Thread(target=run, name="metrics-flush", daemon=True)
        thread.start()

        def stop_and_flush() -> None:
            stop.set()
            thread.join()
            self.flush()

        return stop_and_flush


def multiprocess_registry(directory: str) -> CollectorRegistry:
    """Return a registry that aggregates the values every worker wrote to `directory`."""
    families = CollectorRegistry()
    MultiProcessCollector(families, path=directory)  # type: ignore[no-untyped-call]
    registry = CollectorRegistry()
    registry.register(HistogramView(families))
    return registry


def prepare_directory(directory: str | None) -> str:
    """Create the multiprocess directory (None: a fresh temporary one), prove it writable, and
    remove values left by an earlier run; OSError says why a directory cannot be used."""
    path = Path(directory or tempfile.mkdtemp(prefix="basra-metrics-"))
    path.mkdir(parents=True, exist_ok=True)
    # Every worker writes its values here: a read-only or foreign directory is found now, with
    # one clear line, not in a worker's traceback after the server has started.
    with tempfile.TemporaryFile(dir=path):
        pass
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


def describe_os_error(error: OSError) -> str:
    """One line for a failed file operation: what went wrong, and on which path."""
    if error.filename is None:
        return str(error.strerror or error)
    return f"{error.strerror}: {error.filename}"
