"""A static scan (Python ``ast``, nothing is imported or run) for Ray and predecessor-API use."""

from __future__ import annotations

import ast
import os
from collections.abc import Iterator, Sequence

from fray.migrate._report import Finding, ScanError, ScanReport
from fray.migrate._visitor import FileScan, RemoteIndex

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


def _module_stem(path: str) -> str:
    """The last part of the module name a file is imported as (a package for __init__.py)."""
    folder, name = os.path.split(os.path.abspath(path))
    return os.path.basename(folder) if name == "__init__.py" else name[: -len(".py")]


def _parse(path: str, shown: str) -> tuple[str, ast.Module] | ScanError:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            source = f.read()
        return source, ast.parse(source, filename=path)
    except SyntaxError as err:
        where = f" (column {err.offset})" if err.offset else ""
        return ScanError(shown, err.lineno, f"syntax error: {err.msg}{where}")
    except (OSError, ValueError) as err:
        return ScanError(shown, None, f"{type(err).__name__}: {err}")


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

    A ``@ray.remote`` function or class defined in one scanned file is known as such in
    the files that import it by name.

    Returns:
        A :class:`ScanReport`; files that cannot be read or parsed are listed in ``errors``
        (with the line and the reason).

    Raises:
        FileNotFoundError: A path does not exist.
    """
    roots = [paths] if isinstance(paths, str) else list(paths)
    for root in roots:
        if not os.path.exists(root):
            raise FileNotFoundError(root)
    report = ScanReport(paths=roots)
    files: list[FileScan] = []
    index = RemoteIndex()
    for root in roots:
        for path in _python_files(root):
            shown = _display(path, root)
            report.files_scanned += 1
            parsed = _parse(path, shown)
            if isinstance(parsed, ScanError):
                report.errors.append(parsed)
                continue
            file = FileScan(shown, *parsed)
            file.prepare(index, _module_stem(path))
            files.append(file)
    findings: list[Finding] = [f for file in files for f in file.finish(index)]
    report.findings = sorted(findings, key=lambda f: (f.priority, f.path, f.line, f.column))
    return report
