"""Structured logs (structlog): one JSON (or console) line per event, no global configuration.

Loggers are built explicitly and passed to whoever logs, so tests can capture them and no
process-wide structlog state is touched. Callers log only the fields they name; the request
bodies are never logged, so no seed and no hidden card can leak into the logs.
"""

from __future__ import annotations

import logging
import sys
from typing import Any, TextIO

import structlog

LEVELS = ("debug", "info", "warning", "error")
FORMATS = ("json", "console")

Logger = Any  # structlog's bound loggers are dynamically typed


def make_logger(level: str = "info", fmt: str = "json", stream: TextIO | None = None) -> Logger:
    """Return a logger writing one line per event at `level` or above to `stream` (stdout)."""
    if level not in LEVELS:
        raise ValueError(f"log level must be one of {', '.join(LEVELS)}, not {level!r}")
    if fmt not in FORMATS:
        raise ValueError(f"log format must be one of {', '.join(FORMATS)}, not {fmt!r}")
    renderer: structlog.typing.Processor = (
        structlog.processors.JSONRenderer()
        if fmt == "json"
        else structlog.dev.ConsoleRenderer(colors=False)
    )
    return structlog.wrap_logger(
        structlog.WriteLogger(stream if stream is not None else sys.stdout),
        wrapper_class=structlog.make_filtering_bound_logger(getattr(logging, level.upper())),
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            renderer,
        ],
        cache_logger_on_first_use=True,
    )
