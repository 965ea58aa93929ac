"""The predecessor checks of the per-file pass: its old imports and module paths, the
``Cluster`` and job-context calls, the TPU runners, and actors called through ``__call__``."""

from __future__ import annotations

import ast

import fray
from fray.migrate import _derive as derive
from fray.migrate import _rules_fray as pred
from fray.migrate import _rules_ray as rules
from fray.migrate._scan_state import ScanState
from fray.migrate._strategies import Rule, fill

__all__ = ["PredecessorChecks", "is_fray"]

_RENAMES = ", ".join(
    f"{old} -> {new}"
    for old, new in (
        ("Cluster", "Client"),
        ("current_cluster", "current_client"),
        ("create_cluster", "client_from_spec"),
        ("LocalCluster", "LocalClient"),
        ("set_current_cluster", "set_current_client"),
    )
)
# Fray's own top-level names (JobInfo, Client, ...): never reported as the old API.
_FRAY_NAMES = frozenset(fray.__all__)
_MANY = ast.List | ast.Tuple | ast.Set | ast.ListComp | ast.GeneratorExp | ast.SetComp


def is_fray(module: str) -> bool:
    """Whether ``module`` is ``fray`` or below it."""
    return module == "fray" or module.startswith("fray.")


def _under(module: str, parent: str) -> bool:
    return module == parent or module.startswith(parent + ".")


def _shown(names: list[tuple[str, str | None]]) -> list[str]:
    return [f"{name} as {alias}" if alias else name for name, alias in names]


def _leaf(qual: str) -> str:
    return qual.rsplit(".", 1)[-1]


class PredecessorChecks(ScanState):
    """Findings about the predecessor's API."""

    # -- imports ---------------------------------------------------------------------------

    def report_fray_import(
        self, node: ast.stmt, module: str, names: list[tuple[str, str | None]] | None
    ) -> None:
        """An import from ``module``: ``names`` (with their aliases) for ``from`` imports,
        ``None`` for ``import module``."""
        if _under(module, pred.V2):
            self._report_v2(node, module, names)
        elif _under(module, "fray.v1"):
            self._report_old(node, module, names, pred.V1_IMPORT)
        elif module in ("fray", "fray.cluster"):
            current = _FRAY_NAMES if module == "fray" else frozenset[str]()
            legacy = [(n, a) for n, a in names or [] if n in pred.LEGACY_NAMES and n not in current]
            if legacy:
                advice = "; ".join(f"{n} -> {pred.LEGACY_NAMES[n]}" for n, _ in legacy)
                shown = ", ".join(_shown(legacy))
                self.add(node, pred.LEGACY_IMPORT, names=shown, module=module, advice=advice)
        elif module.startswith("fray.cluster.") or any(
            _under(module, m) for m in pred.LEGACY_MODULES
        ):
            self._report_old(node, module, names, pred.LEGACY_IMPORT)

    def _report_v2(
        self, node: ast.stmt, module: str, names: list[tuple[str, str | None]] | None
    ) -> None:
        sub = module[len(pred.V2) :]
        drop_in = sub in pred.V2_SUBMODULES
        tail = pred.V2_DROP_IN if drop_in else ""
        if names is None:
            alias = self._import_alias(node, module)
            if drop_in:
                advice = f"import fray{sub}" + (f" as {alias}" if alias else "")
            else:
                note = next((t for p, t in pred.OLD_MODULES if _under(module, p)), None)
                advice = note or "no Fray module: import the names you use from fray"
        elif all(n in pred.TOP_LEVEL for n, _ in names):
            advice = f"from fray import {', '.join(_shown(names))}"
        elif drop_in:
            advice = f"from fray{sub} import {', '.join(_shown(names))}"
        else:
            self._report_old(node, module, names, pred.V2_IMPORT)
            return
        self.add(node, pred.V2_IMPORT, module=module, advice=advice + tail)

    @staticmethod
    def _import_alias(node: ast.stmt, module: str) -> str | None:
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == module:
                    return alias.asname
        return None

    def _report_old(
        self,
        node: ast.stmt,
        module: str,
        names: list[tuple[str, str | None]] | None,
        rule: Rule,
    ) -> None:
        """An import from a module the predecessor no longer has (or never had in Fray)."""
        if names is None:
            advice = f"import fray instead; the names that changed: {_RENAMES}"
            self.add(node, rule, module=module, names=module, advice=advice)
            return
        kept: list[tuple[str, str | None]] = []
        notes: list[str] = []
        module_note = next((t for p, t in pred.OLD_MODULES if _under(module, p)), None)
        for name, alias in names:
            if name in pred.LEGACY_NAMES:
                notes.append(f"{name} -> {pred.LEGACY_NAMES[name]}")
            elif name in pred.TOP_LEVEL:
                kept.append((name, alias))
                if _under(module, "fray.v1") and name in pred.V1_MEANING:
                    notes.append(f"{name}: {pred.V1_MEANING[name]}")
            elif module_note is not None:
                notes.append(f"{name}: {module_note}")
            else:
                notes.append(f"{name}: no Fray counterpart")
        parts = [f"from fray import {', '.join(_shown(kept))}"] if kept else []
        advice = "; ".join(parts + notes)
        self.add(node, rule, module=module, names=", ".join(_shown(names)), advice=advice)

    # -- what variables hold ---------------------------------------------------------------

    def _maker(self, value: ast.AST) -> str | None:
        """``cluster`` or ``context`` when ``value`` calls a predecessor factory of one."""
        if not isinstance(value, ast.Call):
            return None
        qual = self.qual(value.func) or ""
        if not is_fray(qual):
            return None
        if _leaf(qual) in pred.CLUSTER_MAKERS and _leaf(qual) != "set_current_cluster":
            return "cluster"
        return "context" if _leaf(qual) in pred.JOB_CONTEXT_MAKERS else None

    def _is_launch(self, value: ast.AST) -> bool:
        return (
            isinstance(value, ast.Call)
            and isinstance(value.func, ast.Attribute)
            and value.func.attr == "launch"
            and self._cluster_owner(value.func.value)
        )

    def _cluster_owner(self, owner: ast.expr) -> bool:
        return self.tracked.get(ast.unparse(owner)) == "cluster" or self._maker(owner) == "cluster"

    def collect_tracked(self) -> None:
        """Variables holding a Cluster, a job context, launched job ids or actor handles."""
        assigns: list[tuple[str, ast.expr]] = []
        for node in self.nodes:
            if isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                if len(targets) == 1 and isinstance(targets[0], ast.Name | ast.Attribute):
                    assigns.append((ast.unparse(targets[0]), node.value))
            elif isinstance(node, ast.arg) and node.annotation is not None:
                qual = self.qual(node.annotation) or ""
                if is_fray(qual) and _leaf(qual) == "Cluster":
                    self.tracked[node.arg] = "cluster"
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                creates = node.func.attr in ("create_actor", "create_actor_group", "host_actor")
                if creates and node.args and isinstance(node.args[0], ast.Name):
                    self.actor_classes.add(node.args[0].id)
        for target, value in assigns:
            kind = self._maker(value)
            if kind is not None:
                self.tracked[target] = kind
        for target, value in assigns:
            if self._is_launch(value):
                self.launched[target] = False
            elif isinstance(value, ast.ListComp) and self._is_launch(value.elt):
                self.launched[target] = True
            cls = self._created_class(value)
            if cls is not None:
                self.actor_handles[target] = cls
        self.actor_classes |= self.remote_classes

    def _created_class(self, value: ast.expr) -> str | None:
        if not isinstance(value, ast.Call) or not isinstance(value.func, ast.Attribute):
            return None
        owner, attr = value.func.value, value.func.attr
        if attr == "create_actor" and value.args and isinstance(value.args[0], ast.Name):
            return value.args[0].id
        if attr == "remote" and isinstance(owner, ast.Call):
            owner = owner.func.value if isinstance(owner.func, ast.Attribute) else owner
        if attr == "remote" and isinstance(owner, ast.Name) and owner.id in self.remote_classes:
            return owner.id
        return None

    # -- calls -----------------------------------------------------------------------------

    def visit_fray_call(self, call: ast.Call, qual: str) -> None:
        """A call of a predecessor (or TPU helper) name."""
        leaf = _leaf(qual)
        if leaf == "Entrypoint":
            self.check_old_entrypoint(call)
        elif leaf in pred.CLUSTER_MAKERS:
            target = self.assigned_to(call)
            fields = {"target": f"{target} = " if target else ""}
            fields["args"] = ", ".join(derive.call_arguments(call))
            advice = fill(pred.CLUSTER_MAKERS[leaf], fields)
            self.add(call, pred.CURRENT_CLUSTER, call=f"{qual}()", advice=advice)
        elif leaf in pred.JOB_CONTEXT_MAKERS:
            self.add(call, pred.JOB_CONTEXT, call=f"{qual}()")
        elif leaf in pred.RUNNERS:
            self.visit_runner(call, leaf, ref=False)
        elif leaf == "remote" and _leaf(qual[: -len(".remote")]) in pred.RUNNERS:
            self.visit_runner(call, _leaf(qual[: -len(".remote")]), ref=True)

    def check_old_entrypoint(self, call: ast.Call) -> None:
        """``Entrypoint(binary=..., ...)``: the predecessor's constructor keywords."""
        keywords = {k.arg for k in call.keywords}
        if keywords & {"binary", "function_args"}:
            self.add(call, pred.OLD_ENTRYPOINT)

    def visit_runner(self, call: ast.Call, leaf: str, *, ref: bool) -> None:
        """``run_on_pod(...)``, ``run_on_pod_ray.remote(...)`` and friends: a TPU job."""
        params, defaults = pred.RUNNERS[leaf]
        bound = derive.bind_args(call, params)
        fields = {"call": f"{ast.unparse(call.func)}(...)", "ref": pred.RUNNER_REF if ref else ""}
        notes: list[str] = []
        fn = bound.get("remote_fn")
        fields["fn"] = "<the function>" if fn is None else ast.unparse(fn)
        fields["name"] = repr(fn.id) if isinstance(fn, ast.Name) else "'<a job name>'"
        if isinstance(fn, ast.Name) and fn.id in self.remote_functions:
            notes.append(f"pass the plain function {fn.id} (without @ray.remote)")
        tpu = bound.get("tpu_type")
        fields["tpu_type"] = "<the TPU type>" if tpu is None else ast.unparse(tpu)
        slices = bound.get("num_slices")
        fields["slices"] = ""
        if isinstance(slices, ast.List | ast.Tuple):
            fields["slices"] = ", slice_count=<one count>"
            notes.append(
                f"slice_count takes one count: the predecessor accepted any of "
                f"{ast.unparse(slices)}, choose one"
            )
        elif slices is not None and ast.unparse(slices) != "1":
            fields["slices"] = f", slice_count={ast.unparse(slices)}"
        implied: list[str] = []
        for budget in ("max_retries_preemption", "max_retries_failure"):
            given = bound.get(budget)
            fields[budget] = defaults[budget] if given is None else ast.unparse(given)
            if given is None:
                implied.append(f"{budget}={defaults[budget]}")
        if implied:
            notes.append(
                f"{', '.join(implied)}: what {leaf} used when not given (Fray's own "
                "defaults are 100 preemptions and 0 failures)"
            )
        env = bound.get("runtime_env")
        fields["env"] = "" if env is None else f", environment={derive.environment(env)[0]}"
        fields["notes"] = "".join(f"; {note}" for note in notes)
        self.add(call, pred.RUN_ON_POD, **fields)

    def visit_tracked_method(self, call: ast.Call, func: ast.Attribute) -> bool:
        """A method of a Cluster or a job context; whether it was one."""
        owner = func.value
        text = ast.unparse(owner)
        kind = self.tracked.get(text) or self._maker(owner)
        method = func.attr
        if kind == "cluster" and (method in pred.CLUSTER_METHODS or method == "wait"):
            advice = self._cluster_advice(call, method)
            self.add(call, pred.CLUSTER_METHOD, owner=text, method=method, advice=advice)
            return True
        if kind == "context" and method in pred.CONTEXT_METHODS:
            advice = self._context_advice(call, method)
            self.add(call, pred.CONTEXT_METHOD, owner=text, method=method, advice=advice)
            return True
        return False

    def _cluster_advice(self, call: ast.Call, method: str) -> str:
        first = call.args[0] if call.args else None
        fields = {"id": "the job" if first is None else ast.unparse(first)}
        fields["args"] = ", ".join(derive.call_arguments(call))
        target = self.assigned_to(call)
        fields["where"] = f" in place of {target}" if target else ""
        if method != "wait":
            template = pred.CLUSTER_METHODS[method]
        else:
            given = derive.bind_args(call, ("job_id", "raise_on_failure")).get("raise_on_failure")
            fields["raise_"] = "False" if given is None else ast.unparse(given)
            fields["default"] = pred.WAIT_DEFAULT if given is None else ""
            if given is not None and fields["raise_"] != "False":
                fields["default"] = pred.WAIT_RAISES
            if isinstance(first, _MANY):
                template = pred.WAIT_MANY
            elif isinstance(first, ast.Name) and first.id in self.launched:
                template = pred.WAIT_MANY if self.launched[first.id] else pred.WAIT_ONE
            else:
                template = pred.WAIT_EITHER
        return fill(template, fields)

    def _context_advice(self, call: ast.Call, method: str) -> str:
        fields = {"fn": ast.unparse(call.args[0]) if call.args else "fn"}
        fields["args"] = ", ".join(ast.unparse(a) for a in call.args[1:])
        fields["id"] = fields["fn"]
        fields["resources"] = fields["exists"] = ""
        if method == "create_actor":
            skip = ("get_if_exists", "lifetime", "preemptible", "num_cpus")
            fields["args"] = ", ".join(derive.call_arguments(call, skip=skip))
            options = {k.arg: k.value for k in call.keywords if k.arg}
            resources = [f"cpu={ast.unparse(options['num_cpus'])}"] if "num_cpus" in options else []
            keep = options.get("preemptible")
            if keep is not None and ast.unparse(keep) == "False":
                resources.append("preemptible=False")
            if resources:
                fields["resources"] = f", resources=ResourceConfig({', '.join(resources)})"
            dropped = [k for k in ("get_if_exists", "lifetime") if k in options]
            if dropped:
                fields["exists"] = f" ({' and '.join(dropped)}: create it once instead)"
        return fill(pred.CONTEXT_METHODS[method], fields)

    # -- actors and __call__ ---------------------------------------------------------------

    def visit_dunder_call(self, call: ast.Call, func: ast.Attribute) -> bool:
        """``handle.__call__.remote(...)``: Fray handles do not reach dunder methods."""
        target = func.value if func.attr in ("remote", "submit") else func
        if not (isinstance(target, ast.Attribute) and target.attr == "__call__"):
            return False
        owner = ast.unparse(target.value)
        # x.__call__(...) is ordinary Python (super().__call__, metaclasses) unless x is
        # known to hold an actor handle; .__call__.remote(...) only exists on handles.
        known = owner in self.actor_handles if target is func else bool(self.bindings)
        if not known:
            return False
        cls = self.actor_handles.get(owner, "the actor class")
        how = f".{func.attr}(...)" if target is not func else "(...)"
        self.add(call, rules.DUNDER_CALL, owner=owner, cls=cls, how=how)
        return True

    def check_actor_classes(self) -> None:
        """Classes used as actors here that define ``__call__``."""
        for node in self.nodes:
            if isinstance(node, ast.ClassDef) and node.name in self.actor_classes:
                for item in node.body:
                    is_def = isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef)
                    if is_def and item.name == "__call__":
                        self.add(item, rules.CALL_METHOD, cls=node.name)
