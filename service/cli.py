"""The `basra-rules` command: `serve` the server, `play` or `load` it, `verify` a record."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence


def _serve(args: argparse.Namespace) -> int:
    from service import config, signing, tls, workers
    from service.logs import make_logger

    flags = {k: v for k, v in vars(args).items() if k != "command"}
    try:
        settings = config.resolve(flags, os.environ)
        # Keys and certificates are read here once, so bad ones stop the server at start.
        signing.load_keys(settings.signing_keys, settings.signing_keys_file)
        files = tls.tls_files(settings.tls_cert, settings.tls_key, settings.tls_client_ca)
        if files is not None:
            tls.check_files(files)
    except (config.ConfigError, signing.SigningConfigError, tls.TLSConfigError) as error:
        print(f"basra-rules serve: {error}", file=sys.stderr)
        return 2
    logger = make_logger(settings.log_level, settings.log_format).bind(role="supervisor")
    return workers.supervise(settings, logger)


def _play(args: argparse.Namespace) -> int:
    from service import play

    return play.run(args)


def _verify(args: argparse.Namespace) -> int:
    from service import verify

    return verify.run(args)


def _load(args: argparse.Namespace) -> int:
    from service import loadgen

    return loadgen.run_command(args)


def parser() -> argparse.ArgumentParser:
    """Return the argument parser of the console command."""
    from service import config, play

    top = argparse.ArgumentParser(prog="basra-rules", description=__doc__)
    commands = top.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="run the gRPC rules server")
    config.add_arguments(serve)
    serve.set_defaults(run=_serve)
    playing = commands.add_parser("play", help="two bots play a match against a running server")
    play.add_arguments(playing)
    playing.set_defaults(run=_play)
    # `load` (load generator reading deploy/ghz configs) is owned by service/loadgen.py.
    from service import loadgen

    loading = commands.add_parser("load", help="load-test a running server from a ghz config")
    loadgen.add_arguments(loading)
    loading.set_defaults(run=_load)
    from service import verify

    verifying = commands.add_parser(
        "verify", help="check from a match record that the match was dealt honestly"
    )
    verify.add_arguments(verifying)
    verifying.set_defaults(run=_verify)
    return top


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of `basra-rules`."""
    args = parser().parse_args(argv)
    run = args.run
    del args.run
    return int(run(args))


if __name__ == "__main__":
    sys.exit(main())
