"""Fray expressions derived from the code found: sizes, resources, retries and environments
written out from the Ray options and arguments as the user wrote them."""

from __future__ import annotations

import ast
import math
import re
from collections.abc import Callable, Mapping, Sequence

__all__ = [
    "Options",
    "actor_config",
    "actor_form",
    "bind_args",
    "call_arguments",
    "constant_str",
    "environment",
    "gpu_request",
    "instance_name",
    "ram_size",
    "resource_config",
    "retries",
    "submit_form",
    "wants_gpu",
]

Options = Mapping[str, ast.expr]
Qualify = Callable[[ast.AST], "str | None"]

_UNITS = (("t", 4), ("g", 3), ("m", 2), ("k", 1))
_OPS: dict[type[ast.operator], Callable[[int, int], int]] = {
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b,
    ast.FloorDiv: lambda a, b: a // b,
    ast.LShift: lambda a, b: a << b,
}
# Ray's default ``max_retries`` for a task.
_RAY_TASK_RETRIES = "3"


def constant_str(node: ast.AST | None) -> str | None:
    """The value of a string literal, else ``None``."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return None


def _number(node: ast.AST) -> int | None:
    """An integer literal expression (``8 * 1024**3``, ``16e9``), evaluated; else ``None``."""
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
        value = node.value
        if isinstance(value, bool) or not math.isfinite(value) or value != int(value):
            return None
        return int(value)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = _number(node.operand)
        return None if inner is None else -inner
    if isinstance(node, ast.BinOp):
        left, right = _number(node.left), _number(node.right)
        if left is None or right is None:
            return None
        if isinstance(node.op, ast.Pow):
            return left**right if 0 <= right <= 64 and abs(left) <= 1 << 20 else None
        op = _OPS.get(type(node.op))
        if op is None or (isinstance(node.op, ast.FloorDiv) and right == 0):
            return None
        if isinstance(node.op, ast.LShift) and not 0 <= right <= 64:
            return None
        return op(left, right)
    return None


def ram_size(node: ast.expr) -> str:
    """A Ray byte count as a Fray size string: ``8 * 1024**3`` -> ``'8g'``."""
    value = _number(node)
    if value is None or value < 0:
        return f"str({ast.unparse(node)}) (a byte count, as Ray took it)"
    for unit, power in _UNITS:
        step = 1024**power
        if value >= step and value % step == 0:
            return repr(f"{value // step}{unit}")
    return repr(str(value))


def _gpu_types() -> list[str]:
    from fray._types import GPU_TYPES  # the request types load pydantic: only when needed

    return [g for g in GPU_TYPES if g != "auto"]


def _accelerator_name(node: ast.expr, qual: Qualify) -> str | None:
    """Ray's accelerator type as written: a string, or a ray.util.accelerators constant."""
    text = constant_str(node)
    if text is not None:
        return text
    name = qual(node) or ""
    if not name.startswith("ray.util.accelerators."):
        return None
    leaf = name.rsplit(".", 1)[-1]
    for prefix in ("NVIDIA_TESLA_", "NVIDIA_", "GOOGLE_", "AMD_INSTINCT_", "INTEL_"):
        leaf = leaf.removeprefix(prefix)
    return leaf.replace("_", "-")


def gpu_request(options: Options, qual: Qualify) -> tuple[str, str, str | None]:
    """``(args, note, tpu)`` for ``num_gpus``/``accelerator_type``.

    ``args`` are the arguments of ``ResourceConfig.with_gpu`` (``'H100', count=2``), ``note``
    says what to choose where the code does not tell, and ``tpu`` is the TPU generation when
    the accelerator type names one (then ``args`` is empty).
    """
    count_node = options.get("num_gpus")
    count, note = "1", ""
    if count_node is not None:
        count = ast.unparse(count_node)
        value = count_node.value if isinstance(count_node, ast.Constant) else None
        if isinstance(value, float) and _number(count_node) is None:
            count = str(max(1, math.ceil(value)))
            note = f"; Fray gives whole GPUs: count={count} for num_gpus={value}"
    accel = options.get("accelerator_type")
    name = None if accel is None else _accelerator_name(accel, qual)
    if accel is not None and name is None:
        return f"{ast.unparse(accel)}, count={count}", note, None
    if name is None:
        choose = "any GPU type; pass one first to pin it: " + ", ".join(_gpu_types())
        return f"count={count}", f"{note}; {choose}", None
    if name.upper().startswith("TPU"):
        return "", note, name[len("TPU-") :].lower() or "<generation>"
    by_upper = {g.upper(): g for g in _gpu_types()}
    if name.upper() in by_upper:
        return f"{by_upper[name.upper()]!r}, count={count}", note, None
    close = [g for g in _gpu_types() if g.upper().startswith(name.upper())]
    if close:
        pick = " or ".join(repr(g) for g in close)
        return f"<{pick}>, count={count}", f"{note}; Ray's {name!r} is {pick} in Fray", None
    known = ", ".join(_gpu_types())
    return (
        f"<a GPU type>, count={count}",
        f"{note}; {name!r} is not a Fray GPU type ({known})",
        None,
    )


def _tpu_from_resources(node: ast.expr | None) -> tuple[str | None, bool]:
    """``(tpu_type, head_node)`` from a ``resources={...}`` literal."""
    if not isinstance(node, ast.Dict):
        return None, False
    keys = [k for k in (constant_str(key) for key in node.keys) if k is not None]
    heads = [
        k[len("TPU-") : -len("-head")] for k in keys if k.startswith("TPU-") and k.endswith("-head")
    ]
    return (heads[0] if heads else None), "head_node" in keys


def resource_config(options: Options, qual: Qualify) -> str:
    """The ``ResourceConfig`` the options ask for, or ``""`` when they ask for nothing."""
    fields: list[str] = []
    if "num_cpus" in options:
        fields.append(f"cpu={ast.unparse(options['num_cpus'])}")
    if "memory" in options:
        fields.append(f"ram={ram_size(options['memory'])}")
    tpu, head = _tpu_from_resources(options.get("resources"))
    if head:
        fields.append("preemptible=False")
    extra = "".join(f", {field}" for field in fields)
    if wants_gpu(options):
        args, _note, tpu_generation = gpu_request(options, qual)
        if tpu_generation is None:
            return f"ResourceConfig.with_gpu({args}{extra})"
        tpu = tpu or f"{tpu_generation}-<size>"
    if tpu:
        return f"ResourceConfig.with_tpu({tpu!r}{extra})"
    return f"ResourceConfig({', '.join(fields)})" if fields else ""


def wants_gpu(options: Options) -> bool:
    """Whether the options ask for an accelerator (``num_gpus=0`` does not)."""
    count = options.get("num_gpus")
    return "accelerator_type" in options or (count is not None and _number(count) != 0)


def actor_config(options: Options) -> str:
    """The ``ActorConfig`` for Ray's actor options, or ``""``."""
    keys = ("max_concurrency", "max_restarts", "max_task_retries")
    fields = [f"{k}={ast.unparse(options[k])}" for k in keys if k in options]
    return f"ActorConfig({', '.join(fields)})" if fields else ""


def retries(options: Options) -> tuple[str, str]:
    """``(JobRequest keywords, note)`` for Ray's ``max_retries``/``retry_exceptions``."""
    count = options.get("max_retries")
    exceptions = options.get("retry_exceptions")
    retry_user = exceptions is not None and not (
        isinstance(exceptions, ast.Constant) and exceptions.value in (False, None)
    )
    by_type = isinstance(exceptions, ast.List | ast.Tuple)
    n = _RAY_TASK_RETRIES if count is None else ast.unparse(count)
    if count is not None and _number(count) == -1:
        return (
            "max_retries_preemption=<a bound>" + (", max_retries_failure=<a bound>" * retry_user),
            "; Ray retried forever (-1): Fray budgets are finite, choose them",
        )
    if not retry_user:
        return (
            f"max_retries_preemption={n}",
            f"; Ray spent max_retries={n} on lost workers and nodes only, not on your "
            "exceptions (max_retries_failure stays 0)",
        )
    note = f"; Ray spent one budget of {n} on lost workers and on your exceptions"
    if count is None:
        note += f" ({n} is Ray's default max_retries)"
    if by_type:
        note += "; Fray retries any exception, it cannot filter by type"
    return f"max_retries_preemption={n}, max_retries_failure={n}", note


_ENV_FIELDS = {
    "env_vars": "env_vars",
    "pip": "pip_packages",
    "uv": "pip_packages",
    "working_dir": "workspace",
    "py_modules": "workspace",
    "container": "docker_image",
    "image_uri": "docker_image",
}


def environment(node: ast.expr) -> tuple[str, list[str]]:
    """``(EnvironmentConfig(...), notes)`` for a ``runtime_env`` literal."""
    if not isinstance(node, ast.Dict):
        return f"EnvironmentConfig(...) (from {ast.unparse(node)[:40]})", []
    fields: list[str] = []
    notes: list[str] = []
    for key_node, value in zip(node.keys, node.values, strict=True):
        key = constant_str(key_node)
        if key is None:
            continue
        field = _ENV_FIELDS.get(key)
        if field is None:
            if key == "conda":
                notes.append("conda is not supported: list the packages in pip_packages")
            else:
                notes.append(f"{key}: no equivalent")
            continue
        if key in ("pip", "uv") and isinstance(value, ast.Dict):
            packages = dict(zip((constant_str(k) for k in value.keys), value.values, strict=True))
            value = packages.get("packages", value)
        if key == "container" and isinstance(value, ast.Dict):
            image = dict(zip((constant_str(k) for k in value.keys), value.values, strict=True))
            value = image.get("image", value)
        text = ast.unparse(value)
        fields.append(f"{field}={text if len(text) <= 60 else '...'}")
    return f"EnvironmentConfig({', '.join(dict.fromkeys(fields))})", notes


def call_arguments(call: ast.Call, *, skip: Sequence[str] = ()) -> list[str]:
    """The call's arguments as written, keywords in ``skip`` left out."""
    args = [ast.unparse(a) for a in call.args]
    for keyword in call.keywords:
        if keyword.arg is None:
            args.append(f"**{ast.unparse(keyword.value)}")
        elif keyword.arg not in skip:
            args.append(f"{keyword.arg}={ast.unparse(keyword.value)}")
    return args


def bind_args(call: ast.Call, params: Sequence[str]) -> dict[str, ast.expr]:
    """The call's arguments by parameter name (positional ones by position)."""
    bound: dict[str, ast.expr] = {}
    for name, arg in zip(params, call.args, strict=False):
        if not isinstance(arg, ast.Starred):
            bound[name] = arg
    for keyword in call.keywords:
        if keyword.arg is not None:
            bound[keyword.arg] = keyword.value
    return bound


def instance_name(cls: str) -> str:
    """A name for an actor of class ``cls``: ``TokenCounter`` -> ``'token-counter'``."""
    return repr(re.sub(r"(?<!^)(?=[A-Z])", "-", cls).lower().replace("_", "-"))


def _callable_args(call: ast.Call | None) -> str:
    if call is None:
        return ", args=[...]"
    positional = [ast.unparse(a) for a in call.args]
    named = [f"{k.arg!r}: {ast.unparse(k.value)}" for k in call.keywords if k.arg]
    text = f", args=[{', '.join(positional)}]" if positional else ""
    return text + (f", kwargs={{{', '.join(named)}}}" if named else "")


def submit_form(fn: str, call: ast.Call | None, options: Options, qual: Qualify) -> str:
    """``job = client.submit(JobRequest(...))`` for a Ray task of ``fn`` with ``options``."""
    name = ast.unparse(options["name"]) if "name" in options else repr(fn)
    parts = [f"name={name}", f"entrypoint=Entrypoint.from_callable({fn}{_callable_args(call)})"]
    resources = resource_config(options, qual)
    if resources:
        parts.append(f"resources={resources}")
    if "runtime_env" in options:
        parts.append(f"environment={environment(options['runtime_env'])[0]}")
    if "max_retries" in options or "retry_exceptions" in options:
        parts.append(retries(options)[0])
    return f"job = client.submit(JobRequest({', '.join(parts)}))"


def actor_form(cls: str, call: ast.Call | None, options: Options, qual: Qualify) -> str:
    """``handle = client.create_actor(...)`` for a Ray actor of ``cls`` with ``options``."""
    args = ["<its __init__ arguments>"] if call is None else call_arguments(call)
    name = ast.unparse(options["name"]) if "name" in options else instance_name(cls)
    parts = [cls, *args, f"name={name}"]
    resources = resource_config(options, qual)
    if resources:
        parts.append(f"resources={resources}")
    config = actor_config(options)
    if config:
        parts.append(f"actor_config={config}")
    text = f"handle = client.create_actor({', '.join(parts)})"
    if "runtime_env" in options:
        text += " (actors take no environment: they run in the environment of their creator)"
    return text
