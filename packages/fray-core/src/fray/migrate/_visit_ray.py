"""The Ray checks of the per-file pass: imports, ``@ray.remote``, Ray calls and options."""

from __future__ import annotations

import ast

from fray.migrate import _derive as derive
from fray.migrate import _rules_ray as rules
from fray.migrate._scan_state import ScanState

__all__ = ["RayChecks"]


def _keywords(call: ast.Call) -> dict[str, ast.expr]:
    return {k.arg: k.value for k in call.keywords if k.arg}


class RayChecks(ScanState):
    """Findings about Ray itself."""

    def collect_remote_defs(self) -> None:
        """``@ray.remote`` functions and classes: reported, and remembered for their calls."""
        for node in self.nodes:
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                continue
            self.local_defs[node.name] = "actor" if isinstance(node, ast.ClassDef) else "task"
            for deco in node.decorator_list:
                target = deco.func if isinstance(deco, ast.Call) else deco
                if self.qual(target) != "ray.remote":
                    continue
                self.handled.add(target)
                self.decorators.add(deco)
                options = _keywords(deco) if isinstance(deco, ast.Call) else {}
                self.remote_options[node.name] = options
                if isinstance(node, ast.ClassDef):
                    self.remote_classes.add(node.name)
                    form = derive.actor_form(node.name, None, options, self.qual)
                    self.add(deco, rules.REMOTE_ACTOR, name=node.name, form=form)
                else:
                    self.remote_functions.add(node.name)
                    form = derive.submit_form(node.name, None, options, self.qual)
                    self.add(deco, rules.REMOTE_TASK, name=node.name, form=form)
                if isinstance(deco, ast.Call):
                    self.visit_options(deco, actor=isinstance(node, ast.ClassDef))

    def check_imports_used(self) -> None:
        """Ray imports nothing uses, or that only set Ray up."""
        uses: dict[str, list[ast.Name]] = {name: [] for name in self.bindings}
        for node in self.nodes:
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

    def visit_remote_call(self, call: ast.Call, func: ast.Attribute) -> bool:
        """``Fn.remote(...)``, ``Cls.remote(...)``, ``X.options(...)`` and
        ``X.options(...).remote(...)``; whether the call was one of them."""
        owner = func.value
        if isinstance(owner, ast.Name):
            name = owner.id
            options = self.remote_options.get(name, {})
            if func.attr == "remote" and name in self.remote_functions:
                form = derive.submit_form(name, call, options, self.qual)
                self.add(call, rules.TASK_CALL, name=name, form=form)
                return True
            if func.attr == "remote" and name in self.remote_classes:
                self.add(call, rules.ACTOR_CREATE, name=name, form=self._actor_form(name, call))
                return True
            if func.attr == "options" and name in self.remote_functions | self.remote_classes:
                self.visit_options(call, actor=name in self.remote_classes)
                return True
        inner = owner
        if (
            func.attr == "remote"
            and isinstance(inner, ast.Call)
            and isinstance(inner.func, ast.Attribute)
            and inner.func.attr == "options"
        ):
            return self.visit_options_launch(call, inner, inner.func.value)
        return False

    def _actor_form(self, cls: str, call: ast.Call, options: derive.Options | None = None) -> str:
        merged = {**self.remote_options.get(cls, {}), **(options or {})}
        form = derive.actor_form(cls, call, merged, self.qual)
        if self.in_loop(call) and "name" not in merged:
            form = (
                f"one group instead of one actor per item: group = client.create_actor_group("
                f"{cls}, name={derive.instance_name(cls)}, count=N), then group.wait_ready(); "
                f"or per item {form} with a distinct name"
            )
        return form

    def _launched(self, owner: ast.expr) -> tuple[ast.expr, derive.Options, str | None]:
        """What ``owner.options(...)`` starts (``ray.remote(f)`` unwrapped to ``f``), the
        options given to ``ray.remote``, and ``task``/``actor`` when this file tells which."""
        wrap: derive.Options = {}
        if isinstance(owner, ast.Call) and owner.args:
            func = owner.func
            if self.qual(func) == "ray.remote":
                owner = owner.args[0]
            elif isinstance(func, ast.Call) and self.qual(func.func) == "ray.remote":
                owner, wrap = owner.args[0], _keywords(func)
        if not isinstance(owner, ast.Name):
            return owner, wrap, None
        name = owner.id
        if name in self.remote_classes or self.local_defs.get(name) == "actor":
            return owner, {**self.remote_options.get(name, {}), **wrap}, "actor"
        if name in self.remote_functions or self.local_defs.get(name) == "task":
            return owner, {**self.remote_options.get(name, {}), **wrap}, "task"
        return owner, wrap, None

    def visit_options_launch(self, call: ast.Call, options_call: ast.Call, owner: ast.expr) -> bool:
        """``X.options(...).remote(...)``: a task, an actor or an actor call started with
        per-call options."""
        known = isinstance(owner, ast.Name) and owner.id in (
            self.remote_functions | self.remote_classes
        )
        if not (known or self.uses_ray):
            return False
        started, base, kind = self._launched(owner)
        text = ast.unparse(started)
        options = {**base, **_keywords(options_call)}
        task = derive.submit_form(text, call, options, self.qual)
        if kind == "actor" and isinstance(started, ast.Name):
            what, advice = "creates a Ray actor", self._actor_form(started.id, call, options)
        elif kind == "task":
            what, advice = "starts a Ray task", task
        else:
            actor = derive.actor_form(text, call, options, self.qual)
            what = "starts a Ray task or actor"
            advice = f"if {text} is a @ray.remote function: {task}; if it is a class: {actor}"
            if isinstance(started, ast.Attribute):
                what = "starts a Ray task, actor or actor call"
                args = ", ".join(derive.call_arguments(call))
                advice += (
                    f"; if it is an actor method: {text}.remote({args}) (a Fray actor call "
                    "takes no per-call options)"
                )
        if started is not owner:
            advice += f" ({text} itself, without the ray.remote wrapping)"
        self.add(call, rules.OPTIONS_LAUNCH, owner=ast.unparse(owner), what=what, advice=advice)
        if not known:
            self.visit_options(options_call, actor=kind == "actor")
        return True

    def visit_ray_call(self, call: ast.Call, qual: str) -> None:
        """A call of a known Ray name."""
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
        self.add(call, rules.GENERIC, found=f"{qual}()")

    def visit_options(self, call: ast.Call, *, actor: bool) -> None:
        """The keyword options of ``@ray.remote(...)`` or ``.options(...)``."""
        keywords = {k.arg: k for k in call.keywords if k.arg}
        options = _keywords(call)
        if "name" in keywords and actor:
            exists = options.get("get_if_exists")
            get_if_exists = isinstance(exists, ast.Constant) and exists.value is True
            extra = " with get_if_exists=True" if get_if_exists else ""
            cls = self._options_owner(call)
            name = ast.unparse(options["name"])
            self.add(keywords["name"], rules.NAMED_ACTOR, cls=cls, name=name, extra=extra)
        for arg, keyword in keywords.items():
            if arg == "resources":
                self.visit_resources(keyword)
            elif arg == "runtime_env":
                self.visit_runtime_env(keyword)
            elif arg in rules.OPTIONS:
                value = ast.unparse(keyword.value)
                fields = self._option_fields(arg, keyword.value, options)
                self.add(keyword, rules.OPTIONS[arg], found=f"{arg}={value}", **fields)

    def _options_owner(self, call: ast.Call) -> str:
        """The class an ``@ray.remote(...)``/``.options(...)`` call configures, as written."""
        if isinstance(call.func, ast.Attribute) and call.func.attr == "options":
            return ast.unparse(call.func.value)
        parent = self.parents.get(call)
        return parent.name if isinstance(parent, ast.ClassDef) else "Cls"

    def _option_fields(self, arg: str, value: ast.expr, options: derive.Options) -> dict[str, str]:
        fields = {"value": ast.unparse(value)}
        if arg == "memory":
            fields["ram"] = derive.ram_size(value)
        elif arg in ("num_gpus", "accelerator_type"):
            args, note, tpu = derive.gpu_request(options, self.qual)
            if tpu is not None:
                fields["advice"] = f"ResourceConfig.with_tpu('{tpu}-<size>'){note}: pick the size"
            elif not derive.wants_gpu(options):
                fields["advice"] = "drop it: num_gpus=0 asks for no GPU (the Fray default)"
            else:
                fields["advice"] = f"ResourceConfig.with_gpu({args}){note}"
        elif arg in ("max_retries", "retry_exceptions"):
            fields["retries"], fields["note"] = derive.retries(options)
        elif arg == "namespace":
            text = derive.constant_str(value)
            fields["namespace"] = text if text is not None else "{" + ast.unparse(value) + "}"
        return fields

    def visit_resources(self, keyword: ast.keyword) -> None:
        """``resources={...}``: head node, TPU and custom resources."""
        value = keyword.value
        keys: list[str] = []
        if isinstance(value, ast.Dict):
            keys = [k for k in (derive.constant_str(key) for key in value.keys) if k is not None]
        tpu_head = [k for k in keys if k.startswith("TPU-") and k.endswith("-head")]
        if "head_node" in keys:
            self.add(keyword, rules.HEAD_NODE)
        if tpu_head or "TPU" in keys:
            tpu_type = (
                repr(tpu_head[0][len("TPU-") : -len("-head")])
                if tpu_head
                else "TYPE (choose the type whose VMs have these chips: fray tpu list)"
            )
            shown = ", ".join(repr(k) for k in keys if k.startswith("TPU"))
            self.add(keyword, rules.TPU_RESOURCES, tpu_type=tpu_type, keys=shown)
        others = [k for k in keys if k != "head_node" and not k.startswith("TPU")]
        if others or not keys:
            shown = ", ".join(repr(k) for k in others) if others else ast.unparse(value)
            self.add(keyword, rules.CUSTOM_RESOURCES, keys=shown)

    def visit_runtime_env(self, keyword: ast.keyword) -> None:
        """``runtime_env={...}``: the EnvironmentConfig that carries the same settings."""
        value = keyword.value
        env, notes = derive.environment(value)
        shown = "; " + "; ".join(notes) if notes else ""
        self.add(
            keyword,
            rules.RUNTIME_ENV,
            value=ast.unparse(value)[:60],
            environment=env,
            notes=shown,
        )

    def visit_bundles(self, call: ast.Call) -> None:
        """A placement group whose bundles ask for TPUs."""
        if "TPU" in ast.unparse(call):
            self.add(call, rules.TPU_BUNDLES)

    def visit_ray_reference(self, node: ast.Attribute | ast.Name, qual: str) -> None:
        """A Ray name used without being called (``except RayActorError``, ``ray.data``)."""
        if qual == "ray" or qual == "ray.remote" or qual in rules.SETUP:
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
