"""``fray migrate scan PATH``: list Ray usages and their Fray replacements."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from fray.cli._common import UsageError, print_json

if TYPE_CHECKING:
    from fray.migrate import ScanError

__all__ = ["add_parser"]


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    """Adds ``fray migrate`` and ``fray migrate scan``."""
    migrate: argparse.ArgumentParser = sub.add_parser(
        "migrate", parents=[common], help="help moving a code base from Ray to Fray"
    )
    inner = migrate.add_subparsers(dest="migrate_command", metavar="COMMAND")
    p = inner.add_parser(
        "scan",
        parents=[common],
        help="list each Ray usage with its Fray replacement, in migration order",
        description=(
            "Statically scans Python files (nothing is imported or run) for Ray and "
            "predecessor-Fray usage. Exit code: 0 when nothing is found, 1 when something is "
            "(0 with --exit-zero) or when a file cannot be parsed (even with --exit-zero: the "
            "report is incomplete), 2 for bad arguments. See docs/migrating-from-ray.md."
        ),
    )
    p.add_argument("paths", metavar="PATH", nargs="+", help="files or folders to scan")
    p.add_argument("--json", action="store_true", help="print JSON for tools")
    p.add_argument("--exit-zero", action="store_true", help="exit 0 even when usages are found")
    p.set_defaults(handler=cmd_scan)

    def no_command(_args: argparse.Namespace) -> int:
        migrate.print_help(sys.stderr)
        return 2

    migrate.set_defaults(handler=no_command)


def cmd_scan(args: argparse.Namespace) -> int:
    """``fray migrate scan``."""
    from fray.migrate import iter_strategies, scan

    for path in args.paths:
        if not os.path.exists(path):
            raise UsageError("PATH", f"{path!r} does not exist; give a Python file or a folder")
    report = scan(args.paths)
    # A file that cannot be parsed makes the report incomplete: never exit 0 then.
    code = 1 if (report.findings and not args.exit_zero) or report.errors else 0
    if args.json:
        print_json(report.as_dict())
        _print_errors(args, report.errors)
        return code
    out = sys.stdout
    unparsed = f"; {len(report.errors)} could not be parsed" if report.errors else ""
    out.write(
        f"fray migrate scan: {len(report.findings)} usage(s) in {report.files_with_findings} of "
        f"{report.files_scanned} file(s){unparsed}\n"
    )
    for strategy, findings in iter_strategies(report):
        if not findings:
            continue
        out.write(f"\n{strategy.priority}. {strategy.title} ({len(findings)})\n")
        out.write(f"   {strategy.summary}\n")
        for finding in findings:
            out.write(f"   {finding.path}:{finding.line}:{finding.column}: {finding.found}\n")
            out.write(f"      -> {finding.replacement}\n")
    if report.findings:
        out.write("\nGuide: docs/migrating-from-ray.md (Ray) and docs/migrating-from-fray-v2.md.\n")
    out.flush()
    _print_errors(args, report.errors)
    return code


def _print_errors(args: argparse.Namespace, errors: Sequence[ScanError]) -> None:
    """One line on stderr per file that could not be parsed: where, and why."""
    prog = getattr(args, "prog", "fray migrate scan")
    for error in errors:
        where = f"{error.path}:{error.line}" if error.line else error.path
        sys.stderr.write(f"{prog}: error: cannot parse {where}: {error.message}\n")
    sys.stderr.flush()
