"""What the ``fray`` subcommands share: errors, flag types, the backend choice and output."""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import math
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from fray import current_client
from fray.backend import client_from_spec, parse_client_spec  # imported here only
from fray.environment_variables import FRAY_CLIENT_SPEC
from fray.errors import InvalidRequestError


class CliError(Exception):
    """A failure reported as one line and a hint. Exit code 2 is a bad argument, whose hint
    (unless given) points at the command's ``--help``."""

    def __init__(self, message: str, *, hint: str | None = None, code: int = 1) -> None:
        super().__init__(message)
        self.hint, self.code = hint, code


def usage(argument: str, message: str) -> CliError:
    """A bad command-line argument: exit code 2, naming it."""
    return CliError(f"argument {argument}: {message}", code=2)


DEBUG = argparse.ArgumentParser(add_help=False)
DEBUG.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help="tracebacks")
_SPEC = argparse.ArgumentParser(add_help=False)
_SPEC.add_argument("--spec", help="backend: local, ray, ray://host:port, iris://host:port, ...")


def add_command(
    sub: Any, name: str, handler: Any, spec: bool = False, json: bool = False, **kw: Any
) -> Any:
    """Adds subcommand ``name`` (with ``--debug``, and ``--spec`` and ``--json`` if asked).
    Without a ``handler`` it is a group: run bare, it prints its help and exits 2."""
    parser = sub.add_parser(name, parents=[DEBUG, _SPEC] if spec else [DEBUG], **kw)
    parser.set_defaults(prog=parser.prog, handler=handler, usage=parser)
    if json:
        parser.add_argument("--json", action="store_true", help="print JSON")
    return parser


def number(kind: Callable[[str], float], minimum: int) -> Callable[[str], Any]:
    """A flag type: an ``int`` or ``float`` >= ``minimum`` (and finite)."""
    what = "an integer" if kind is int else "a number"

    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            value = math.nan
        if not minimum <= value < math.inf:
            raise argparse.ArgumentTypeError(
                f"{text!r} is not valid; must be {what} greater than or equal to {minimum}"
            )
        return value

    return parse


def choose_spec(explicit: str | None) -> tuple[str | None, str]:
    """Which backend to use, and why: ``--spec``, else ``FRAY_CLIENT_SPEC``, else ``None``
    inside an Iris job (``current_client()`` keeps the job's own cluster), else ``local``."""
    if explicit is not None:
        return explicit, f"--spec {explicit}"
    env = os.environ.get(FRAY_CLIENT_SPEC, "").strip()
    if env:
        return env, f"{FRAY_CLIENT_SPEC}={env!r}"
    if os.environ.get("IRIS_CONTROLLER_ADDRESS") and os.environ.get("IRIS_TASK_ID"):
        return None, "inside an Iris job (IRIS_CONTROLLER_ADDRESS and IRIS_TASK_ID)"
    return "local", "the default (no spec, no cluster)"


def open_client(
    explicit: str | None, local: Callable[[int | None, str | None], Any] | None = None
) -> Any:
    """The client ``--spec`` (or the environment) names; ``local(threads, target)``, if given,
    makes the local one.

    Raises:
        CliError: ``--spec`` is not valid (exit 2, naming the flag, not ``FRAY_CLIENT_SPEC``).
    """
    spec, _ = choose_spec(explicit)
    if spec is None:
        return current_client()
    try:
        parsed = parse_client_spec(spec, "--spec" if explicit is not None else FRAY_CLIENT_SPEC)
        if parsed.scheme != "local" or local is None:
            return client_from_spec(parsed)
        parsed.reject_unknown({"threads", "target"}, address=False)
        return local(parsed.param_int("threads"), parsed.params.get("target"))
    except InvalidRequestError as err:
        field = err.field or ""
        if not field.startswith("--spec"):
            raise
        key = field.removeprefix("--spec").lstrip(".")  # a parameter, if one is bad
        message = f"--spec: {spec!r} is not valid; {key + ': ' if key else ''}{err.allowed}"
        raise CliError(message, hint="'fray doctor' lists the installed backends", code=2) from None


def quiet_local_client(threads: int | None, target: str | None) -> Any:
    """A LocalClient that leaves the job's output to its caller (``fray run``)."""
    from fray import LocalClient

    return LocalClient(threads, echo_logs=False, target=target)


def silence_stdout() -> None:
    """Points stdout at /dev/null, after its reader has gone away."""
    with contextlib.suppress(OSError, ValueError):
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def print_json(value: Any) -> None:
    """Writes ``value`` as indented JSON."""
    sys.stdout.write(json.dumps(value, indent=2, default=str) + "\n")


def print_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    """Writes rows as aligned columns under ``headers``."""
    cells = [list(headers), *[["-" if c is None else str(c) for c in row] for row in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    for row in cells:
        sys.stdout.write("  ".join(map(str.ljust, row, widths)).rstrip() + "\n")


def print_pairs(pairs: Sequence[tuple[str, Any]]) -> None:
    """Writes ``key: value`` lines, the values aligned."""
    width = max(len(key) for key, _ in pairs) + 1
    sys.stdout.writelines(f"{key + ':':<{width}} {value}\n" for key, value in pairs)


def format_time(stamp: float | None) -> str:
    """A Unix time as local ``YYYY-MM-DD HH:MM:SS``, or ``-``."""
    return datetime.datetime.fromtimestamp(stamp).strftime("%F %T") if stamp else "-"


def format_duration(seconds: float | None) -> str:
    """``3.2s`` or ``1:02:05``; ``-`` when unknown."""
    if seconds is None or seconds < 0:
        return "-"
    return f"{seconds:.1f}s" if seconds < 60 else str(datetime.timedelta(seconds=round(seconds)))
