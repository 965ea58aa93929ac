"""The per-file pass: walks one parsed module and turns what it sees into findings."""

from __future__ import annotations

import ast

from fray.migrate import _rules_fray as pred
from fray.migrate import _rules_ray as rules
from fray.migrate._report import Finding
from fray.migrate._strategies import BY_KEY, Rule

__all__ = ["FileScan"]


def _constant_str(node: ast.AST | None) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return None


class FileScan:
    """Findings of one file. ``run()`` does every pass and returns them sorted by position."""

    def __init__(self, path: str, source: str, tree: ast.Module) -> None:
        self.path = path
        self.lines = source.splitlines()
        self.tree = tree
        self.findings: dict[tuple[int, int, str], Finding] = {}
        self.bindings: dict[str, str] = {}  # local name -> qualified name (ray..., fray.v2...)
        self.import_nodes: dict[str, ast.stmt] = {}
        self.parents: dict[ast.AST, ast.AST] = {}
        self.remote_functions: set[str] = set()
        self.remote_classes: set[str] = set()
        self.cluster_vars: set[str] = set()
        self.handled: set[ast.AST] = set()  # attribute chains already reported
        self.decorators: set[ast.AST] = set()  # @ray.remote(...) calls, reported with their def

    # -- helpers ---------------------------------------------------------------------------

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

    @staticmethod
    def _interesting(module: str) -> bool:
        return module == "ray" or module.startswith(("ray.", *pred.MODULES))

    # -- passes ----------------------------------------------------------------------------

    def run(self) -> list[Finding]:
        """Every pass over the file; the findings sorted by line, column and pattern."""
        for parent in ast.walk(self.tree):
            for child in ast.iter_child_nodes(parent):
                self.parents[child] = parent
        self.collect_imports()
        self.collect_remote_defs()
        self.check_imports_used()
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Call):
                self.visit_call(node)
            elif isinstance(node, ast.Assign):
                self.visit_assign(node)
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                self.visit_string(node)
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Attribute | ast.Name) and node not in self.handled:
                self.visit_reference(node)
        return sorted(self.findings.values(), key=lambda f: (f.line, f.column, f.pattern))

    def collect_imports(self) -> None:
        """Binds local names to the Ray and predecessor names they import."""
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if not self._interesting(alias.name):
                        continue
                    if alias.asname:
                        self.bindings[alias.asname] = alias.name
                        self.import_nodes[alias.asname] = node
                    else:
                        root = alias.name.split(".")[0]
                        self.bindings[root] = root
                        self.import_nodes[root] = node
                    self.report_predecessor_import(node, alias.name)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                if not self._interesting(node.module):
                    continue
                for alias in node.names:
                    local = alias.asname or alias.name
                    if alias.name == "*":
                        continue
                    self.bindings[local] = f"{node.module}.{alias.name}"
                    self.import_nodes[local] = node
                self.report_predecessor_import(node, node.module)

    def report_predecessor_import(self, node: ast.stmt, module: str) -> None:
        """An import of a predecessor module."""
        if not module.startswith(pred.MODULES):
            return
        if module.startswith("fray.v2"):
            advice = pred.V2_IMPORT
        elif module.startswith("fray.cluster.ray.tpu") or "tpu" in module:
            advice = pred.TPU_IMPORT
        else:
            advice = pred.OTHER_IMPORT
        self.add(node, pred.IMPORT, module=module, advice=advice)

    def collect_remote_defs(self) -> None:
        """``@ray.remote`` functions and classes: reported, and remembered for their calls."""
        for node in ast.walk(self.tree):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                continue
            for deco in node.decorator_list:
                target = deco.func if isinstance(deco, ast.Call) else deco
                if self.qual(target) != "ray.remote":
                    continue
                self.handled.add(target)
                self.decorators.add(deco)
                if isinstance(node, ast.ClassDef):
                    self.remote_classes.add(node.name)
                    self.add(deco, rules.REMOTE_ACTOR, name=node.name)
                else:
                    self.remote_functions.add(node.name)
                    self.add(deco, rules.REMOTE_TASK, name=node.name)
                if isinstance(deco, ast.Call):
                    self.visit_options(deco, actor=isinstance(node, ast.ClassDef))

    def check_imports_used(self) -> None:
        """Ray imports nothing uses, or that only set Ray up."""
        uses: dict[str, list[ast.Name]] = {name: [] for name in self.bindings}
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id in uses:
                uses[node.id].append(node)
        for name, found in uses.items():
            qual = self.bindings[name]
            if not (qual == "ray" or qual.startswith("ray.")):
                continue
            node = self.import_nodes[name]
            if not found:
                self.add(node, rules.UNUSED_IMPORT, name=name, qual=qual)
            elif all(self._setup_use(use) for use in found):
                self.add(node, rules.SETUP_ONLY, name=name)

    def _setup_use(self, use: ast.Name) -> bool:
        parent = self.parents.get(use)
        if isinstance(parent, ast.Attribute):
            return self.qual(parent) in rules.SETUP
        return self.bindings.get(use.id) in rules.SETUP

    # -- calls -----------------------------------------------------------------------------

    def visit_call(self, call: ast.Call) -> None:
        """One call: by qualified name, or a ``.remote()`` / ``.options()`` / Cluster method."""
        func = call.func
        qual = self.qual(func)
        if qual is not None:
            self.visit_qualified_call(call, qual)
            return
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
            owner = func.value.id
            if func.attr == "remote" and owner in self.remote_functions:
                self.add(call, rules.TASK_CALL, name=owner)
            elif func.attr == "remote" and owner in self.remote_classes:
                self.add(call, rules.ACTOR_CREATE, name=owner)
            elif func.attr == "options" and owner in self.remote_functions | self.remote_classes:
                self.visit_options(call, actor=owner in self.remote_classes)
            elif owner in self.cluster_vars and func.attr in pred.CLUSTER_METHODS:
                advice = pred.CLUSTER_METHODS[func.attr]
                self.add(call, pred.CLUSTER_METHOD, owner=owner, method=func.attr, advice=advice)
        if isinstance(func, ast.Name) and func.id == "Entrypoint":
            self.check_old_entrypoint(call)

    def check_old_entrypoint(self, call: ast.Call) -> None:
        """``Entrypoint(binary=..., ...)``: the predecessor's constructor keywords."""
        keywords = {k.arg for k in call.keywords}
        if keywords & {"binary", "function_args"}:
            self.add(call, pred.OLD_ENTRYPOINT)

    def visit_qualified_call(self, call: ast.Call, qual: str) -> None:
        """A call of a known Ray or predecessor name."""
        self.mark_chain(call.func)
        if call in self.decorators:
            return
        if qual.startswith(pred.MODULES):
            leaf = qual.rsplit(".", 1)[-1]
            if leaf == "Entrypoint":
                self.check_old_entrypoint(call)
            elif leaf in pred.CALLS:
                self.add(call, pred.CALLS[leaf], found=f"{qual}()")
            return
        if qual == "ray.remote":
            # ray.remote(fn) or ray.remote(num_gpus=1)(fn) used as a call, not a decorator.
            self.add(call, rules.REMOTE_CALL)
            self.visit_options(call, actor=False)
            return
        if qual in rules.CALLS:
            self.add(call, rules.CALLS[qual], found=f"{qual}()")
            if qual == "ray.init":
                for keyword in call.keywords:
                    if keyword.arg == "runtime_env":
                        self.visit_runtime_env(keyword)
            if qual.endswith("placement_group"):
                self.visit_bundles(call)
            return
        for prefix, rule in rules.PREFIXES:
            if qual.startswith(prefix):
                self.add(call, rule, found=f"{qual}()")
                return
        if qual.split(".")[0] == "ray":
            self.add(call, rules.GENERIC, found=f"{qual}()")

    def visit_options(self, call: ast.Call, *, actor: bool) -> None:
        """The keyword options of ``@ray.remote(...)`` or ``.options(...)``."""
        keywords = {k.arg: k for k in call.keywords if k.arg}
        if "name" in keywords and actor:
            exists = keywords.get("get_if_exists")
            get_if_exists = isinstance(exists, ast.keyword) and (
                isinstance(exists.value, ast.Constant) and exists.value.value is True
            )
            extra = " with get_if_exists=True" if get_if_exists else ""
            self.add(keywords["name"], rules.NAMED_ACTOR, extra=extra)
        for arg, keyword in keywords.items():
            if arg == "resources":
                self.visit_resources(keyword)
            elif arg == "runtime_env":
                self.visit_runtime_env(keyword)
            elif arg in rules.OPTIONS:
                value = ast.unparse(keyword.value)
                self.add(keyword, rules.OPTIONS[arg], found=f"{arg}={value}", value=value)

    def visit_resources(self, keyword: ast.keyword) -> None:
        """``resources={...}``: head node, TPU and custom resources."""
        value = keyword.value
        keys: list[str] = []
        if isinstance(value, ast.Dict):
            keys = [k for k in (_constant_str(key) for key in value.keys) if k is not None]
        tpu_head = [k for k in keys if k.startswith("TPU-") and k.endswith("-head")]
        if "head_node" in keys:
            self.add(keyword, rules.HEAD_NODE)
        if tpu_head or "TPU" in keys:
            tpu_type = tpu_head[0][len("TPU-") : -len("-head")] if tpu_head else "TYPE"
            shown = ", ".join(repr(k) for k in keys if k.startswith("TPU"))
            self.add(keyword, rules.TPU_RESOURCES, tpu_type=tpu_type, keys=shown)
        others = [k for k in keys if k != "head_node" and not k.startswith("TPU")]
        if others or not keys:
            shown = ", ".join(repr(k) for k in others) if others else ast.unparse(value)
            self.add(keyword, rules.CUSTOM_RESOURCES, keys=shown)

    def visit_runtime_env(self, keyword: ast.keyword) -> None:
        """``runtime_env={...}``: each key and its EnvironmentConfig field."""
        value = keyword.value
        parts: list[str] = []
        if isinstance(value, ast.Dict):
            for key in value.keys:
                name = _constant_str(key)
                if name is not None:
                    parts.append(rules.RUNTIME_ENV_KEYS.get(name, f"{name}: no equivalent"))
        shown = ": " + "; ".join(dict.fromkeys(parts)) if parts else ""
        self.add(keyword, rules.RUNTIME_ENV, value=ast.unparse(value)[:60], parts=shown)

    def visit_bundles(self, call: ast.Call) -> None:
        """A placement group whose bundles ask for TPUs."""
        if "TPU" in ast.unparse(call):
            self.add(call, rules.TPU_BUNDLES)

    def visit_assign(self, node: ast.Assign) -> None:
        """Remembers variables holding a predecessor Cluster."""
        value = node.value
        if not isinstance(value, ast.Call):
            return
        qual = self.qual(value.func) or ""
        leaf = qual.rsplit(".", 1)[-1]
        if qual.startswith(pred.MODULES) and leaf in pred.CLUSTER_MAKERS:
            for target in node.targets:
                if isinstance(target, ast.Name):
                    self.cluster_vars.add(target.id)

    def visit_string(self, node: ast.Constant) -> None:
        """Environment variable names in strings."""
        if node.value == "RAY_ADDRESS":
            self.add(node, rules.RAY_ADDRESS)
        elif node.value == "FRAY_CLUSTER_SPEC":
            self.add(node, pred.CLUSTER_SPEC)

    # -- plain references (exceptions, attributes passed around) ---------------------------

    def mark_chain(self, node: ast.AST) -> None:
        """Marks an attribute chain as reported, so that its parts are not reported again."""
        while isinstance(node, ast.Attribute):
            self.handled.add(node)
            node = node.value
        self.handled.add(node)

    def visit_reference(self, node: ast.Attribute | ast.Name) -> None:
        """A Ray name used without being called (``except RayActorError``, ``ray.data``)."""
        parent = self.parents.get(node)
        if isinstance(parent, ast.Attribute):
            return  # report the longest chain only
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            return
        qual = self.qual(node)
        if qual is None or qual in ("ray",) or qual.startswith(pred.MODULES):
            return
        if qual == "ray.remote" or qual in rules.SETUP:
            return
        self.mark_chain(node)
        if qual in rules.CALLS:
            self.add(node, rules.CALLS[qual], found=qual)
            return
        for prefix, rule in rules.PREFIXES:
            if qual.startswith(prefix) or qual == prefix[:-1]:
                self.add(node, rule, found=qual)
                return
        self.add(node, rules.GENERIC, found=qual)
