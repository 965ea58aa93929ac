"""How fray-iris is put together: Iris's private names only in one adapter per Iris line
(at most three each), and a short way from ``IrisClient.submit`` to Iris's own ``submit``.
(fray-core's ``tests/test_import_circles.py`` finds no import circle in fray-iris.)"""

from __future__ import annotations

import ast
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

import fray
import fray_iris
from fray import Entrypoint, JobRequest
from fray_testing.conformance import entrypoints as ep

SRC = Path(fray_iris.__file__).parent
CORE = Path(fray.__file__).parent
ROOT = SRC.parents[3]
ADAPTERS = {"_iris_0_2_20.py", "_iris_0_2_227.py"}
MAX_PRIVATE_NAMES = 3
STDLIB = {"os", "sys"}
CLUSTER_CLIENT = "_cluster" + "_client"  # spelt apart: this file is not an adapter


def _trees(folder: Path) -> Iterator[tuple[Path, ast.Module]]:
    for path in sorted(folder.rglob("*.py")):
        yield path, ast.parse(path.read_text(), str(path))


def _fray_names() -> set[str]:
    """Underscore names Fray itself defines (functions, methods, attributes, slots) in
    fray-core and fray-iris: reading one of these is reading Fray's own object."""
    names: set[str] = set()
    for folder in (CORE, SRC):
        for _path, tree in _trees(folder):
            for node in ast.walk(tree):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                    names.add(node.name)
                elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                    names.add(node.attr)
                elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                    names.add(node.id)
                elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                    names.add(node.value)  # __slots__ entries
    return {name for name in names if name.startswith("_")}


def _private_reads(tree: ast.Module, own: set[str]) -> set[str]:
    """Underscore attributes read in ``tree`` that Fray does not define: Iris's (the
    standard library's ``os._exit`` aside)."""
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr.startswith("_"):
            stdlib = isinstance(node.value, ast.Name) and node.value.id in STDLIB
            if not node.attr.startswith("__") and node.attr not in own and not stdlib:
                found.add(node.attr)
    return found


def test_irises_private_names_only_in_one_adapter_per_line() -> None:
    own = _fray_names()
    for path, tree in _trees(SRC):
        private = _private_reads(tree, own)
        if path.name in ADAPTERS:
            assert len(private) <= MAX_PRIVATE_NAMES, (path.name, private)
        else:
            assert not private, f"{path.name} reads Iris's private {sorted(private)}"


def test_the_private_test_sees_a_private_read() -> None:
    tree = ast.parse("def f(raw):\n    return raw._cluster_client.list_jobs()\n")
    assert _private_reads(tree, _fray_names()) == {CLUSTER_CLIENT}


def test_cluster_client_appears_only_in_the_adapters() -> None:
    here = Path(__file__).resolve()
    for folder in ("packages", "benchmarks", "examples", "tools"):
        for path in (ROOT / folder).rglob("*.py"):
            if path.name in ADAPTERS or path.resolve() == here or ".venv" in path.parts:
                continue
            assert CLUSTER_CLIENT not in path.read_text(), path


@pytest.mark.integration
def test_a_submit_passes_through_at_most_four_fray_iris_modules(iris_client: Any) -> None:
    """Records, with ``sys.setprofile``, every fray_iris module whose code runs between
    ``IrisClient.submit`` and the Iris client's ``submit``."""
    seen: list[str] = []
    reached: list[bool] = []

    def profile(frame: FrameType, event: str, arg: object) -> None:
        del arg
        if event != "call" or reached:
            return
        module = frame.f_globals.get("__name__", "")
        if module == "iris.client.client" and frame.f_code.co_name == "submit":
            reached.append(True)
        elif module.startswith("fray_iris") and module not in seen:
            seen.append(module)

    request = JobRequest(
        name=f"traced-{os.urandom(3).hex()}", entrypoint=Entrypoint.from_callable(ep.add, [1, 2])
    )
    sys.setprofile(profile)
    try:
        job = iris_client.submit(request)
    finally:
        sys.setprofile(None)
    assert reached, "the Iris client's submit was never called"
    print(f"fray_iris modules from IrisClient.submit to Iris's submit: {seen}")
    assert len(seen) <= 4, seen
    assert job.result(timeout=120) == 3
