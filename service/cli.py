"""`basra-rules serve`: settings from flags and variables, keys and certificates read once, workers.

The server's one entry point: the `basra-rules` command (clients/cli.py, which also holds the
client subcommands) hands its `serve` subcommand here.
"""

from __future__ import annotations

import argparse
import os
import sys


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the flags of `serve`, one per setting."""
    from service import config

    config.add_arguments(parser)


def serve(args: argparse.Namespace) -> int:
    """Run the server with the parsed flags until SIGTERM/SIGINT; return the exit code."""
    from service import config, signing, tls, workers
    from service.logs import make_logger
    from wire.signing import SigningConfigError, load_keys
    from wire.tls import TLSConfigError

    flags = {k: v for k, v in vars(args).items() if k != "command"}
    try:
        settings = config.resolve(flags, os.environ)
    except config.ConfigError as error:
        return _refused(error, "json")  # the log format may be the setting at fault
    try:
        # Keys and certificates are read here once, so bad ones stop the server at start.
        keyring = load_keys(settings.signing_keys, settings.signing_keys_file)
        signing.check_window(keyring, settings.signing_accept_unsigned)
        files = tls.tls_files(settings.tls_cert, settings.tls_key, settings.tls_client_ca)
        if files is not None:
            tls.check_files(files)
    except (SigningConfigError, TLSConfigError) as error:
        return _refused(error, settings.log_format)
    logger = make_logger(settings.log_level, settings.log_format).bind(role="supervisor")
    return workers.supervise(settings, logger)


def _refused(error: Exception, log_format: str) -> int:
    """Say why the server cannot start in one log line on standard error; return exit code 2.

    The line names the problem (`error`) and, when one is at fault, the file and the setting
    that names it (`file`, `setting`).
    """
    from service.logs import make_logger

    named = {k: getattr(error, k, None) for k in ("file", "setting")}
    logger = make_logger("error", log_format, sys.stderr).bind(role="supervisor")
    logger.error("cannot start", error=str(error), **{k: v for k, v in named.items() if v})
    return 2
