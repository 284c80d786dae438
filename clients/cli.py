"""The `basra-rules` command: `serve` the server, `play` or `load` it, `verify` a record."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence


def _serve(args: argparse.Namespace) -> int:
    from service import cli

    return cli.serve(args)


def _play(args: argparse.Namespace) -> int:
    from clients import play

    return play.run(args)


def _load(args: argparse.Namespace) -> int:
    from clients import load

    return load.run_command(args)


def _verify(args: argparse.Namespace) -> int:
    from clients import verify

    return verify.run(args)


def parser() -> argparse.ArgumentParser:
    """Return the argument parser of the console command."""
    from clients import load, play, verify
    from service import cli

    top = argparse.ArgumentParser(prog="basra-rules", description=__doc__)
    commands = top.add_subparsers(dest="command", required=True)
    serving = commands.add_parser("serve", help="run the gRPC rules server")
    cli.add_arguments(serving)
    serving.set_defaults(run=_serve)
    playing = commands.add_parser("play", help="two bots play a match against a running server")
    play.add_arguments(playing)
    playing.set_defaults(run=_play)
    loading = commands.add_parser("load", help="load-test a running server from a ghz config")
    load.add_arguments(loading)
    loading.set_defaults(run=_load)
    verifying = commands.add_parser(
        "verify", help="check from a match record that the match was dealt honestly"
    )
    verify.add_arguments(verifying)
    verifying.set_defaults(run=_verify)
    return top


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of `basra-rules` (and `python -m clients.cli`)."""
    args = parser().parse_args(argv)
    run = args.run
    del args.run
    return int(run(args))


if __name__ == "__main__":
    sys.exit(main())
