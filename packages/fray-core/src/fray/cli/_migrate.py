"""``fray migrate scan PATH``: a thin front end to :mod:`fray.migrate`."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from fray.cli._common import add_command, print_json, usage

__all__ = ["add_parser"]


def add_parser(sub: Any) -> None:
    """Adds ``fray migrate`` and ``fray migrate scan``."""
    migrate = add_command(sub, "migrate", None, help="help moving a code base from Ray to Fray")
    p = add_command(
        migrate.add_subparsers(metavar="COMMAND"),
        "scan",
        cmd_scan,
        help="list each Ray usage with its Fray replacement, in migration order",
        description="A static scan (nothing is imported or run). Exit 1 when something is "
        "found (0 with --exit-zero), or when a file cannot be parsed; see docs/cli.md.",
    )
    p.add_argument("paths", metavar="PATH", nargs="+", help="files or folders to scan")
    p.add_argument("--json", action="store_true", help="print JSON for tools")
    p.add_argument("--exit-zero", action="store_true", help="exit 0 even when usages are found")


def cmd_scan(args: argparse.Namespace) -> int:
    """``fray migrate scan``."""
    from fray.migrate import iter_strategies, scan

    for path in args.paths:
        if not os.path.exists(path):
            raise usage("PATH", f"{path!r} does not exist; give a Python file or a folder")
    report = scan(args.paths)
    if args.json:
        print_json(report.as_dict())
    else:
        unparsed = f"; {len(report.errors)} could not be parsed" if report.errors else ""
        out = [
            f"fray migrate scan: {len(report.findings)} usage(s) in {report.files_with_findings} "
            f"of {report.files_scanned} file(s){unparsed}"
        ]
        for strategy, findings in iter_strategies(report):
            if findings:
                out += ["", f"{strategy.priority}. {strategy.title} ({len(findings)})"]
                out.append(f"   {strategy.summary}")
            for f in findings:
                out += [f"   {f.path}:{f.line}:{f.column}: {f.found}", f"      -> {f.replacement}"]
        if report.findings:
            out += ["", "Guide: docs/migrating-from-ray.md and docs/migrating-from-fray-v2.md."]
        sys.stdout.write("\n".join(out) + "\n")
    for error in report.errors:  # the report is incomplete: name each file, and never exit 0
        where = f"{error.path}:{error.line}" if error.line else error.path
        sys.stderr.write(f"{args.prog}: error: cannot parse {where}: {error.message}\n")
    return 1 if (report.findings and not args.exit_zero) or report.errors else 0
