"""The chart's signing and TLS switches, read by the server's own code: same names, same form."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from service.config import resolve
from service.tls import tls_files
from testkit.deployment import (
    ALL_ON,
    TEST_SIGNING_KEYS,
    container,
    env_map,
    manifests,
    render,
)
from wire.signing import load_keys


def _objects() -> list[dict[str, Any]]:
    return manifests(render(ALL_ON))


def test_the_chart_made_keys_file_is_read_by_the_server(tmp_path: Path) -> None:
    """The Secret's keys file, as mounted, loads with the first chart key signing."""
    objects = _objects()
    env = env_map(container(objects))
    config = resolve({}, env)
    assert config.signing_keys_file == env["BASRA_SIGNING_KEYS_FILE"]
    assert config.signing_keys is None
    secret = next(o for o in objects if o["kind"] == "Secret")
    (name, content) = next(iter(secret["stringData"].items()))
    assert config.signing_keys_file.endswith("/" + name)
    mounted = tmp_path / name
    mounted.write_text(content + "\n")  # a trailing newline, as editors and kubectl add
    keyring = load_keys(config.signing_keys, str(mounted))
    assert keyring is not None
    assert keyring.key_ids == tuple(k["id"] for k in TEST_SIGNING_KEYS)
    assert keyring.signing_key_id == TEST_SIGNING_KEYS[0]["id"]


def test_the_chart_tls_variables_are_the_server_tls_settings() -> None:
    env = env_map(container(_objects()))
    config = resolve({}, env)
    files = tls_files(config.tls_cert, config.tls_key, config.tls_client_ca)
    assert files is not None
    assert (files.cert, files.key) == (env["BASRA_TLS_CERT"], env["BASRA_TLS_KEY"])
    assert files.client_ca == env["BASRA_TLS_CLIENT_CA"]
    assert files.cert.endswith("/tls.crt") and files.key.endswith("/tls.key")


def test_by_default_the_server_neither_signs_nor_speaks_tls() -> None:
    config = resolve({}, env_map(container(manifests(render({})))))
    assert load_keys(config.signing_keys, config.signing_keys_file) is None
    assert tls_files(config.tls_cert, config.tls_key, config.tls_client_ca) is None


def test_the_migration_window_is_a_chart_value_the_server_reads() -> None:
    """signing.acceptUnsigned sets BASRA_SIGNING_ACCEPT_UNSIGNED beside the keys file (false by
    default); without signing the variable is not set at all."""
    keys = [dict(k) for k in TEST_SIGNING_KEYS]
    for window in (True, False):
        values = {"signing": {"enabled": True, "keys": keys, "acceptUnsigned": window}}
        env = env_map(container(manifests(render(values))))
        assert env["BASRA_SIGNING_ACCEPT_UNSIGNED"] == str(window).lower()
        assert resolve({}, env).signing_accept_unsigned is window
    on = env_map(container(manifests(render({"signing": {"enabled": True, "keys": keys}}))))
    assert resolve({}, on).signing_accept_unsigned is False
    assert "BASRA_SIGNING_ACCEPT_UNSIGNED" not in env_map(container(manifests(render({}))))
