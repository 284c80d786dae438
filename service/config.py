"""Server configuration: a flag wins over its BASRA_* variable, which wins over the default.

Every setting has a flag (--metrics-port) and a variable (BASRA_METRICS_PORT). An empty
variable counts as unset. A bad value is refused with a message naming where it came from.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields
from dataclasses import field as dataclass_field
from typing import Any

import engine
from engine.bot import Level
from service.handlers import DEFAULT_BOT_MAX_BUDGET, DEFAULT_MAX_REPLAY_ACTIONS
from service.logs import FORMATS, LEVELS

IO_MODES = ("sync", "asyncio")
BOT_LEVELS = tuple(level.lower() for level in Level)
DEFAULT_BOT_MAX_DEALS = DEFAULT_BOT_MAX_BUDGET.deals
DEFAULT_BOT_MAX_NODES = DEFAULT_BOT_MAX_BUDGET.nodes
_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


class ConfigError(ValueError):
    """A setting has a value the server cannot use."""


@dataclass(frozen=True, slots=True)
class Config:
    """Everything `basra-rules serve` needs to know."""

    host: str = "[::]"
    port: int = 50051
    metrics_port: int = 9464
    workers: int = 1
    log_level: str = "info"
    log_format: str = "json"
    max_message_bytes: int = 1_048_576
    reflection: bool = True
    grace_seconds: float = 10.0
    max_connection_age_seconds: float = 300.0
    max_connection_age_grace_seconds: float = 30.0
    plan_work_limit: int = engine.DEFAULT_WORK_LIMIT
    max_replay_actions: int = DEFAULT_MAX_REPLAY_ACTIONS
    bot_level: str = "strong"
    """Level of SuggestMove when a request leaves it unspecified."""
    bot_max_deals: int = DEFAULT_BOT_MAX_DEALS
    bot_max_nodes: int = DEFAULT_BOT_MAX_NODES
    metrics_dir: str | None = None
    """None: a fresh temporary directory."""
    io: str = "sync"
    """Beyond the contract: grpc's thread-pool server ("sync") or its asyncio server."""
    signing_keys: str | None = dataclass_field(default=None, repr=False)
    """Inline "kid:base64key,..." keys (secret: never shown); None: signing off."""
    signing_keys_file: str | None = None
    """File holding the keys in the same form."""
    tls_cert: str | None = None
    tls_key: str | None = None
    tls_client_ca: str | None = None
    """CA bundle that client certificates must chain to (mutual TLS)."""
    tracing: bool = False
    """OpenTelemetry spans of RulesService calls, exported as the standard OTEL_* variables say."""


def _port(text: str) -> int:
    value = int(text)
    if not 0 <= value <= 65535:
        raise ValueError("a port is 0 to 65535")
    return value


def _at_least(low: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        value = int(text)
        if value < low:
            raise ValueError(f"must be at least {low}")
        return value

    return parse


def _seconds(text: str) -> float:
    value = float(text)
    if not 0 <= value <= 86_400:
        raise ValueError("seconds must be 0 to 86400")
    return value


def _choice(options: tuple[str, ...]) -> Callable[[str], str]:
    def parse(text: str) -> str:
        value = text.strip().lower()
        if value not in options:
            raise ValueError(f"must be one of {', '.join(options)}")
        return value

    return parse


def _boolean(text: str) -> bool:
    value = text.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ValueError("must be true or false")


def _text(text: str) -> str:
    if not text:
        raise ValueError("must not be empty")
    return text


# field -> parser of its text form; the flag is --field-with-dashes, the variable BASRA_FIELD.
_PARSERS: Mapping[str, Callable[[str], Any]] = {
    "host": _text,
    "port": _port,
    "metrics_port": _port,
    "workers": _at_least(1),
    "log_level": _choice(LEVELS),
    "log_format": _choice(FORMATS),
    "max_message_bytes": _at_least(1024),
    "reflection": _boolean,
    "grace_seconds": _seconds,
    "max_connection_age_seconds": _seconds,
    "max_connection_age_grace_seconds": _seconds,
    "plan_work_limit": _at_least(1),
    "max_replay_actions": _at_least(0),
    "bot_level": _choice(BOT_LEVELS),
    "bot_max_deals": _at_least(1),
    "bot_max_nodes": _at_least(1),
    "metrics_dir": _text,
    "io": _choice(IO_MODES),
    "signing_keys": _text,
    "signing_keys_file": _text,
    "tls_cert": _text,
    "tls_key": _text,
    "tls_client_ca": _text,
    "tracing": _boolean,
}
_HELP: Mapping[str, str] = {
    "host": "bind address for gRPC and metrics (default [::])",
    "port": "gRPC port (default 50051; 0 picks a free one)",
    "metrics_port": "Prometheus HTTP port, path /metrics (default 9464; 0 turns metrics off)",
    "workers": "worker processes sharing the gRPC port via SO_REUSEPORT (default 1)",
    "log_level": "debug, info, warning or error (default info)",
    "log_format": "json or console (default json)",
    "max_message_bytes": "largest request or response in bytes (default 1048576)",
    "reflection": "gRPC server reflection on or off (default on)",
    "grace_seconds": "how long in-flight calls may finish after SIGTERM (default 10)",
    "max_connection_age_seconds": "grpc.max_connection_age_ms in seconds (default 300; 0 = off)",
    "max_connection_age_grace_seconds": "grpc.max_connection_age_grace_ms in seconds (default 30)",
    "plan_work_limit": (
        f"plan-search work bound; past it STATE_TOO_COMPLEX (default {engine.DEFAULT_WORK_LIMIT})"
    ),
    "max_replay_actions": (
        f"most actions one Replay call may carry (default {DEFAULT_MAX_REPLAY_ACTIONS})"
    ),
    "bot_level": "SuggestMove level when a request leaves it unspecified: "
    "random, greedy or strong (default strong)",
    "bot_max_deals": "most deals one SuggestMove may sample; a larger budget is refused "
    f"BUDGET_TOO_LARGE (default {DEFAULT_BOT_MAX_DEALS})",
    "bot_max_nodes": "most search nodes one SuggestMove may visit; a larger budget is refused "
    f"BUDGET_TOO_LARGE (default {DEFAULT_BOT_MAX_NODES})",
    "metrics_dir": "prometheus-client multiprocess directory (default: a fresh temp dir)",
    "io": "server flavour: sync (thread pool) or asyncio (default sync)",
    "signing_keys": "state signing keys 'kid:base64key,...', first signs (prefer the variable "
    "or the file: flags show in process lists)",
    "signing_keys_file": "file holding the signing keys in the same form (default: none, "
    "signing off)",
    "tls_cert": "PEM certificate chain for TLS on the gRPC port (default: none, plaintext)",
    "tls_key": "PEM private key of --tls-cert",
    "tls_client_ca": "PEM CA bundle; clients must present a certificate it signed (mutual TLS)",
    "tracing": "OpenTelemetry spans of RulesService calls, sent by OTLP where the standard "
    "OTEL_* variables say (default off)",
}


def env_name(field: str) -> str:
    """Return the environment variable of a setting."""
    return "BASRA_" + field.upper()


def flag_name(field: str) -> str:
    """Return the command-line flag of a setting."""
    return "--" + field.replace("_", "-")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add one flag per setting; unset flags stay None so variables and defaults can apply."""
    for field in fields(Config):
        shown = f"{_HELP[field.name]} [env {env_name(field.name)}]"
        if _PARSERS[field.name] is _boolean:  # --tracing / --no-tracing, --reflection / ...
            parser.add_argument(
                flag_name(field.name),
                dest=field.name,
                action=argparse.BooleanOptionalAction,
                default=None,
                help=shown,
            )
            continue
        parser.add_argument(
            flag_name(field.name),
            dest=field.name,
            default=None,
            metavar=field.name.split("_")[-1].upper(),
            help=shown,
        )


def resolve(flags: Mapping[str, Any], environ: Mapping[str, str]) -> Config:
    """Build the configuration from parsed flags (None = not given) and the environment."""
    values: dict[str, Any] = {}
    for field in fields(Config):
        parse = _PARSERS[field.name]
        given = flags.get(field.name)
        if isinstance(given, bool):
            values[field.name] = given
            continue
        if given is not None:
            source, text = flag_name(field.name), str(given)
        elif environ.get(env_name(field.name), "") != "":
            source, text = env_name(field.name), environ[env_name(field.name)]
        else:
            continue
        try:
            values[field.name] = parse(text)
        except ValueError as error:
            raise ConfigError(f"{source}={text!r} is not usable: {error}") from None
    return Config(**values)


def load(argv: Sequence[str], environ: Mapping[str, str]) -> Config:
    """Parse `serve` flags from argv and resolve them against the environment."""
    parser = argparse.ArgumentParser(prog="basra-rules serve")
    add_arguments(parser)
    return resolve(vars(parser.parse_args(list(argv))), environ)
