"""Rebuilds the predecessor's facts (the JSON files next to this script) from unpacked wheels.

The predecessor (the ``marin-fray`` wheel) installs the import name ``fray`` too, so it is never
installed next to this project; its sources are read with :mod:`ast` instead. Usage::

    pip download --no-deps marin-fray==<version> -d /tmp/mf   # one directory per version
    unzip /tmp/mf/*.whl -d /tmp/mf/src
    python predecessor_inventory.py 0.2.20=/tmp/mf020/src 0.2.227=/tmp/mf227/src \
        api=0.2.227 users=/tmp/mc227/src

What counts as a module's public name (see README.md in this folder):

* ``__all__`` when the module defines one (a literal list or tuple of strings);
* otherwise every module-level ``def``, ``class``, assignment target and name imported from
  another ``fray`` module, whose name does not start with ``_``. Names imported from the
  standard library or third-party packages (``logging``, ``Any``, ``IrisClientLib``) are
  incidental and left out.

A name is a re-export when the module binds it with ``from fray.<x> import ...``; the
second file maps it to the module it comes from.

``api=VERSION`` also writes ``predecessor_api.json``: that release's signatures (see
:func:`api_of`). ``users=DIR`` (the marin-core, marin-zephyr, marin-levanter and marin-iris
wheels unzipped into one folder) writes ``marin_fray_imports.json``: every name those wheels
import from a ``fray`` module, with the first place it is imported.
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


_KINDS = {
    "posonlyargs": "positional_only",
    "args": "positional_or_keyword",
    "kwonlyargs": "keyword_only",
}


def _default(node: ast.expr) -> dict[str, object]:
    """A default as a fact: ``{"value": ...}`` for a literal (``field(default_factory=list)``
    counts as ``[]``), else ``{"expr": source}`` (``ActorConfig()``, ``SecretBehavior.INHERIT``)."""
    if isinstance(node, ast.Call) and ast.unparse(node.func) == "field":
        for keyword in node.keywords:
            if keyword.arg == "default":
                return _default(keyword.value)
            if keyword.arg == "default_factory":
                factory = ast.unparse(keyword.value)
                literal = {"list": [], "tuple": [], "dict": {}}.get(factory)
                return {"expr": f"{factory}()"} if literal is None else {"value": literal}
    try:
        return {"value": ast.literal_eval(node)}
    except ValueError:
        return {"expr": ast.unparse(node)}


def _params(args: ast.arguments, *, bound: bool) -> list[dict[str, object]]:
    """Parameters in order with kind and default (``self``/``cls`` dropped when ``bound``)."""
    out: list[dict[str, object]] = []
    for attr, kind in _KINDS.items():
        out.extend({"name": a.arg, "kind": kind} for a in getattr(args, attr))
        if attr == "args" and args.vararg is not None:
            out.append({"name": args.vararg.arg, "kind": "var_positional"})
    if args.kwarg is not None:
        out.append({"name": args.kwarg.arg, "kind": "var_keyword"})
    positional = [p for p in out if p["kind"] in ("positional_only", "positional_or_keyword")]
    tail = positional[len(positional) - len(args.defaults) :]
    for param, node in zip(tail, args.defaults, strict=True):
        param["default"] = _default(node)
    keyword_only = [p for p in out if p["kind"] == "keyword_only"]
    for param, node in zip(keyword_only, args.kw_defaults, strict=True):
        if node is not None:
            param["default"] = _default(node)
    return out[1:] if bound else out


def _class_fact(node: ast.ClassDef) -> dict[str, object]:
    decorators = {ast.unparse(d) for d in node.decorator_list}
    bases = [ast.unparse(b) for b in node.bases]
    fact: dict[str, object] = {"kind": "class", "bases": bases}
    if any(d.startswith("dataclass") for d in decorators):
        fact["dataclass"] = True
        fact["frozen"] = "dataclass(frozen=True)" in decorators
        fields: list[dict[str, object]] = []
        for item in node.body:
            if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                field: dict[str, object] = {"name": item.target.id}
                if item.value is not None:
                    field["default"] = _default(item.value)
                    if "repr=False" in ast.unparse(item.value):
                        field["repr"] = False
                fields.append(field)
        fact["fields"] = [f for f in fields if not str(f["name"]).startswith("_")]
    if any(b.endswith("Enum") for b in bases):
        fact["members"] = {
            t.id: item.value.value
            for item in node.body
            if isinstance(item, ast.Assign) and isinstance(item.value, ast.Constant)
            for t in item.targets
            if isinstance(t, ast.Name)
        }
    methods: dict[str, object] = {}
    for item in node.body:
        if not isinstance(item, ast.FunctionDef) or (
            item.name.startswith("_") and item.name not in ("__init__", "__call__")
        ):
            continue
        kinds = {ast.unparse(d) for d in item.decorator_list}
        if "property" in kinds:
            methods[item.name] = {"property": True}
        else:
            static = "staticmethod" in kinds
            methods[item.name] = {"static": static, "params": _params(item.args, bound=not static)}
    fact["methods"] = methods
    return fact


def api_of(src_root: Path) -> dict[str, dict[str, dict[str, object]]]:
    """The public functions, classes and constants each ``fray`` module defines itself (not
    its re-exports): parameters with kind and default, dataclass fields, enum members,
    methods, and the value of each literal constant.

    Args:
        src_root: The directory the wheel was unzipped into.

    Returns:
        Facts per module and name.
    """
    api: dict[str, dict[str, dict[str, object]]] = {}
    for path in sorted((src_root / "fray").rglob("*.py")):
        module = _module_name(src_root, path)
        tree = ast.parse(path.read_text(encoding="utf-8"))
        public, reexports = inventory_module(tree, module)
        facts: dict[str, dict[str, object]] = {}
        for node in tree.body:
            if isinstance(node, ast.ClassDef):
                facts[node.name] = _class_fact(node)
            elif isinstance(node, ast.FunctionDef):
                facts[node.name] = {"kind": "function", "params": _params(node.args, bound=False)}
            elif isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                value = node.value
                fact = (
                    {"kind": "value", **_default(value)}
                    if isinstance(value, ast.Constant)
                    else {"kind": "value"}
                )
                facts.update((name, fact) for t in targets for name in _targets(t))
        wanted = set(public) - set(reexports)
        api[module] = {name: facts[name] for name in sorted(wanted) if name in facts}
    return api


def imports_of(src_root: Path) -> dict[str, dict[str, str]]:
    """Every ``from fray... import NAME`` (and ``import fray...``, as the name ``""``) in the
    Python files under ``src_root``: module -> name -> where it is first imported."""
    found: dict[str, dict[str, str]] = {}
    for path in sorted(src_root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        where = path.relative_to(src_root).as_posix()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and not node.level:
                pairs = [(node.module or "", a.name) for a in node.names]
            elif isinstance(node, ast.Import):
                pairs = [(a.name, "") for a in node.names]
            else:
                continue
            for module, name in pairs:
                if module == "fray" or module.startswith("fray."):
                    found.setdefault(module, {}).setdefault(name, f"{where}:{node.lineno}")
    return {module: dict(sorted(names.items())) for module, names in sorted(found.items())}


def _write(filename: str, data: object) -> None:
    text = json.dumps(data, indent=2, sort_keys=True) + "\n"
    (_HERE / filename).write_text(text, encoding="utf-8")


def main(argv: list[str]) -> None:
    """Writes the JSON files next to this script from ``VERSION=SRC_ROOT``, ``api=VERSION``
    and ``users=DIR`` arguments."""
    roots: dict[str, Path] = {}
    all_names: dict[str, dict[str, list[str]]] = {}
    all_reexports: dict[str, dict[str, dict[str, str]]] = {}
    for arg in argv:
        key, _, value = arg.partition("=")
        if key == "api":
            _write("predecessor_api.json", api_of(roots[value]))
        elif key == "users":
            _write("marin_fray_imports.json", imports_of(Path(value)))
        else:
            roots[key] = Path(value)
            all_names[key], all_reexports[key] = inventory(roots[key])
    _write("predecessor_names.json", all_names)
    _write("predecessor_reexports.json", all_reexports)


if __name__ == "__main__":
    main(sys.argv[1:])
