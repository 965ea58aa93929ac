"""The ``fray`` command line: ``fray run``, ``fray jobs``, ``fray dashboard``, ``fray tpu``,
``fray doctor`` and ``fray migrate`` (see docs/cli.md).

Exit codes: ``fray run`` exits with the job's exit code (130 after Ctrl-C); bad arguments
exit 2; other errors print one line plus a hint and exit 1 (``--debug`` shows the traceback).
"""

from __future__ import annotations

import argparse
import logging
import sys
import traceback
from collections.abc import Sequence
from typing import NoReturn

from fray.cli._common import DEBUG, CliError, silence_stdout
from fray.errors import FrayError, JobNotFoundError

__all__ = ["build_parser", "main"]


class _Parser(argparse.ArgumentParser):
    """Reports a bad argument in one line and a hint, as ``fray`` reports every error."""

    def error(self, message: str) -> NoReturn:
        sys.stderr.write(f"{self.prog}: error: {message}\nhint: see '{self.prog} --help'\n")
        sys.exit(2)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``fray`` command."""
    from fray import __version__
    from fray.cli import _dashboard, _info, _jobs, _run

    parser = _Parser(
        prog="fray",
        parents=[DEBUG],
        description="Run and inspect Fray jobs, look up TPU types, and plan a move from Ray.",
        epilog="Backend: --spec, else FRAY_CLIENT_SPEC, else local. 'fray doctor' shows it.",
    )
    parser.add_argument("--version", action="version", version=f"fray {__version__}")
    sub = parser.add_subparsers(metavar="COMMAND")
    for module in (_run, _jobs, _dashboard, _info):
        module.add_parser(sub)
    parser.set_defaults(prog="fray", handler=None, usage=parser)
    return parser


def _as_cli_error(err: Exception) -> CliError:
    """The one line and the hint that report ``err``."""
    if isinstance(err, CliError):
        return err
    if not isinstance(err, FrayError):
        hint = "rerun with --debug for the traceback, and report it if it is a bug in fray"
        return CliError(f"unexpected {type(err).__name__}: {err}", hint=hint)
    hint = "'fray jobs list' shows the known jobs" if isinstance(err, JobNotFoundError) else None
    return CliError((str(err).splitlines() or [type(err).__name__])[0], hint=hint)


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the ``fray`` command with ``argv`` (default ``sys.argv[1:]``); returns the exit code."""
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exit_:  # --help, --version, or a bad argument (already reported)
        return int(exit_.code or 0)
    debug = getattr(args, "debug", False)
    if debug:
        logging.basicConfig(level=logging.DEBUG, format="%(levelname)s %(name)s: %(message)s")
    if args.handler is None:  # a group without its subcommand
        args.usage.print_help(sys.stderr)
        return 2
    try:
        return args.handler(args)
    except KeyboardInterrupt:
        sys.stderr.write("\ninterrupted\n")
        return 130
    except BrokenPipeError:  # the reader went away (`fray jobs logs ID | head`): stop quietly
        silence_stdout()
        return 141
    except Exception as exc:
        if debug:
            traceback.print_exc()
        err = _as_cli_error(exc)
        hint = err.hint or (f"see '{args.prog} --help'" if err.code == 2 else None)
        sys.stderr.write(f"{args.prog}: error: {err}\n" + (f"hint: {hint}\n" if hint else ""))
        return err.code
