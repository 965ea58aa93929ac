"""A static scan (Python ``ast``, nothing is imported or run) for Ray and predecessor-API use."""

from __future__ import annotations

import ast
import os
from collections.abc import Iterator, Sequence

from fray.migrate._report import Finding, ScanError, ScanReport
from fray.migrate._visitor import FileScan

__all__ = ["scan"]

# Folders never scanned (besides hidden ones).
_SKIP_DIRS = {
    "__pycache__",
    "node_modules",
    "site-packages",
    "venv",
    "build",
    "dist",
}


def _python_files(root: str) -> Iterator[str]:
    if os.path.isfile(root):
        yield root
        return
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in _SKIP_DIRS)
        for name in sorted(files):
            if name.endswith(".py"):
                yield os.path.join(folder, name)


def _display(path: str, root: str) -> str:
    if os.path.isfile(root):
        return path
    rel = os.path.relpath(path, root)
    return rel if not rel.startswith("..") else path


def scan(paths: Sequence[str] | str) -> ScanReport:
    """Scans Python files under ``paths`` (files or folders) for Ray and predecessor-API use.

    Nothing is imported or executed. Hidden folders, ``__pycache__``, virtualenvs,
    ``site-packages``, ``build`` and ``dist`` are skipped.

    Args:
        paths: Files or folders.

    Returns:
        A :class:`ScanReport`; files that do not parse are listed in ``errors``.

    Raises:
        FileNotFoundError: A path does not exist.
    """
    roots = [paths] if isinstance(paths, str) else list(paths)
    for root in roots:
        if not os.path.exists(root):
            raise FileNotFoundError(root)
    report = ScanReport(paths=roots)
    findings: list[Finding] = []
    for root in roots:
        for path in _python_files(root):
            shown = _display(path, root)
            report.files_scanned += 1
            try:
                with open(path, encoding="utf-8", errors="replace") as f:
                    source = f.read()
                tree = ast.parse(source, filename=path)
            except SyntaxError as err:
                report.errors.append(ScanError(shown, err.lineno, f"syntax error: {err.msg}"))
                continue
            except (OSError, ValueError) as err:
                report.errors.append(ScanError(shown, None, str(err)))
                continue
            findings.extend(FileScan(shown, source, tree).run())
    report.findings = sorted(findings, key=lambda f: (f.priority, f.path, f.line, f.column))
    return report
