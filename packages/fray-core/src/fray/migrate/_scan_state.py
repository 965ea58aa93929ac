"""What the per-file pass knows about one module while it walks it, and how it records a
finding. The Ray and predecessor checks build on it."""

from __future__ import annotations

import ast
import dataclasses

from fray.migrate._report import Finding
from fray.migrate._strategies import BY_KEY, Rule

__all__ = ["RemoteIndex", "ScanState"]


Options = dict[str, ast.expr]


@dataclasses.dataclass
class RemoteIndex:
    """``@ray.remote`` functions and classes defined at the top of the scanned files, keyed
    by ``(module file stem, name)`` with their decorator options, so that a file importing
    one knows what it is."""

    functions: dict[tuple[str, str], Options] = dataclasses.field(
        default_factory=dict[tuple[str, str], Options]
    )
    classes: dict[tuple[str, str], Options] = dataclasses.field(
        default_factory=dict[tuple[str, str], Options]
    )


class ScanState:
    """The bindings, remembered definitions and findings of one file."""

    def __init__(self, path: str, source: str, tree: ast.Module) -> None:
        self.path = path
        self.lines = source.splitlines()
        self.tree = tree
        self.findings: dict[tuple[int, int, str], Finding] = {}
        self.bindings: dict[str, str] = {}  # local name -> qualified name (ray..., fray...)
        self.import_nodes: dict[str, ast.stmt] = {}
        self.parents: dict[ast.AST, ast.AST] = {}
        self.remote_functions: set[str] = set()
        self.remote_classes: set[str] = set()
        self.remote_options: dict[str, Options] = {}  # decorator options by name
        self.local_defs: dict[str, str] = {}  # classes ("actor") and functions ("task") here
        self.handled: set[ast.AST] = set()  # attribute chains already reported
        self.decorators: set[ast.AST] = set()  # @ray.remote(...) calls, reported with their def
        self.tracked: dict[str, str] = {}  # predecessor Cluster/job context variables -> kind
        self.launched: dict[str, bool] = {}  # job-id variables from Cluster.launch -> a list?
        self.actor_handles: dict[str, str] = {}  # actor handle variables -> their class
        self.actor_classes: set[str] = set()  # classes used as actors in this file
        self.nodes: list[ast.AST] = list(ast.walk(tree))  # every node, walked once
        for parent in self.nodes:
            for child in ast.iter_child_nodes(parent):
                self.parents[child] = parent

    def add(self, node: ast.AST, rule: Rule, found: str | None = None, **fields: str) -> None:
        """Records a finding of ``rule`` at ``node``; the first one per position and pattern."""
        line = getattr(node, "lineno", 1)
        col = getattr(node, "col_offset", 0)
        key = (line, col, rule.pattern)
        if key in self.findings:
            return
        text = self.lines[line - 1].strip() if 0 < line <= len(self.lines) else ""
        if len(text) > 120:
            text = text[:117] + "..."
        found_text, advice = rule.render(fields)
        self.findings[key] = Finding(
            path=self.path,
            line=line,
            column=col,
            pattern=rule.pattern,
            found=found_text if found is None else found,
            replacement=advice,
            strategy=rule.strategy,
            priority=BY_KEY[rule.strategy].priority,
            snippet=text,
        )

    def qual(self, node: ast.AST) -> str | None:
        """The qualified name an expression refers to (``ray.util.ActorPool``), if known."""
        if isinstance(node, ast.Name):
            return self.bindings.get(node.id)
        if isinstance(node, ast.Attribute):
            base = self.qual(node.value)
            return f"{base}.{node.attr}" if base else None
        return None

    @property
    def uses_ray(self) -> bool:
        """Whether the file imports Ray."""
        return any(q == "ray" or q.startswith("ray.") for q in self.bindings.values())

    def in_loop(self, node: ast.AST) -> bool:
        """Whether ``node`` runs once per item: inside a comprehension or a loop body."""
        parent = self.parents.get(node)
        while parent is not None and not isinstance(parent, ast.FunctionDef | ast.ClassDef):
            if isinstance(parent, ast.comprehension | ast.For | ast.While):
                return True
            if isinstance(parent, ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp):
                return True
            parent = self.parents.get(parent)
        return False

    def mark_chain(self, node: ast.AST) -> None:
        """Marks an attribute chain as reported, so that its parts are not reported again."""
        while isinstance(node, ast.Attribute):
            self.handled.add(node)
            node = node.value
        self.handled.add(node)

    def assigned_to(self, node: ast.AST) -> str | None:
        """The single target ``node`` is assigned to, as written (``job_id``, ``self.c``)."""
        parent = self.parents.get(node)
        if isinstance(parent, ast.Assign) and len(parent.targets) == 1:
            target = parent.targets[0]
            if isinstance(target, ast.Name | ast.Attribute):
                return ast.unparse(target)
        return None
