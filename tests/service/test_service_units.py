"""Units of the service: configuration precedence, conversion both ways, refusal statuses."""

from __future__ import annotations

import argparse
from dataclasses import fields

import grpc
import pytest
from basra.v1 import rules_pb2 as pb

import engine
from clients.refusals import error_infos
from service import errors, reading
from service.config import Config, ConfigError, add_arguments, env_name, flag_name, load
from service.handlers import Handlers
from service.outcomes import Facts
from testkit import messages
from testkit.calls import finished_match, states_of

# The configuration contract: flag, variable, default, another value as text and as parsed.
CONTRACT = {
    "host": ("--host", "BASRA_HOST", "[::]", "127.0.0.1", "127.0.0.1"),
    "port": ("--port", "BASRA_PORT", 50051, "6000", 6000),
    "metrics_port": ("--metrics-port", "BASRA_METRICS_PORT", 9464, "0", 0),
    "health_port": ("--health-port", "BASRA_HEALTH_PORT", 0, "8081", 8081),
    "workers": ("--workers", "BASRA_WORKERS", 1, "3", 3),
    "worker_probe_seconds": ("--worker-probe-seconds", "BASRA_WORKER_PROBE_SECONDS", 1, "0", 0),
    "worker_probe_timeout_seconds": (
        "--worker-probe-timeout-seconds",
        "BASRA_WORKER_PROBE_TIMEOUT_SECONDS",
        2,
        "0.5",
        0.5,
    ),
    "log_level": ("--log-level", "BASRA_LOG_LEVEL", "info", "debug", "debug"),
    "log_format": ("--log-format", "BASRA_LOG_FORMAT", "json", "console", "console"),
    "max_message_bytes": ("--max-message-bytes", "BASRA_MAX_MESSAGE_BYTES", 1048576, "2048", 2048),
    "grace_seconds": ("--grace-seconds", "BASRA_GRACE_SECONDS", 10, "2.5", 2.5),
    "max_connection_age_seconds": (
        "--max-connection-age-seconds",
        "BASRA_MAX_CONNECTION_AGE_SECONDS",
        300,
        "0",
        0,
    ),
    "max_connection_age_grace_seconds": (
        "--max-connection-age-grace-seconds",
        "BASRA_MAX_CONNECTION_AGE_GRACE_SECONDS",
        30,
        "5",
        5,
    ),
    "plan_work_limit": (
        "--plan-work-limit",
        "BASRA_PLAN_WORK_LIMIT",
        engine.DEFAULT_WORK_LIMIT,
        "500",
        500,
    ),
    "max_replay_actions": ("--max-replay-actions", "BASRA_MAX_REPLAY_ACTIONS", 10000, "7", 7),
    "max_batch_items": ("--max-batch-items", "BASRA_MAX_BATCH_ITEMS", 64, "16", 16),
    "bot_level": ("--bot-level", "BASRA_BOT_LEVEL", "strong", "GREEDY", "greedy"),
    "bot_max_deals": ("--bot-max-deals", "BASRA_BOT_MAX_DEALS", 64, "8", 8),
    "bot_max_nodes": ("--bot-max-nodes", "BASRA_BOT_MAX_NODES", 20000, "900", 900),
    "metrics_dir": ("--metrics-dir", "BASRA_METRICS_DIR", None, "/tmp/m", "/tmp/m"),
}


@pytest.mark.parametrize("name", sorted(CONTRACT))
def test_each_setting_has_its_flag_variable_and_default(name: str) -> None:
    """Defaults as in the contract; the variable overrides the default; the flag wins over both."""
    flag, variable, default, text, value = CONTRACT[name]
    assert (flag_name(name), env_name(name)) == (flag, variable)
    assert getattr(load([], {}), name) == default
    assert value != default
    assert getattr(load([], {variable: text}), name) == value
    assert getattr(load([flag, text], {variable: "garbage"}), name) == value


def test_reflection_is_on_by_default_and_switchable() -> None:
    """--reflection/--no-reflection and BASRA_REFLECTION (true/false/1/0/yes/no/on/off)."""
    assert load([], {}).reflection is True
    for text, value in [("false", False), ("0", False), ("off", False), ("yes", True)]:
        assert load([], {"BASRA_REFLECTION": text}).reflection is value
    assert load(["--reflection"], {"BASRA_REFLECTION": "false"}).reflection is True
    assert load(["--no-reflection"], {}).reflection is False
    with pytest.raises(ConfigError, match="BASRA_REFLECTION"):
        load([], {"BASRA_REFLECTION": "maybe"})


def test_tracing_is_off_by_default_and_switchable() -> None:
    """--tracing/--no-tracing and BASRA_TRACING; off unless asked for."""
    assert load([], {}).tracing is False
    for text, value in [("true", True), ("1", True), ("on", True), ("false", False)]:
        assert load([], {"BASRA_TRACING": text}).tracing is value
    assert load(["--tracing"], {}).tracing is True
    assert load(["--no-tracing"], {"BASRA_TRACING": "true"}).tracing is False
    with pytest.raises(ConfigError, match="BASRA_TRACING"):
        load([], {"BASRA_TRACING": "sometimes"})


def test_the_help_names_the_variable_of_every_flag() -> None:
    """`basra-rules serve --help` shows each setting's BASRA_* variable beside its flag."""
    parser = argparse.ArgumentParser(prog="basra-rules serve")
    add_arguments(parser)
    for action in parser._actions:
        if not action.option_strings or action.dest == "help":
            continue
        assert f"[env {env_name(action.dest)}]" in (action.help or ""), action.option_strings
    text = " ".join(parser.format_help().split())
    for field in fields(Config):
        assert f"{flag_name(field.name)}" in text
        assert f"[env {env_name(field.name)}]" in text
    assert "--no-tracing" in text and "--no-reflection" in text


def test_every_config_field_is_covered_by_the_contract_or_documented_extra() -> None:
    """No setting escapes the contract unnoticed: the extras are reflection, tracing, the
    admission bound and the settings of signed states and TLS (keys, certificates), documented
    beside the contract."""
    reserved = {
        "signing_keys",
        "signing_keys_file",
        "signing_accept_unsigned",
        "tls_cert",
        "tls_key",
        "tls_client_ca",
    }
    extras = {"reflection", "tracing", "admission_limit", *reserved}
    assert {f.name for f in fields(Config)} - set(CONTRACT) == extras


@pytest.mark.parametrize(
    ("argv", "environ", "named"),
    [
        (["--port", "70000"], {}, "--port"),
        ([], {"BASRA_PORT": "http"}, "BASRA_PORT"),
        (["--workers", "0"], {}, "--workers"),
        ([], {"BASRA_LOG_LEVEL": "loud"}, "BASRA_LOG_LEVEL"),
        (["--grace-seconds", "-1"], {}, "--grace-seconds"),
        (["--max-message-bytes", "10"], {}, "--max-message-bytes"),
        ([], {"BASRA_BOT_LEVEL": "genius"}, "BASRA_BOT_LEVEL"),
        (["--bot-max-nodes", "0"], {}, "--bot-max-nodes"),
    ],
)
def test_bad_values_are_refused_naming_their_source(
    argv: list[str], environ: dict[str, str], named: str
) -> None:
    """A bad value raises ConfigError naming the flag or variable it came from."""
    with pytest.raises(ConfigError, match=named):
        load(argv, environ)


def test_the_removed_io_flag_stops_the_command(capsys: pytest.CaptureFixture[str]) -> None:
    """--io (which chose an asyncio server, now gone) is refused like any unknown flag: exit 2
    naming it, so a start script that still passes it fails at once instead of serving."""
    with pytest.raises(SystemExit) as stopped:
        load(["--io", "sync"], {})
    assert stopped.value.code == 2
    assert "unrecognized arguments: --io sync" in capsys.readouterr().err


def test_empty_variables_count_as_unset() -> None:
    """BASRA_PORT= (empty) leaves the default."""
    assert load([], {"BASRA_PORT": ""}).port == 50051


def test_states_survive_the_round_trip_through_messages() -> None:
    """engine -> message -> bytes -> message -> engine gives the same state, all match long."""
    for state, _ in states_of(b"round-trip"):
        message = pb.State.FromString(messages.state_to_proto(state).SerializeToString())
        assert reading.state_from_proto(message) == state
    final, _ = finished_match(b"round-trip")
    back = reading.state_from_proto(messages.state_to_proto(final))
    assert back == final and back.to_move is None and back.winner is not None


def test_legal_moves_of_the_handlers_equal_the_engines() -> None:
    """The timed per-card plan generation of the service lists exactly engine.legal_moves."""
    observed: list[float] = []
    handlers = Handlers(observe_plan_seconds=observed.append)
    for state, _ in states_of(b"moves"):
        request = pb.LegalMovesRequest(state=messages.state_to_proto(state))
        response = pb.LegalMovesResponse.FromString(handlers.legal_moves(request, Facts()))
        expected = messages.moves_to_proto(state.to_move, engine.legal_moves(state))
        assert response.legal_moves == expected
    assert observed and all(0 <= s < 1 for s in observed)


def test_every_reason_has_its_status_code() -> None:
    """The contract's mapping: illegal moves FAILED_PRECONDITION, malformed INVALID_ARGUMENT."""
    fp = {
        "NOT_YOUR_TURN",
        "CARD_NOT_IN_HAND",
        "PLAN_REQUIRED",
        "UNKNOWN_PLAN",
        "ILLEGAL_CAPTURE",
        "MUST_CAPTURE",
        "MATCH_OVER",
    }
    exhausted = {
        "STATE_TOO_COMPLEX",
        "TOO_MANY_ACTIONS",
        "REQUEST_TOO_LARGE",
        "RESPONSE_TOO_LARGE",
        "BUDGET_TOO_LARGE",
        "OVERLOADED",
        "TOO_MANY_ITEMS",
    }
    late = {"DEADLINE_EXPIRED", "DEADLINE_TOO_SHORT"}
    for engine_reason in engine.Reason:
        assert engine_reason.value in errors.known_reasons()
    for reason in errors.known_reasons():
        code = errors.code_for(reason)
        if reason in fp:
            assert code is grpc.StatusCode.FAILED_PRECONDITION
        elif reason in exhausted:
            assert code is grpc.StatusCode.RESOURCE_EXHAUSTED
        elif reason in late:
            assert code is grpc.StatusCode.DEADLINE_EXCEEDED
        elif reason == "SEQ_MISMATCH":
            assert code is grpc.StatusCode.ABORTED
        elif reason == "BAD_SIGNATURE":
            assert code is grpc.StatusCode.UNAUTHENTICATED
        else:
            assert code is grpc.StatusCode.INVALID_ARGUMENT


def test_a_refusal_status_carries_exactly_one_error_info() -> None:
    """The status has the code, the sentence, and one ErrorInfo with lowerCamelCase keys."""
    refusal = errors.from_rule_error(
        engine.RuleError(engine.Reason.STATE_TOO_COMPLEX, "Too hard.", work_limit=5, work=9)
    )
    status = refusal.status()
    assert status.code is grpc.StatusCode.RESOURCE_EXHAUSTED and status.details == "Too hard."
    (info,) = error_infos(status.trailing_metadata)
    assert (info.reason, info.domain) == ("STATE_TOO_COMPLEX", "basra.v1")
    assert dict(info.metadata) == {"workLimit": "5", "work": "9"}
