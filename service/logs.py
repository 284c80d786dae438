"""Structured logs (structlog): one JSON (or console) line per event, no global configuration.

Loggers are built explicitly and passed to whoever logs, so tests can capture them and no
process-wide structlog state is touched. Callers log only the fields they name; the request
bodies are never logged, so no seed and no hidden card can leak into the logs.

Every call writes a line, so the JSON path follows structlog's performance advice: orjson
renders the line to bytes, which go to the stream's binary buffer; the timestamp is taken as
a datetime that orjson writes in ISO 8601 (the text TimeStamper(fmt="iso", utc=True) gives,
at a fraction of its cost); the filtering logger is cached on first use.
"""

from __future__ import annotations

import datetime
import logging
import sys
import threading
from collections.abc import MutableMapping
from typing import Any, BinaryIO, TextIO

import orjson
import structlog

LOG_LEVELS = ("debug", "info", "warning", "error")
LOG_FORMATS = ("json", "console")

Logger = Any  # structlog's bound loggers are dynamically typed

_UTC = datetime.UTC


def _utc_now(logger: object, name: str, event: MutableMapping[str, Any]) -> Any:
    """Stamp the event with the time; the renderer writes it as ISO 8601 with a Z."""
    event["timestamp"] = datetime.datetime.now(_UTC)
    return event


def _render_json(logger: object, name: str, event: MutableMapping[str, Any]) -> bytes:
    """The event as one line of JSON bytes (anything orjson cannot write, as its repr)."""
    return orjson.dumps(event, default=repr, option=orjson.OPT_UTC_Z)


class _TextLogger:
    """Writes rendered bytes to a text stream that has no binary buffer (a StringIO)."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._lock = threading.Lock()

    def msg(self, message: bytes) -> None:
        """Write one line and flush it."""
        with self._lock:
            self._stream.write(message.decode() + "\n")
            self._stream.flush()

    debug = info = warning = error = msg


def _json_output(stream: TextIO) -> Any:
    """A logger of rendered bytes: the stream's binary buffer when it has one."""
    buffer: BinaryIO | None = getattr(stream, "buffer", None)
    if buffer is not None:
        stream.flush()  # nothing written as text may come after what is written as bytes
        return structlog.BytesLogger(buffer)
    return _TextLogger(stream)


def make_logger(level: str = "info", fmt: str = "json", stream: TextIO | None = None) -> Logger:
    """Return a logger writing one line per event at `level` or above to `stream` (stdout)."""
    if level not in LOG_LEVELS:
        raise ValueError(f"log level must be one of {', '.join(LOG_LEVELS)}, not {level!r}")
    if fmt not in LOG_FORMATS:
        raise ValueError(f"log format must be one of {', '.join(LOG_FORMATS)}, not {fmt!r}")
    out = stream if stream is not None else sys.stdout
    processors: list[structlog.typing.Processor]
    if fmt == "json":
        logger: Any = _json_output(out)
        # format_exc_info: a line given exc_info (a failed call) carries its traceback.
        processors = [
            structlog.processors.add_log_level,
            _utc_now,
            structlog.processors.format_exc_info,
            _render_json,
        ]
    else:
        logger = structlog.WriteLogger(out)
        processors = [
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.dev.ConsoleRenderer(colors=False),
        ]
    return structlog.wrap_logger(
        logger,
        wrapper_class=structlog.make_filtering_bound_logger(getattr(logging, level.upper())),
        processors=processors,
        cache_logger_on_first_use=True,
    )
