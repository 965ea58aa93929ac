"""The ``fray`` command line.

::

    fray run [--spec S] [--name N] [--cpu C --ram R --disk D] [--tpu TYPE --slices N | --gpu TYPE:N]
             [--env K=V]... [--max-retries-failure N --max-retries-preemption N] -- CMD...
    fray jobs list | status ID | logs ID [-f] [--children] | stop ID | wait ID...
    fray tpu list | show TYPE
    fray doctor
    fray migrate scan PATH...

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
from fray.environment_variables import FRAY_CLIENT_SPEC
from fray.errors import BackendUnavailableError, FrayError, InvalidRequestError, JobNotFoundError

__all__ = ["build_parser", "main"]


class _Parser(argparse.ArgumentParser):
    """Its errors are one line and a hint, like every other error of ``fray`` (argparse
    prints the whole usage). Subcommands' parsers are of this class too."""

    def error(self, message: str) -> NoReturn:
        _print_error(self.prog, message, f"see '{self.prog} --help'")
        sys.exit(2)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``fray`` command."""
    from fray import __version__
    from fray.cli import _doctor, _jobs, _migrate, _run, _tpu

    parser = _Parser(
        prog="fray",
        parents=[DEBUG],
        description="Run and inspect Fray jobs, look up TPU types, and plan a move from Ray.",
        epilog="Backend: --spec, else FRAY_CLIENT_SPEC, else local. 'fray doctor' shows it.",
    )
    parser.add_argument("--version", action="version", version=f"fray {__version__}")
    sub = parser.add_subparsers(metavar="COMMAND")
    for module in (_run, _jobs, _tpu, _doctor, _migrate):
        module.add_parser(sub)
    parser.set_defaults(prog="fray", handler=None, usage=parser)
    return parser


def _print_error(prog: str, message: str, hint: str | None) -> None:
    sys.stderr.write(f"{prog}: error: {message}\n" + (f"hint: {hint}\n" if hint else ""))


def _explain(err: Exception, prog: str) -> tuple[str, str | None, int]:
    """The one line, the hint and the exit code for an error."""
    if isinstance(err, CliError):
        hint = err.hint or (f"see '{prog} --help'" if err.code == 2 else None)
        return str(err), hint, err.code
    if not isinstance(err, FrayError):
        hint = "rerun with --debug for the traceback, and report it if it is a bug in fray"
        return f"unexpected {type(err).__name__}: {err}", hint, 1
    hint = None
    if isinstance(err, JobNotFoundError):
        hint = "'fray jobs list' shows the known jobs"
    elif isinstance(err, BackendUnavailableError):
        hint = "'fray doctor' lists the installed backends"
    elif isinstance(err, InvalidRequestError) and FRAY_CLIENT_SPEC in (err.field or ""):
        hint = f"check {FRAY_CLIENT_SPEC}; 'fray doctor' shows what is configured"
    return (str(err).splitlines() or [type(err).__name__])[0], hint, 1


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
    except Exception as err:
        if debug:
            traceback.print_exc()
        message, hint, code = _explain(err, args.prog)
        _print_error(args.prog, message, hint)
        return code
