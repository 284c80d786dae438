"""A grpc.aio load generator that reads ghz JSON configs and prints a ghz-style summary.

ghz cannot be installed everywhere; this reads the same configuration files (deploy/ghz/*.json)
so the same runs can be made with either tool. It resolves the called method through server
reflection (as ghz does when given no .proto), or from the generated basra.v1 code when the
server has reflection off. Requests are encoded once up front and sent as raw bytes, and
responses are not decoded, so the generator spends as little of a shared CPU as it can.

It speaks plaintext, TLS or mutual TLS (ghz's insecure/cacert/cert/key/cname keys, or the
TLS flags of clients/channels.py), and against a server that signs states it seals each
request's state (each item's, in a batch) with the same keys (--signing-keys,
--signing-keys-file or their BASRA_* variables, as `serve` takes them), since the states of
the data files were never returned by that server.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import re
import sys
import time
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import grpc
from google.protobuf import descriptor_pool, json_format, message_factory
from google.protobuf.message import Message

from clients import channels
from clients.channels import ClientTLS
from wire.signing import Keyring, SigningConfigError, load_keys
from wire.tls import TLSConfigError

PERCENTILES = (10.0, 25.0, 50.0, 75.0, 90.0, 95.0, 99.0, 99.9)
HISTOGRAM_BUCKETS = 10
HISTOGRAM_BAR = 40

# ghz keys this generator honours, and keys that only shape ghz's own output and can be
# ignored without changing what load is sent. Anything else is refused, so a config that
# relies on a ghz feature this generator lacks never runs silently with different load.
_HONOURED = frozenset(
    {
        "call",
        "host",
        "insecure",
        "total",
        "concurrency",
        "connections",
        "rps",
        "duration",
        "max-duration",
        "timeout",
        "data",
        "data-file",
        "metadata",
        "skipFirst",
        "connect-timeout",
        "name",
        "cacert",
        "cert",
        "key",
        "cname",
    }
)
_IGNORED = frozenset(
    {"format", "output", "tags", "cpus", "debug", "reflect-metadata", "duration-stop"}
    # Where ghz reads the request type from a .proto or protoset file instead of reflection.
    # The type here always comes from the server's own reflection (or, with --no-reflection,
    # from the generated basra.v1 code), which is the contract the server serves, so the file
    # is neither read nor needed: a config that names one runs unchanged with either tool.
    | {"proto", "protoset", "import-paths"}
)

_GO_CODE_NAMES = {grpc.StatusCode.CANCELLED: "Canceled", grpc.StatusCode.OK: "OK"}

_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)")
_UNIT_SECONDS = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "μs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}


class ConfigError(ValueError):
    """A load configuration that cannot be run as written."""


def parse_duration(text: object) -> float:
    """Return the seconds of a Go duration string such as "10s", "1m30s" or "250ms"."""
    if not isinstance(text, str):
        raise ConfigError(f"a duration is a string such as '10s', not {text!r}")
    if text == "0":
        return 0.0
    pos = 0
    seconds = 0.0
    for match in _DURATION_PART.finditer(text):
        if match.start() != pos:
            break
        seconds += float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
        pos = match.end()
    if pos != len(text) or not text:
        raise ConfigError(f"{text!r} is not a duration such as '10s', '1m30s' or '250ms'")
    return seconds


@dataclass(frozen=True, slots=True)
class LoadConfig:
    """One load run, with ghz's meaning and defaults for every field."""

    service: str
    method: str
    host: str
    total: int = 200
    concurrency: int = 50
    connections: int = 1
    rps: float = 0.0
    duration: float = 0.0
    max_duration: float = 0.0
    timeout: float = 20.0
    connect_timeout: float = 10.0
    skip_first: int = 0
    data: tuple[Mapping[str, Any], ...] = ({},)
    metadata: tuple[tuple[str, str], ...] = ()
    name: str = ""
    tls: ClientTLS | None = None
    """TLS (and mutual TLS) as ghz's insecure/cacert/cert/key/cname give it; None: plaintext."""

    @property
    def path(self) -> str:
        """Return the gRPC method path, "/package.Service/Method"."""
        return f"/{self.service}/{self.method}"


def split_call(call: object) -> tuple[str, str]:
    """Split a ghz `call` ("pkg.Service.Method" or "pkg.Service/Method") into its two parts."""
    if not isinstance(call, str) or not call:
        raise ConfigError("'call' must name a method, e.g. basra.v1.RulesService.Apply")
    if "/" in call:
        service, _, method = call.lstrip("/").partition("/")
    else:
        service, _, method = call.rpartition(".")
    if not service or not method or "/" in method:
        raise ConfigError(f"'call' {call!r} is not 'package.Service.Method'")
    return service, method


def _positive_int(raw: Mapping[str, Any], key: str, default: int, minimum: int) -> int:
    value = raw.get(key, default)
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise ConfigError(f"'{key}' must be an integer of at least {minimum}, not {value!r}")
    return value


def _data_items(value: object, origin: str) -> tuple[Mapping[str, Any], ...]:
    if isinstance(value, Mapping):
        return (value,)
    if isinstance(value, list) and value and all(isinstance(v, Mapping) for v in value):
        return tuple(value)
    raise ConfigError(f"{origin} must hold a JSON object or a non-empty array of objects")


def find_data_file(name: str, config_dir: Path) -> Path:
    """Locate a `data-file`: relative to the working directory as ghz does, else to the config."""
    path = Path(name)
    if path.is_absolute() or path.exists():
        return path
    beside = config_dir / path
    if beside.exists():
        return beside
    raise ConfigError(f"data-file {name!r} not found (from the working directory or the config)")


def config_from_dict(
    raw: Mapping[str, Any], config_dir: Path = Path(), host: str | None = None
) -> LoadConfig:
    """Build a LoadConfig from the keys of a ghz JSON config; `host` (--host) wins over the
    config's own and stands in for it when the config has none."""
    unknown = sorted(set(raw) - _HONOURED - _IGNORED)
    if unknown:
        raise ConfigError(f"ghz options not supported by this load generator: {unknown}")
    service, method = split_call(raw.get("call"))
    host = host or raw.get("host")
    if not isinstance(host, str) or ":" not in host:
        raise ConfigError(
            "'host' must be 'address:port', e.g. 127.0.0.1:50051 (in the config or --host)"
        )
    tls = _tls_of(raw)
    if "data" in raw and "data-file" in raw:
        raise ConfigError("give 'data' or 'data-file', not both")
    data: tuple[Mapping[str, Any], ...] = ({},)
    if "data" in raw:
        data = _data_items(raw["data"], "'data'")
    elif "data-file" in raw:
        path = find_data_file(str(raw["data-file"]), config_dir)
        data = _data_items(json.loads(path.read_text(encoding="utf-8")), str(path))
    metadata = raw.get("metadata") or {}
    if not isinstance(metadata, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()
    ):
        raise ConfigError("'metadata' must be an object of strings")
    rps = raw.get("rps", 0)
    if not isinstance(rps, int | float) or isinstance(rps, bool) or rps < 0:
        raise ConfigError(f"'rps' must be a number of at least 0, not {rps!r}")
    connections = _positive_int(raw, "connections", 1, 1)
    concurrency = _positive_int(raw, "concurrency", 50, 1)
    if connections > concurrency:
        raise ConfigError("'connections' cannot exceed 'concurrency' (as in ghz)")
    return LoadConfig(
        service=service,
        method=method,
        host=host,
        total=_positive_int(raw, "total", 200, 1),
        concurrency=concurrency,
        connections=connections,
        rps=float(rps),
        duration=parse_duration(raw["duration"]) if "duration" in raw else 0.0,
        max_duration=parse_duration(raw["max-duration"]) if "max-duration" in raw else 0.0,
        timeout=parse_duration(raw["timeout"]) if "timeout" in raw else 20.0,
        connect_timeout=(
            parse_duration(raw["connect-timeout"]) if "connect-timeout" in raw else 10.0
        ),
        skip_first=_positive_int(raw, "skipFirst", 0, 0),
        data=data,
        metadata=tuple(sorted((k.lower(), v) for k, v in metadata.items())),
        name=str(raw.get("name", "")),
        tls=tls,
    )


def _tls_of(raw: Mapping[str, Any]) -> ClientTLS | None:
    """TLS as ghz's keys ask: `insecure` false or a `cacert`/`cert`/`key`/`cname` means TLS.
    A config without `insecure` and those keys is plaintext here (ghz would speak TLS)."""
    if raw.get("skipTLS"):
        raise ConfigError("'skipTLS' (no check of the server's certificate) is not supported")
    files = [raw.get(k) for k in ("cacert", "cert", "key", "cname")]
    if not all(v is None or isinstance(v, str) for v in files):
        raise ConfigError("'cacert', 'cert', 'key' and 'cname' must be strings")
    insecure = raw.get("insecure", all(v is None for v in files))
    if not isinstance(insecure, bool):
        raise ConfigError(f"'insecure' must be true or false, not {insecure!r}")
    if insecure:
        if any(v is not None for v in files):
            raise ConfigError("'insecure' true with TLS files: set it false, or drop the files")
        return None
    return ClientTLS(*files)


def load_config(path: Path, host: str | None = None) -> LoadConfig:
    """Read a ghz JSON config file (`host`: --host, which wins over the config's)."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path} is not valid JSON: {exc}") from exc
    if not isinstance(raw, dict):
        raise ConfigError(f"{path} must hold a JSON object")
    return config_from_dict(raw, path.parent, host)


def request_class(
    host: str, service: str, method: str, use_reflection: bool = True, tls: ClientTLS | None = None
) -> type[Message]:
    """Return the request message class of a method, from server reflection or local code."""
    full = f"{service}.{method}"
    if use_reflection:
        from grpc_reflection.v1alpha.proto_reflection_descriptor_database import (
            ProtoReflectionDescriptorDatabase,
        )

        with channels.channel(host, tls) as channel:
            pool = descriptor_pool.DescriptorPool(ProtoReflectionDescriptorDatabase(channel))
            try:
                # By service: the upb pool does not look a lone method up in its database.
                found = pool.FindServiceByName(service).methods_by_name.get(method)
                if found is None:
                    raise KeyError(full)
                return message_factory.GetMessageClass(found.input_type)
            except KeyError as exc:
                raise ConfigError(f"server reflection at {host} does not list {full}") from exc
            except grpc.RpcError as exc:
                code = exc.code() if isinstance(exc, grpc.Call) else None
                if code == grpc.StatusCode.UNAVAILABLE:
                    raise ConnectionError(f"cannot reach {host}: {exc.details()}") from None
                raise ConfigError(
                    f"server reflection at {host} does not answer ({code}); is it on?"
                ) from exc
    import basra.v1.rules_pb2  # noqa: F401  (registers basra.v1 in the default pool)

    try:
        input_type = descriptor_pool.Default().FindMethodByName(full).input_type
    except KeyError as exc:
        raise ConfigError(f"{full} is not a method of the generated basra.v1 code") from exc
    return message_factory.GetMessageClass(input_type)


def encode_requests(cls: type[Message], items: Iterable[Mapping[str, Any]]) -> tuple[bytes, ...]:
    """Encode each data item (protobuf JSON) as the request message, once, up front."""
    encoded = []
    for index, item in enumerate(items):
        try:
            encoded.append(json_format.ParseDict(dict(item), cls()).SerializeToString())
        except json_format.ParseError as exc:
            name = cls.DESCRIPTOR.full_name
            raise ConfigError(f"data item {index} is not a valid {name}: {exc}") from exc
    return tuple(encoded)


def _sealable(descriptor: Any) -> bool:
    """Whether a message type carries a state that a signing server wants sealed."""
    return {"state", "signed_state"} <= set(descriptor.fields_by_name)


def _seal(request: Any, keyring: Keyring) -> None:
    """Move a request's plain `state` into a `signed_state` under the keyring's first key."""
    if not request.HasField("state"):
        return
    state = request.state.SerializeToString()
    key_id, signature = keyring.sign(state)
    request.ClearField("state")
    request.signed_state.state = state
    request.signed_state.key_id = key_id
    request.signed_state.signature = signature


def seal_states(
    cls: type[Message], requests: Sequence[bytes], keyring: Keyring
) -> tuple[bytes, ...]:
    """Move each request's plain `state` into a `signed_state` sealed with the keyring's first
    key, as a server with those keys seals the states it returns; in a batch (a repeated field
    of such requests, as BatchApplyRequest.requests), each item's. Requests without a state,
    or of a type with none, are left as they are."""
    descriptor = cls.DESCRIPTOR
    itself = _sealable(descriptor)
    items = [
        f.name
        for f in descriptor.fields
        if f.message_type is not None and _sealable(f.message_type) and _repeated(f)
    ]
    if not itself and not items:
        return tuple(requests)
    sealed = []
    for data in requests:
        request: Any = cls.FromString(data)
        if itself:
            _seal(request, keyring)
        for name in items:
            for item in getattr(request, name):
                _seal(item, keyring)
        sealed.append(request.SerializeToString())
    return tuple(sealed)


def _repeated(field: Any) -> bool:
    """Whether a field is repeated (protobuf 5 and later name it is_repeated)."""
    repeated = getattr(field, "is_repeated", None)
    if repeated is not None:
        return bool(repeated)
    return bool(field.label == field.LABEL_REPEATED)


def go_code_name(code: grpc.StatusCode) -> str:
    """Return a status code as ghz prints it ("InvalidArgument", "Canceled", "OK")."""
    if code in _GO_CODE_NAMES:
        return _GO_CODE_NAMES[code]
    return "".join(part.capitalize() for part in code.name.split("_"))


@dataclass(frozen=True, slots=True)
class Report:
    """What a run measured: every latency, status code and error, and the wall time."""

    total_ns: int
    latencies_ns: tuple[int, ...]
    statuses: Mapping[str, int] = field(default_factory=dict)
    errors: Mapping[str, int] = field(default_factory=dict)
    name: str = ""

    @property
    def count(self) -> int:
        """Completed calls, successful or not."""
        return len(self.latencies_ns)

    @property
    def rps(self) -> float:
        """Completed calls per second of wall time."""
        return self.count / (self.total_ns / 1e9) if self.total_ns else 0.0

    def _sorted(self) -> list[int]:
        return sorted(self.latencies_ns)

    def percentile_ns(self, pct: float) -> int:
        """Return the nearest-rank percentile of the latencies (0 when nothing completed)."""
        ordered = self._sorted()
        if not ordered:
            return 0
        # Rounded first: 99.9 / 100 * 1000 is 999.0000000000001 in floating point.
        rank = max(1, math.ceil(round(pct / 100.0 * len(ordered), 9)))
        return ordered[min(rank, len(ordered)) - 1]

    def histogram(self) -> list[tuple[int, int]]:
        """Return ghz's histogram: (upper mark in ns, calls up to it) for 11 even marks."""
        ordered = self._sorted()
        if not ordered:
            return []
        low, high = ordered[0], ordered[-1]
        width = (high - low) / HISTOGRAM_BUCKETS
        marks = [round(low + i * width) for i in range(HISTOGRAM_BUCKETS + 1)]
        marks[-1] = high
        counts = [0] * len(marks)
        slot = 0
        for value in ordered:
            while value > marks[slot]:
                slot += 1
            counts[slot] += 1
        return list(zip(marks, counts, strict=True))

    def as_json(self) -> dict[str, Any]:
        """Return the report with ghz's JSON field names (durations in nanoseconds)."""
        ordered = self._sorted()
        count = len(ordered)
        return {
            "name": self.name,
            "count": count,
            "total": self.total_ns,
            "average": sum(ordered) // count if count else 0,
            "fastest": ordered[0] if ordered else 0,
            "slowest": ordered[-1] if ordered else 0,
            "rps": self.rps,
            "histogram": [
                {"mark": mark / 1e9, "count": n, "frequency": n / count}
                for mark, n in self.histogram()
            ],
            "latencyDistribution": [
                {"percentage": pct, "latency": self.percentile_ns(pct)} for pct in PERCENTILES
            ],
            "statusCodeDistribution": dict(self.statuses),
            "errorDistribution": dict(self.errors),
        }

    def summary(self) -> str:
        """Return the report as ghz's summary text."""
        data = self.as_json()
        lines = [
            "",
            "Summary:",
            *([f"  Name:\t\t{self.name}"] if self.name else []),
            f"  Count:\t{data['count']}",
            f"  Total:\t{_ms(data['total'])}",
            f"  Slowest:\t{_ms(data['slowest'])}",
            f"  Fastest:\t{_ms(data['fastest'])}",
            f"  Average:\t{_ms(data['average'])}",
            f"  Requests/sec:\t{data['rps']:.2f}",
            "",
            "Response time histogram:",
        ]
        hist = self.histogram()
        peak = max((n for _, n in hist), default=0)
        for mark, n in hist:
            bar = "∎" * (round(n / peak * HISTOGRAM_BAR) if peak else 0)
            lines.append(f"  {mark / 1e6:.3f} [{n}]\t|{bar}")
        lines += ["", "Latency distribution:"]
        lines += [
            f"  {entry['percentage']:g} % in {_ms(entry['latency'])}"
            for entry in data["latencyDistribution"]
        ]
        lines += ["", "Status code distribution:"]
        lines += [f"  [{code}]\t{n} responses" for code, n in sorted(self.statuses.items())]
        if self.errors:
            lines += ["", "Error distribution:"]
            lines += [f"  [{n}]\t{text}" for text, n in sorted(self.errors.items())]
        return "\n".join(lines) + "\n"


def _ms(ns: int) -> str:
    return f"{ns / 1e6:.2f} ms"


@dataclass(slots=True)
class _RunCounts:
    """Mutable counters of one run, owned by that run's event loop only."""

    issued: int = 0
    latencies: list[int] = field(default_factory=list)
    statuses: Counter[str] = field(default_factory=Counter)
    errors: Counter[str] = field(default_factory=Counter)
    last_done: int = 0


async def run_load(config: LoadConfig, requests: Sequence[bytes]) -> Report:
    """Send the configured load, each call carrying the next encoded request in turn."""
    if not requests:
        raise ConfigError("no request to send")
    # A local subchannel pool per channel: otherwise grpc shares one TCP connection between
    # channels with equal arguments, and SO_REUSEPORT spreads connections, not calls.
    options = [("grpc.use_local_subchannel_pool", 1)]
    opened = [
        channels.aio_channel(config.host, config.tls, options) for _ in range(config.connections)
    ]
    try:
        try:
            await asyncio.wait_for(
                asyncio.gather(*(ch.channel_ready() for ch in opened)), config.connect_timeout
            )
        except TimeoutError:
            raise ConnectionError(
                f"cannot connect to {config.host} within {config.connect_timeout:g} s"
            ) from None
        calls = [ch.unary_unary(config.path, None, None) for ch in opened]
        counts = _RunCounts()
        metadata = config.metadata or None
        start = time.perf_counter_ns()
        stop_at = start + int(config.duration * 1e9) if config.duration else 0
        if config.max_duration and not config.duration:
            stop_at = start + int(config.max_duration * 1e9)
        total = 0 if config.duration else config.total
        interval_ns = int(1e9 / config.rps) if config.rps else 0

        async def worker(index: int) -> None:
            call = calls[index % len(calls)]
            while True:
                if total and counts.issued >= total:
                    return
                # Reserve the call's number first: pacing sleeps, and other workers go on.
                number = counts.issued
                counts.issued += 1
                if interval_ns:
                    wait = start + number * interval_ns - time.perf_counter_ns()
                    if wait > 0:
                        await asyncio.sleep(wait / 1e9)
                if stop_at and time.perf_counter_ns() >= stop_at:
                    return
                request = requests[number % len(requests)]
                began = time.perf_counter_ns()
                error = None
                try:
                    await call(request, timeout=config.timeout or None, metadata=metadata)
                    code = "OK"
                except grpc.aio.AioRpcError as exc:
                    code = go_code_name(exc.code())
                    error = f"rpc error: code = {code} desc = {exc.details() or ''}"
                ended = time.perf_counter_ns()
                if number >= config.skip_first:
                    counts.latencies.append(ended - began)
                    counts.statuses[code] += 1
                    if error is not None:
                        counts.errors[error] += 1
                counts.last_done = ended

        await asyncio.gather(*(worker(i) for i in range(config.concurrency)))
        finished = counts.last_done or time.perf_counter_ns()
        return Report(
            total_ns=finished - start,
            latencies_ns=tuple(counts.latencies),
            statuses=dict(counts.statuses),
            errors=dict(counts.errors),
            name=config.name,
        )
    finally:
        for channel in opened:
            await channel.close(None)


def apply_overrides(config: LoadConfig, args: argparse.Namespace) -> LoadConfig:
    """Apply command-line overrides, which win over the config file as in ghz."""
    changes: dict[str, Any] = {}
    if args.host:
        changes["host"] = args.host
    tls = channels.from_args(args)
    if tls is not None:
        changes["tls"] = tls.over(config.tls)
    for name in ("total", "concurrency", "connections", "rps"):
        value = getattr(args, name)
        if value is not None:
            changes[name] = value
    if args.duration is not None:
        changes["duration"] = parse_duration(args.duration)
    updated = replace(config, **changes)
    if updated.connections > updated.concurrency:
        raise ConfigError("'connections' cannot exceed 'concurrency' (as in ghz)")
    return updated


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the `load` subcommand's arguments on a parser."""
    parser.add_argument("config", type=Path, help="ghz JSON config, e.g. deploy/ghz/apply.json")
    parser.add_argument("--host", help="address:port to load (overrides the config's host)")
    parser.add_argument("-n", "--total", type=int, help="number of calls")
    parser.add_argument("-c", "--concurrency", type=int, help="calls in flight at once")
    parser.add_argument("--connections", type=int, help="HTTP/2 connections to open")
    parser.add_argument("-r", "--rps", type=float, help="rate limit, calls per second")
    parser.add_argument("-z", "--duration", help="run for this long (e.g. 10s); ignores total")
    parser.add_argument(
        "--no-reflection",
        dest="reflection",
        action="store_false",
        help="take the request type from the generated basra.v1 code instead of reflection",
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    channels.add_arguments(parser)
    parser.add_argument(
        "--signing-keys",
        metavar="KEYS",
        default=None,
        help="seal each request's state with the first of these keys 'kid:base64key,...', as "
        "a server with them would (default: BASRA_SIGNING_KEYS; prefer the variable or the "
        "file: flags show in process lists)",
    )
    parser.add_argument(
        "--signing-keys-file",
        metavar="FILE",
        default=None,
        help="file holding the keys in the same form (default: BASRA_SIGNING_KEYS_FILE)",
    )


def run_command(args: argparse.Namespace) -> int:
    """Run the `load` subcommand; return the process exit code."""
    try:
        config = apply_overrides(load_config(args.config, args.host), args)
        keyring = load_keys(
            args.signing_keys or os.environ.get("BASRA_SIGNING_KEYS") or None,
            args.signing_keys_file or os.environ.get("BASRA_SIGNING_KEYS_FILE") or None,
        )
        cls = request_class(config.host, config.service, config.method, args.reflection, config.tls)
        requests = encode_requests(cls, config.data)
        if keyring is not None:
            requests = seal_states(cls, requests, keyring)
        report = asyncio.run(run_load(config, requests))
    except (ConfigError, SigningConfigError, TLSConfigError, OSError, TimeoutError) as exc:
        print(f"basra-rules load: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(report.as_json(), indent=2))
    else:
        print(report.summary(), end="")
    return 0 if report.count else 1


def main(argv: Sequence[str] | None = None) -> int:
    """Run the load generator on its own: `python -m clients.load CONFIG`."""
    parser = argparse.ArgumentParser(prog="basra-rules load", description=__doc__)
    add_arguments(parser)
    return run_command(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
