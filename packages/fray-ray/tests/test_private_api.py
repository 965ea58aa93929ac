"""Ray's (and CPython's) private names stay out of Fray's sources, except the few each
adapter module lists, each with a public fallback tested here against the pinned Ray.

An AST scan of fray-core, fray-ray and fray-tpu (``src/``) fails on: an import of
``ray._private``, ``ray._raylet``, ``ray.experimental`` or ``ray.autoscaler.v2`` (or a string
naming one); ``ctypes`` (fray-core's local process guard, ``fray/local/``, excepted);
``os.environ._data`` and the private Ray names Fray once read (``_function``,
``_default_options``, ``_actor_id``, ...); and, in fray-ray and fray-tpu (the packages that
hold Ray objects; fray-core never imports Ray), any underscore attribute, read on something
other than ``self``/``cls``, that no module of Fray defines (so it belongs to Ray, or to
another library), whether written ``x._name`` or ``getattr(x, "_name")``. The adapter modules
(``fray_ray/_adapter.py``, ``fray_tpu/ray/_adapter.py``) may use the names they list in
``PRIVATE_NAMES``: at most four in both together. No new ruff config is involved (the root
config switches ``banned-api`` off for these packages).
"""

from __future__ import annotations

import ast
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
SCANNED = {
    "fray-core": ROOT / "packages/fray-core/src",
    "fray-ray": ROOT / "packages/fray-ray/src",
    "fray-tpu": ROOT / "packages/fray-tpu/src",
}
OURS = [*SCANNED.values(), ROOT / "packages/fray-testing/src"]
ADAPTERS = {
    ROOT / "packages/fray-ray/src/fray_ray/_adapter.py",
    ROOT / "packages/fray-tpu/src/fray_tpu/ray/_adapter.py",
}
CTYPES_ALLOWED = ROOT / "packages/fray-core/src/fray/local"
BANNED_MODULES = ("ray._private", "ray._raylet", "ray.experimental", "ray.autoscaler.v2")
# Names that must never be read outside an adapter even if Fray defined one by the same name.
ALWAYS_BANNED = {"_data", "_function", "_default_options", "_actor_id", "_task_launch_hook"}


def _sources(roots: list[Path]) -> Iterator[Path]:
    for root in roots:
        yield from sorted(root.rglob("*.py"))


def _is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _defined_names() -> set[str]:
    """Every underscore name a module of Fray defines: functions, classes, module globals,
    attributes it assigns and ``__slots__`` entries."""
    names: set[str] = set()
    for path in _sources(OURS):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                names.add(node.name)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                names.add(node.attr)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
            elif isinstance(node, ast.arg):
                names.add(node.arg)
            elif (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and node.value.isidentifier()  # __slots__ entries, keyword names
            ):
                names.add(node.value)
    return {name for name in names if _is_private(name)} - ALWAYS_BANNED


def violations(path: Path, ours: set[str], *, holds_ray: bool = True) -> list[str]:
    """What ``path`` does that the rules above forbid, one line each (``holds_ray``: the
    rule on underscore attributes of others' objects applies)."""
    tree = ast.parse(path.read_text(), str(path))
    found: list[str] = []

    def note(node: ast.AST, what: str) -> None:
        found.append(f"{path.relative_to(ROOT)}:{getattr(node, 'lineno', 0)}: {what}")

    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            modules = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.module:
                modules.append(node.module)
                modules += [f"{node.module}.{a.name}" for a in node.names]
            for module in modules:
                if module.startswith(BANNED_MODULES):
                    note(node, f"imports {module}")
                if module == "ctypes" and CTYPES_ALLOWED not in path.parents:
                    note(node, "imports ctypes")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            if node.value.startswith(BANNED_MODULES):
                note(node, f"names {node.value}")
        elif isinstance(node, ast.Attribute) and _is_private(node.attr):
            receiver = node.value
            if isinstance(receiver, ast.Name) and receiver.id in ("self", "cls"):
                continue
            if node.attr in ALWAYS_BANNED or (holds_ray and node.attr not in ours):
                note(node, f"reads .{node.attr} of {ast.unparse(receiver)}")
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("getattr", "setattr", "hasattr")
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
            and _is_private(node.args[1].value)
            and (
                node.args[1].value in ALWAYS_BANNED
                or (holds_ray and node.args[1].value not in ours)
            )
        ):
            note(node, f"{node.func.id}(..., {node.args[1].value!r})")
    return found


def test_no_private_ray_name_outside_the_adapters() -> None:
    ours = _defined_names()
    problems = [
        line
        for package, root in SCANNED.items()
        for path in _sources([root])
        if path not in ADAPTERS
        for line in violations(path, ours, holds_ray=package != "fray-core")
    ]
    assert not problems, "\n".join(problems)


def test_the_scan_catches_what_it_must(tmp_path: Path) -> None:
    """The rules fire on each kind of private access (a scan that finds nothing proves
    nothing otherwise)."""
    bad = tmp_path / "bad.py"
    bad.write_text(
        "import ctypes\n"
        "import ray._private.state\n"
        "from ray.experimental.internal_kv import _internal_kv_get\n"
        "import os\n"
        "os.environ._data\n"
        "fn._function\n"
        "getattr(actor, '_actor_id')\n"
        "x = 'ray._raylet'\n"
        "self._mine\n"
    )
    original = ROOT
    try:
        globals()["ROOT"] = tmp_path
        lines = violations(bad, set())
    finally:
        globals()["ROOT"] = original
    text = "\n".join(lines)
    for expected in (
        "imports ctypes",
        "imports ray._private.state",
        "imports ray.experimental.internal_kv",
        "reads ._data of os.environ",
        "reads ._function of fn",
        "getattr(..., '_actor_id')",
        "names ray._raylet",
    ):
        assert expected in text
    assert "_mine" not in text


def _listed(path: Path) -> tuple[str, ...]:
    """An adapter's ``PRIVATE_NAMES``, read from its source (fray-ray's tests run without
    fray-tpu installed)."""
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and ast.unparse(node.targets[0]) == "PRIVATE_NAMES":
            return tuple(ast.literal_eval(node.value))
    raise AssertionError(f"{path} lists no PRIVATE_NAMES")


def test_at_most_four_private_names_in_the_adapters() -> None:
    listed = {path: _listed(path) for path in ADAPTERS}
    assert sum(len(names) for names in listed.values()) <= 4
    for path, names in listed.items():
        text = path.read_text()
        for name in names:  # each listed name is really used there
            assert name.rsplit(".", 1)[-1] in text


# -- each private name against the pinned Ray, and its public fallback -----------------------


@pytest.fixture(scope="module")
def local_ray(ray_cluster: str) -> str:
    return ray_cluster


def test_free_per_node_reads_every_live_node_and_falls_back(
    local_ray: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import ray

    from fray_ray import _adapter

    free = _adapter.free_per_node()
    alive = {node["NodeID"] for node in ray.nodes() if node["Alive"]}
    assert free is not None and set(free) == alive
    assert all("CPU" in resources for resources in free.values())

    import ray._private.state as state  # the test may name it: it pins the private path

    def moved() -> None:
        raise AttributeError("gone in this Ray")

    monkeypatch.setattr(state, "available_resources_per_node", moved)
    with caplog.at_level(logging.DEBUG, logger="fray.ray"):
        assert _adapter.free_per_node() is None
    assert "using the cluster's sum" in caplog.text
    from fray_ray._convert import Ask
    from fray_ray._placement import cluster_says

    # The public fallback: what the whole cluster has free (here as if 1.5 CPUs were).
    assert cluster_says(Ask({"CPU": 1.0})) is None
    monkeypatch.setattr(ray, "available_resources", lambda: {"CPU": 1.5})
    assert cluster_says(Ask({"CPU": 2.0})) == (
        "the 1 node(s) that could take it are busy (free in the cluster: CPU=1.5)"
    )
