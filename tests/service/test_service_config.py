"""The settings' one declaration reaches everything users read: --help and docs/service.md.

(The Helm chart's values schema is checked against the same declarations in
tests/deploy/test_deploy_server_config.py.)
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from service.config import SETTINGS, Choice, Config, Integer, Setting, add_arguments, load

DOC = Path(__file__).resolve().parents[2] / "docs" / "service.md"
BEGIN = "<!-- settings table: generated from service/config.py, checked by tests -->"
END = "<!-- end of settings table -->"


def settings_table() -> str:
    """The settings table of docs/service.md, as the declarations give it."""
    rows = [
        "| flag | variable | default | what it sets |",
        "|---|---|---|---|",
    ]
    for entry in SETTINGS:
        flag = f"`{entry.flag}`" + (f" / `--no-{entry.flag[2:]}`" if entry.switch else "")
        default = entry.shown_default
        shown = default if entry.default is None else f"`{default}`"
        rows.append(f"| {flag} | `{entry.env}` | {shown} | {entry.described} |")
    return "\n".join(rows)


def test_the_docs_show_the_settings_as_declared() -> None:
    """docs/service.md's settings table is the one the declarations give, row for row."""
    text = DOC.read_text(encoding="utf-8")
    assert text.count(BEGIN) == 1 and text.count(END) == 1
    shown = text.split(BEGIN)[1].split(END)[0].strip()
    expected = settings_table()
    assert shown == expected, f"replace the table in {DOC.name} with:\n{expected}"


def _help(parser: argparse.ArgumentParser, dest: str) -> str:
    action = next(a for a in parser._actions if a.dest == dest)
    return action.help or ""


def test_the_help_shows_each_default_and_choice_as_declared() -> None:
    """--help states each default once, from the declared value (never retyped)."""
    parser = argparse.ArgumentParser(prog="basra-rules serve")
    add_arguments(parser)
    defaults = Config()
    for entry in SETTINGS:
        text = _help(parser, entry.name)
        assert f"(default {entry.shown_default})" in text, entry.name
        assert getattr(defaults, entry.name) == entry.default
        if isinstance(entry.parse, Choice):
            assert all(option in text for option in entry.parse.options)
    assert "(default 50051)" in _help(parser, "port")
    assert "(default off)" in _help(parser, "tracing")
    assert "(default 10)" in _help(parser, "grace_seconds")


@pytest.mark.parametrize("entry", [s for s in SETTINGS if isinstance(s.parse, Integer)])
def test_each_number_is_refused_just_outside_its_declared_bounds(entry: Setting) -> None:
    """The bounds the chart's schema is checked against are the ones the server enforces."""
    assert isinstance(entry.parse, Integer)
    load([entry.flag, str(entry.parse.minimum)], {})
    with pytest.raises(ValueError, match=entry.flag):
        load([entry.flag, str(entry.parse.minimum - 1)], {})
    if entry.parse.maximum is not None:
        load([entry.flag, str(entry.parse.maximum)], {})
        with pytest.raises(ValueError, match=entry.flag):
            load([entry.flag, str(entry.parse.maximum + 1)], {})


def test_secrets_are_left_out_of_the_repr() -> None:
    """The inline signing keys never show in a printed configuration."""
    assert "s3cret" not in repr(Config(signing_keys="k1:s3cret"))
