"""Rebuilds ``predecessor_names.json`` and ``predecessor_reexports.json`` from unpacked wheels.

The predecessor (the ``marin-fray`` wheel) installs the import name ``fray`` too, so it is never
installed next to this project; its sources are read with :mod:`ast` instead. Usage::

    pip download --no-deps marin-fray==<version> -d /tmp/mf   # one directory per version
    unzip /tmp/mf/*.whl -d /tmp/mf/src
    python predecessor_inventory.py 0.2.20=/tmp/mf020/src 0.2.227=/tmp/mf227/src

What counts as a module's public name (see README.md in this folder):

* ``__all__`` when the module defines one (a literal list or tuple of strings);
* otherwise every module-level ``def``, ``class``, assignment target and name imported from
  another ``fray`` module, whose name does not start with ``_``. Names imported from the
  standard library or third-party packages (``logging``, ``Any``, ``IrisClientLib``) are
  incidental and left out.

A name is a re-export when the module binds it with ``from fray.<x> import ...``; the
second file maps it to the module it comes from.
"""

from __future__ import annotations

import ast
import json
import sys
from pathlib import Path

_HERE = Path(__file__).resolve().parent


def _module_name(src_root: Path, path: Path) -> str:
    parts = list(path.relative_to(src_root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _targets(node: ast.expr) -> list[str]:
    if isinstance(node, ast.Name):
        return [node.id]
    if isinstance(node, ast.Tuple | ast.List):
        return [name for elt in node.elts for name in _targets(elt)]
    return []


def _declared_all(tree: ast.Module) -> list[str] | None:
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets)
            and isinstance(node.value, ast.List | ast.Tuple)
        ):
            return [
                elt.value
                for elt in node.value.elts
                if isinstance(elt, ast.Constant) and isinstance(elt.value, str)
            ]
    return None


def inventory_module(tree: ast.Module, module: str) -> tuple[list[str], dict[str, str]]:
    """Public names of one parsed module, and its re-exports (name -> source module).

    Args:
        tree: The module's parsed source.
        module: Its dotted name.

    Returns:
        The sorted public names and a mapping of re-exported names to their fray module.
    """
    defined: set[str] = set()
    reexports: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            defined.add(node.name)
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                defined.update(_targets(target))
        elif isinstance(node, ast.AnnAssign | ast.AugAssign):
            defined.update(_targets(node.target))
        elif isinstance(node, ast.ImportFrom):
            # The predecessor imports absolutely; a relative import would be left out.
            source = node.module or ""
            if not node.level and (source == "fray" or source.startswith("fray.")):
                for alias in node.names:
                    reexports[alias.asname or alias.name] = source
    declared = _declared_all(tree)
    if declared is not None:
        names = set(declared)
    else:
        names = {n for n in defined | set(reexports) if not n.startswith("_")}
    return sorted(names), {n: reexports[n] for n in sorted(names) if n in reexports}


def inventory(src_root: Path) -> tuple[dict[str, list[str]], dict[str, dict[str, str]]]:
    """Every ``fray`` module under an unpacked wheel, with its public names and re-exports.

    Args:
        src_root: The directory the wheel was unzipped into (it holds ``fray/``).

    Returns:
        Names per module and re-exports per module, both keyed by dotted module name.
    """
    names: dict[str, list[str]] = {}
    reexports: dict[str, dict[str, str]] = {}
    for path in sorted((src_root / "fray").rglob("*.py")):
        module = _module_name(src_root, path)
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        names[module], found = inventory_module(tree, module)
        if found:
            reexports[module] = found
    return names, reexports


def main(argv: list[str]) -> None:
    """Writes both JSON files next to this script from ``VERSION=SRC_ROOT`` arguments."""
    all_names: dict[str, dict[str, list[str]]] = {}
    all_reexports: dict[str, dict[str, dict[str, str]]] = {}
    for arg in argv:
        version, _, root = arg.partition("=")
        all_names[version], all_reexports[version] = inventory(Path(root))
    for filename, data in (
        ("predecessor_names.json", all_names),
        ("predecessor_reexports.json", all_reexports),
    ):
        text = json.dumps(data, indent=2, sort_keys=True) + "\n"
        (_HERE / filename).write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main(sys.argv[1:])
