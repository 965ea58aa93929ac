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
Only the standard library is used here; the backend is imported when a command needs it.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys
import traceback
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NoReturn

if TYPE_CHECKING:
    from fray.errors import FrayError

__all__ = ["build_parser", "main"]


class _Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one line and a hint, like every other error of
    the ``fray`` command (argparse prints the whole usage text). Its subcommands' parsers
    are of this class too."""

    def error(self, message: str) -> NoReturn:
        _print_error(self.prog, message, f"see '{self.prog} --help'")
        sys.exit(2)


def _set_prog_defaults(parser: argparse.ArgumentParser) -> None:
    parser.set_defaults(prog=parser.prog)
    for action in parser._actions:  # pyright: ignore[reportPrivateUsage]
        if isinstance(action, argparse._SubParsersAction):  # pyright: ignore[reportPrivateUsage]
            choices: dict[str, argparse.ArgumentParser] = action.choices  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
            for child in choices.values():
                _set_prog_defaults(child)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``fray`` command."""
    from fray.cli import _doctor, _jobs, _migrate, _run, _tpu

    common = _Parser(add_help=False)
    common.add_argument(
        "--debug",
        action="store_true",
        default=argparse.SUPPRESS,
        help="show tracebacks and debug logging",
    )
    parser = _Parser(
        prog="fray",
        parents=[common],
        description="Run and inspect Fray jobs, look up TPU types, and plan a move from Ray.",
        epilog="Backend: --spec, else FRAY_CLIENT_SPEC, else local. 'fray doctor' shows it.",
    )
    from fray import __version__

    parser.add_argument("--version", action="version", version=f"fray {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    _run.add_parser(sub, common)
    _jobs.add_parser(sub, common)
    _tpu.add_parser(sub, common)
    _doctor.add_parser(sub, common)
    _migrate.add_parser(sub, common)
    _set_prog_defaults(parser)
    return parser


def _print_error(prog: str, message: str, hint: str | None) -> None:
    sys.stderr.write(f"{prog}: error: {message}\n")
    if hint:
        sys.stderr.write(f"hint: {hint}\n")
    sys.stderr.flush()


def _blame_the_flag(err: FrayError, spec: str | None) -> FrayError:
    """A bad spec given with ``--spec`` is reported as ``--spec``'s, not the variable's."""
    from fray.environment_variables import FRAY_CLIENT_SPEC
    from fray.errors import InvalidRequestError

    if spec is None or not isinstance(err, InvalidRequestError):
        return err
    if err.field != FRAY_CLIENT_SPEC:
        return err
    return InvalidRequestError.for_field("--spec", spec, err.allowed)


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the ``fray`` command with ``argv`` (default ``sys.argv[1:]``); returns the exit code."""
    from fray.cli._common import CliError, UsageError, fray_error_hint
    from fray.errors import FrayError

    parser = build_parser()
    try:
        args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    except SystemExit as exit_:
        code = exit_.code
        return code if isinstance(code, int) else (0 if code is None else 2)
    debug = bool(getattr(args, "debug", False))
    if debug:
        logging.basicConfig(level=logging.DEBUG, format="%(levelname)s %(name)s: %(message)s")
    handler: Any = getattr(args, "handler", None)
    prog: str = getattr(args, "prog", "fray")
    if handler is None:
        parser.print_help(sys.stderr)
        return 2
    try:
        return int(handler(args))
    except UsageError as err:
        if debug:
            traceback.print_exc()
        _print_error(prog, str(err), f"see '{prog} --help'")
        return 2
    except CliError as err:
        if debug:
            traceback.print_exc()
        _print_error(prog, str(err), err.hint)
        return err.code
    except FrayError as err:
        if debug:
            traceback.print_exc()
        blamed = _blame_the_flag(err, getattr(args, "spec", None))
        text = str(blamed).splitlines()[0] if str(blamed) else type(blamed).__name__
        _print_error(prog, text, fray_error_hint(blamed))
        return 1 if blamed is err else 2  # a bad --spec is a bad argument
    except KeyboardInterrupt:
        sys.stderr.write("\ninterrupted\n")
        return 130
    except BrokenPipeError:
        # The reader went away (`fray jobs logs ID | head`): stop quietly.
        with contextlib.suppress(OSError, ValueError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        return 141
    except Exception as err:
        if debug:
            traceback.print_exc()
        _print_error(
            prog,
            f"unexpected {type(err).__name__}: {err}",
            "rerun with --debug for the traceback, and report it if it is a bug in fray",
        )
        return 1
