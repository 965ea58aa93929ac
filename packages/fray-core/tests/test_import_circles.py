"""No import circle in any package: every import counts, function-local ones too, except
those under ``if TYPE_CHECKING:`` (they never run)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGES = Path(__file__).resolve().parents[2]
SOURCES = {
    "fray-core": "fray",
    "fray-testing": "fray_testing",
    "fray-tpu": "fray_tpu",
    "fray-ray": "fray_ray",
    "fray-iris": "fray_iris",
}


def _modules(src: Path) -> dict[str, Path]:
    found: dict[str, Path] = {}
    for path in src.rglob("*.py"):
        parts = list(path.relative_to(src).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _imports(tree: ast.AST, module: str, known: dict[str, Path]) -> set[str]:
    """The modules of ``known`` that ``tree`` imports outside ``if TYPE_CHECKING:``."""
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the package the module is in
                package = module.split(".")
                is_package = known[module].name == "__init__.py"
                package = package[: len(package) - node.level + (1 if is_package else 0)]
                base = ".".join([*package, base] if base else package)
            # ``from pkg import sub`` imports the module pkg.sub; any other name, pkg itself.
            for alias in node.names:
                name = f"{base}.{alias.name}"
                found.add(name if name in known else base)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return {name for name in found if name in known and name != module}


def circles(src: Path) -> list[list[str]]:
    """The import circles among the modules under ``src``, each as a path back to its start."""
    known = _modules(src)
    graph = {m: _imports(ast.parse(p.read_text(), str(p)), m, known) for m, p in known.items()}
    found: list[list[str]] = []
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def walk(module: str) -> None:
        state[module] = 1
        path.append(module)
        for target in sorted(graph[module]):
            if state.get(target) == 1:
                found.append([*path[path.index(target) :], target])
            elif target not in state:
                walk(target)
        path.pop()
        state[module] = 2

    for module in sorted(graph):
        if module not in state:
            walk(module)
    return found


@pytest.mark.parametrize("package", sorted(SOURCES))
def test_no_import_circle(package: str) -> None:
    src = PACKAGES / package / "src"
    assert circles(src) == []


def test_the_check_finds_a_circle_through_a_function_local_import(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from pkg import b\n")
    (package / "b.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg import a\n"
        "def f():\n    from pkg.a import x\n"
    )
    assert circles(tmp_path) == [["pkg.a", "pkg.b", "pkg.a"]]
    (package / "b.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import pkg.a\n"
    )
    assert circles(tmp_path) == []
