"""The per-file pass: walks one parsed module and turns what it sees into findings.

It runs in two steps so that files can learn from each other: :meth:`FileScan.prepare` binds
the imports and finds the ``@ray.remote`` definitions (for the :class:`RemoteIndex` of all
files), then :meth:`FileScan.finish` does the rest with that index.
"""

from __future__ import annotations

import ast

from fray.migrate import _rules_fray as pred
from fray.migrate import _rules_ray as rules
from fray.migrate._report import Finding
from fray.migrate._scan_state import RemoteIndex
from fray.migrate._visit_fray import PredecessorChecks, is_fray
from fray.migrate._visit_ray import RayChecks

__all__ = ["FileScan", "RemoteIndex"]


def _is_ray(qual: str) -> bool:
    return qual == "ray" or qual.startswith("ray.")


def _bound(module: str) -> bool:
    """Whether names from ``module`` are tracked: Ray, Fray and TPU helper modules."""
    return _is_ray(module) or is_fray(module) or module.rsplit(".", 1)[-1] == "ray_tpu"


class FileScan(RayChecks, PredecessorChecks):
    """Findings of one file."""

    def prepare(self, index: RemoteIndex, stem: str) -> None:
        """Binds imports, finds ``@ray.remote`` definitions and adds the module-level ones
        to ``index`` under ``stem``, the last part of this file's module name."""
        self.collect_imports()
        self.collect_remote_defs()
        for node in self.tree.body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                known = self.remote_options.get(node.name)
                if known is None:
                    continue
                table = index.classes if node.name in self.remote_classes else index.functions
                table[(stem, node.name)] = known

    def finish(self, index: RemoteIndex) -> list[Finding]:
        """Every other pass; the findings sorted by line, column and pattern."""
        self.apply_index(index)
        self.collect_tracked()
        self.check_imports_used()
        for node in self.nodes:
            if isinstance(node, ast.Call):
                self.visit_call(node)
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                self.visit_string(node)
        for node in self.nodes:
            if isinstance(node, ast.Attribute | ast.Name) and node not in self.handled:
                self.visit_reference(node)
        self.check_actor_classes()
        return sorted(self.findings.values(), key=lambda f: (f.line, f.column, f.pattern))

    def collect_imports(self) -> None:
        """Binds local names to the Ray, Fray and TPU-helper names they import."""
        for node in self.nodes:
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if not _bound(alias.name):
                        continue
                    local = alias.asname or alias.name.split(".")[0]
                    self.bindings[local] = alias.name if alias.asname else local
                    self.import_nodes[local] = node
                    if is_fray(alias.name):
                        self.report_fray_import(node, alias.name, None)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names: list[tuple[str, str | None]] = []
                for alias in node.names:
                    full = f"{node.module}.{alias.name}"
                    if alias.name == "*" or not (
                        _bound(node.module) or _bound(full) or alias.name in pred.RUNNERS
                    ):
                        continue
                    local = alias.asname or alias.name
                    self.bindings[local] = full
                    self.import_nodes[local] = node
                    names.append((alias.name, alias.asname))
                if names and is_fray(node.module):
                    self.report_fray_import(node, node.module, names)

    def apply_index(self, index: RemoteIndex) -> None:
        """Names imported from other scanned files that are ``@ray.remote`` there."""
        for node in self.nodes:
            if not isinstance(node, ast.ImportFrom) or not node.module:
                continue
            stem = node.module.rsplit(".", 1)[-1]
            for alias in node.names:
                local, key = alias.asname or alias.name, (stem, alias.name)
                if key in index.functions:
                    self.remote_functions.add(local)
                    self.remote_options.setdefault(local, index.functions[key])
                elif key in index.classes:
                    self.remote_classes.add(local)
                    self.remote_options.setdefault(local, index.classes[key])

    def visit_call(self, call: ast.Call) -> None:
        """One call, by what it calls."""
        func = call.func
        qual = self.qual(func)
        if qual is not None:
            self.mark_chain(func)
            if call in self.decorators:
                return
            if _is_ray(qual):
                self.visit_ray_call(call, qual)
            else:
                self.visit_fray_call(call, qual)
            return
        if isinstance(func, ast.Attribute) and (
            self.visit_dunder_call(call, func)
            or self.visit_remote_call(call, func)
            or self.visit_tracked_method(call, func)
        ):
            return
        if isinstance(func, ast.Name) and func.id == "Entrypoint":
            self.check_old_entrypoint(call)

    def visit_string(self, node: ast.Constant) -> None:
        """Environment variable names in strings."""
        if node.value == "RAY_ADDRESS":
            self.add(node, rules.RAY_ADDRESS)
        elif node.value == "FRAY_CLUSTER_SPEC":
            self.add(node, pred.CLUSTER_SPEC)

    def visit_reference(self, node: ast.Attribute | ast.Name) -> None:
        """A Ray name used without being called (``except RayActorError``, ``ray.data``)."""
        if isinstance(self.parents.get(node), ast.Attribute):
            return  # report the longest chain only
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            return
        qual = self.qual(node)
        if qual is not None and _is_ray(qual):
            self.visit_ray_reference(node, qual)
