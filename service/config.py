"""Server configuration: a flag wins over its BASRA_* variable, which wins over the default.

Each setting is declared once, as a field of Config made by `setting`: its default, the parser
that reads (and bounds) its text, and its help. Everything else comes from that declaration:
the flag (--metrics-port) and the variable (BASRA_METRICS_PORT) from the field's name,
`basra-rules serve --help`, and the checks that keep the settings table of docs/service.md and
the Helm chart's values schema in step (tests/service/test_service_config.py). An empty
variable counts as unset. A bad value is refused with a message naming where it came from.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from dataclasses import field as dataclass_field
from typing import Any, Protocol

import engine
from engine.bot import Level
from service.logs import LOG_FORMATS, LOG_LEVELS

BOT_LEVELS = tuple(level.lower() for level in Level)
_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


class ConfigError(ValueError):
    """A setting has a value the server cannot use."""


class Parser(Protocol):
    """Reads a setting's text, refusing (ValueError) what the server cannot use."""

    def __call__(self, text: str) -> Any: ...

    def schema(self) -> dict[str, Any]:
        """The JSON schema of the values it accepts (the chart's schema may only narrow it)."""
        ...


@dataclass(frozen=True, slots=True)
class Integer:
    """A whole number from `minimum` up to `maximum` (None: no upper bound)."""

    minimum: int
    maximum: int | None = None

    def __call__(self, text: str) -> int:
        value = int(text)
        if self.maximum is not None and not self.minimum <= value <= self.maximum:
            raise ValueError(f"must be {self.minimum} to {self.maximum}")
        if value < self.minimum:
            raise ValueError(f"must be at least {self.minimum}")
        return value

    def schema(self) -> dict[str, Any]:
        """An integer within the bounds."""
        bounds = {} if self.maximum is None else {"maximum": self.maximum}
        return {"type": "integer", "minimum": self.minimum, **bounds}


PORT = Integer(0, 65535)


@dataclass(frozen=True, slots=True)
class Seconds:
    """A duration in seconds, fractions allowed, from `minimum` (0) to a day."""

    maximum: float = 86_400
    minimum: float = 0

    def __call__(self, text: str) -> float:
        value = float(text)
        if not self.minimum <= value <= self.maximum:
            raise ValueError(f"seconds must be {self.minimum:g} to {self.maximum:g}")
        return value

    def schema(self) -> dict[str, Any]:
        """A number within the bounds."""
        return {"type": "number", "minimum": self.minimum, "maximum": self.maximum}


@dataclass(frozen=True, slots=True)
class Choice:
    """One of a few words, in any case."""

    options: tuple[str, ...]

    def __call__(self, text: str) -> str:
        value = text.strip().lower()
        if value not in self.options:
            raise ValueError(f"must be one of {', '.join(self.options)}")
        return value

    def schema(self) -> dict[str, Any]:
        """One of the options."""
        return {"enum": list(self.options)}

    def words(self) -> str:
        """The options in a sentence ("json or console")."""
        return " or ".join((", ".join(self.options[:-1]), self.options[-1]))


@dataclass(frozen=True, slots=True)
class Boolean:
    """On or off: true/false, 1/0, yes/no, on/off; a flag --name / --no-name."""

    def __call__(self, text: str) -> bool:
        value = text.strip().lower()
        if value in _TRUE:
            return True
        if value in _FALSE:
            return False
        raise ValueError("must be true or false")

    def schema(self) -> dict[str, Any]:
        """A boolean."""
        return {"type": "boolean"}


@dataclass(frozen=True, slots=True)
class Text:
    """Any text but the empty one (an address, a path, keys)."""

    def __call__(self, text: str) -> str:
        if not text:
            raise ValueError("must not be empty")
        return text

    def schema(self) -> dict[str, Any]:
        """A string that is not empty."""
        return {"type": "string", "minLength": 1}


@dataclass(frozen=True, slots=True)
class Declared:
    """What a setting's declaration holds beside its default."""

    parse: Parser
    help: str
    unset: str | None
    """How a default of None reads ("none: signing off"); None for other defaults."""


def setting(
    default: Any, parse: Parser, help: str, *, unset: str | None = None, secret: bool = False
) -> Any:
    """Declare a setting: its default, the parser of its text and its help (secret: no repr)."""
    return dataclass_field(
        default=default, repr=not secret, metadata={"setting": Declared(parse, help, unset)}
    )


@dataclass(frozen=True, slots=True)
class Config:
    """Everything `basra-rules serve` needs to know."""

    host: str = setting("[::]", Text(), "bind address for gRPC and metrics")
    port: int = setting(50051, PORT, "gRPC port; 0 picks a free one")
    metrics_port: int = setting(
        9464, PORT, "Prometheus HTTP port, path /metrics; 0 turns metrics off"
    )
    # Off unless asked for, so that a server started on free ports (tests, examples, a second
    # server on one machine) needs no flag of its own for it; the chart and the manifests, whose
    # probes use it, turn it on at 8081.
    health_port: int = setting(
        0,
        PORT,
        "port of a server of its own answering grpc.health.v1 only, in plaintext, for probes "
        "that must not wait behind the work; 0 turns it off",
    )
    workers: int = setting(1, Integer(1), "worker processes sharing the gRPC port (SO_REUSEPORT)")
    # The supervisor's probes of its own workers (service/worker_probes.py): a worker that
    # answers none within the timeout is killed and replaced; the defaults find one within
    # about 3 s, and a probe's answer takes milliseconds even at four times a worker's capacity.
    worker_probe_seconds: float = setting(
        1.0,
        Seconds(60),
        "how often the supervisor asks each worker a health Check over a private unix socket; "
        "0 turns the probes off",
    )
    worker_probe_timeout_seconds: float = setting(
        2.0,
        Seconds(600, minimum=0.1),
        "a worker that leaves a probe unanswered this long is hung: killed and replaced",
    )
    log_level: str = setting("info", Choice(LOG_LEVELS), "least severe log level written")
    log_format: str = setting("json", Choice(LOG_FORMATS), "log line format")
    max_message_bytes: int = setting(
        1_048_576, Integer(1024), "largest request or response in bytes"
    )
    reflection: bool = setting(True, Boolean(), "gRPC server reflection")
    grace_seconds: float = setting(
        10.0, Seconds(), "how long in-flight calls may finish after SIGTERM"
    )
    max_connection_age_seconds: float = setting(
        300.0, Seconds(), "grpc.max_connection_age_ms in seconds; 0 = off"
    )
    max_connection_age_grace_seconds: float = setting(
        30.0, Seconds(), "grpc.max_connection_age_grace_ms in seconds"
    )
    plan_work_limit: int = setting(
        engine.DEFAULT_WORK_LIMIT, Integer(1), "plan-search work bound; past it STATE_TOO_COMPLEX"
    )
    max_replay_actions: int = setting(
        10_000, Integer(0), "most actions one Replay call may carry; more is TOO_MANY_ACTIONS"
    )
    bot_level: str = setting(
        "strong", Choice(BOT_LEVELS), "SuggestMove's level when a request leaves it unspecified"
    )
    # The most work one SuggestMove may ask for: about four times the default deals and nine
    # times its nodes (what that costs in CPU: docs/bot.md, "The budget").
    bot_max_deals: int = setting(
        64, Integer(1), "most deals one SuggestMove may sample; a larger budget is BUDGET_TOO_LARGE"
    )
    bot_max_nodes: int = setting(
        20_000,
        Integer(1),
        "most search nodes one SuggestMove may visit; a larger budget is BUDGET_TOO_LARGE",
    )
    metrics_dir: str | None = setting(
        None,
        Text(),
        "prometheus-client multiprocess directory",
        unset="a fresh temporary directory",
    )
    admission_limit: int = setting(
        64,
        Integer(0),
        "most calls one worker holds, in flight plus queued; past it a call is refused at once "
        "(RESOURCE_EXHAUSTED, OVERLOADED, with a retry delay); 0 = no bound",
    )
    max_batch_items: int = setting(
        64,
        Integer(1, 10_000),
        "most requests one BatchApply call may carry; more is refused whole (RESOURCE_EXHAUSTED, "
        "TOO_MANY_ITEMS)",
    )
    signing_keys: str | None = setting(
        None,
        Text(),
        "state signing keys 'kid:base64key,...', the first signs (prefer the variable or the "
        "file: flags show in process lists)",
        unset="none, signing off",
        secret=True,
    )
    signing_keys_file: str | None = setting(
        None, Text(), "file holding the signing keys in the same form", unset="none, signing off"
    )
    signing_accept_unsigned: bool = setting(
        False,
        Boolean(),
        "with signing keys, also accept unsigned states: the migration window of turning "
        "signing on or off",
    )
    tls_cert: str | None = setting(
        None, Text(), "PEM certificate chain for TLS on the gRPC port", unset="none, plaintext"
    )
    tls_key: str | None = setting(None, Text(), "PEM private key of --tls-cert", unset="none")
    tls_client_ca: str | None = setting(
        None,
        Text(),
        "PEM CA bundle; clients must present a certificate it signed (mutual TLS)",
        unset="none",
    )
    tracing: bool = setting(
        False,
        Boolean(),
        "OpenTelemetry spans of RulesService calls, sent by OTLP where the standard OTEL_* "
        "variables say",
    )


@dataclass(frozen=True, slots=True)
class Setting:
    """One setting as users meet it: flag, variable, default, parser, help."""

    name: str
    default: Any
    parse: Parser
    help: str
    unset: str | None

    @property
    def flag(self) -> str:
        """The command-line flag (--metrics-port)."""
        return flag_name(self.name)

    @property
    def env(self) -> str:
        """The environment variable (BASRA_METRICS_PORT)."""
        return env_name(self.name)

    @property
    def shown_default(self) -> str:
        """The default as --help and the docs show it."""
        if self.default is None:
            return self.unset or "none"
        if isinstance(self.default, bool):
            return "on" if self.default else "off"
        if isinstance(self.default, float):
            return f"{self.default:g}"
        return str(self.default)

    @property
    def described(self) -> str:
        """The help with the options of a choice, without the default."""
        if isinstance(self.parse, Choice):
            return f"{self.help}: {self.parse.words()}"
        return self.help

    @property
    def switch(self) -> bool:
        """Whether the flag is an on/off pair (--tracing / --no-tracing)."""
        return isinstance(self.parse, Boolean)


def env_name(field: str) -> str:
    """Return the environment variable of a setting."""
    return "BASRA_" + field.upper()


def flag_name(field: str) -> str:
    """Return the command-line flag of a setting."""
    return "--" + field.replace("_", "-")


SETTINGS: tuple[Setting, ...] = tuple(
    Setting(f.name, f.default, d.parse, d.help, d.unset)
    for f in fields(Config)
    for d in (f.metadata["setting"],)
)
"""Every setting, in the order of Config."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add one flag per setting; unset flags stay None so variables and defaults can apply."""
    for entry in SETTINGS:
        shown = f"{entry.described} (default {entry.shown_default}) [env {entry.env}]"
        if entry.switch:  # --tracing / --no-tracing, --reflection / --no-reflection
            parser.add_argument(
                entry.flag,
                dest=entry.name,
                action=argparse.BooleanOptionalAction,
                default=None,
                help=shown,
            )
            continue
        parser.add_argument(
            entry.flag,
            dest=entry.name,
            default=None,
            metavar=entry.name.split("_")[-1].upper(),
            help=shown,
        )


def resolve(flags: Mapping[str, Any], environ: Mapping[str, str]) -> Config:
    """Build the configuration from parsed flags (None = not given) and the environment."""
    values: dict[str, Any] = {}
    for entry in SETTINGS:
        given = flags.get(entry.name)
        if isinstance(given, bool):
            values[entry.name] = given
            continue
        if given is not None:
            source, text = entry.flag, str(given)
        elif environ.get(entry.env, "") != "":
            source, text = entry.env, environ[entry.env]
        else:
            continue
        try:
            values[entry.name] = entry.parse(text)
        except ValueError as error:
            raise ConfigError(f"{source}={text!r} is not usable: {error}") from None
    return Config(**values)


def load(argv: Sequence[str], environ: Mapping[str, str]) -> Config:
    """Parse `serve` flags from argv and resolve them against the environment."""
    parser = argparse.ArgumentParser(prog="basra-rules serve")
    add_arguments(parser)
    return resolve(vars(parser.parse_args(list(argv))), environ)
