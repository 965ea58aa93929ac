"""The engine's contract, checked on the source of every package: a job's record moves only
through its own locked methods, so no code outside ``fray/backend/`` assigns its fields;
no module is over 600 lines; fray-core imports no backend package."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from fray.backend import JobRecord

ROOT = Path(__file__).resolve().parents[3]
SOURCES = sorted((ROOT / "packages").glob("*/src/**/*.py"))
BACKEND_PACKAGES = ("fray_ray", "fray_iris", "fray_tpu", "fray_testing")


def _record_assignments(tree: ast.AST) -> list[tuple[int, str]]:
    """Assignments to a record's fields: ``<x>.<field> = ...`` (also augmented, annotated or
    in a tuple) where ``<x>`` names a job or a record (``job``, ``self._job``, ``record``)."""
    fields = set(JobRecord.__slots__)
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.AugAssign | ast.AnnAssign):
            targets = [node.target]
        else:
            continue
        flat = [e for t in targets for e in (t.elts if isinstance(t, ast.Tuple) else [t])]
        for target in flat:
            if not isinstance(target, ast.Attribute) or target.attr not in fields:
                continue
            base = ast.unparse(target.value).rsplit(".", 1)[-1].lower()
            if base.endswith(("job", "record")):
                found.append((node.lineno, ast.unparse(target)))
    return found


def test_no_code_outside_the_engine_assigns_a_records_fields() -> None:
    offenders = [
        f"{path.relative_to(ROOT)}:{line}: {target}"
        for path in SOURCES
        if "/fray/backend/" not in path.as_posix()
        for line, target in _record_assignments(ast.parse(path.read_text()))
    ]
    assert offenders == [], "use JobRecord's methods (observe, placed, report, end):\n" + "\n".join(
        offenders
    )


def test_the_check_finds_a_field_assigned_by_hand() -> None:
    code = "job.status = 1\nself._job.attempts += 1\nrec.exit_code, job.cause = 0, None\n"
    assert [t for _l, t in _record_assignments(ast.parse(code))] == [
        "job.status",
        "self._job.attempts",
        "job.cause",
    ]
    assert _record_assignments(ast.parse("job.data.replicas = 2\nself.status = 1\n")) == []


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_no_module_is_over_600_lines(path: Path) -> None:
    assert len(path.read_text().splitlines()) <= 600


def test_fray_core_imports_no_backend_package_even_for_types() -> None:
    imports = [
        f"{path.relative_to(ROOT)}: {name}"
        for path in SOURCES
        if "/fray-core/" in path.as_posix()
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Import | ast.ImportFrom)
        for name in (
            [node.module or ""]
            if isinstance(node, ast.ImportFrom)
            else [a.name for a in node.names]
        )
        if name.split(".")[0] in BACKEND_PACKAGES
    ]
    assert imports == []
