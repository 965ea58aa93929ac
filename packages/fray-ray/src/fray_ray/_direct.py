"""A resubmitted job's task handed straight to Ray's core worker.

``RemoteFunction.remote()`` works the task's options out afresh on every call (Ray's twenty-odd
option defaults merged in, the resource dict, the placement group of the calling context,
tracing and launch hooks) before it hands the task to the core worker. On a busy 2-core
machine that is ~25 us of a ~65 us submission. The exported function of a resubmitted job
request (``fray_ray._submit.Prepared``) takes no arguments and has the same options every
time, so :class:`DirectTask` works them out once, the way ``remote()`` does, and then calls the
core worker's ``submit_task`` itself: the same task, the same refs.

It does so only where that is sure to be the same task. Once, when it is prepared after a first
ordinary ``remote()`` (which exports the function): Ray's ``submit_task`` takes exactly the
parameters filled here, by name (another Ray version keeps the ordinary path), the options
hold nothing but resources, labels and retries (no runtime env, placement group or
scheduling strategy), and tracing is off. On every call: the same Ray connection, no
breakpoint pending from Ray's debugger, no task launch hook, and no placement group of the
calling task that captures its child tasks. Anything else goes through ``remote()``.
"""

# pyright: standard
# Ray is untyped: this module is an adapter over it.

from __future__ import annotations

import inspect
import logging
from typing import Any

__all__ = ["DirectTask"]

logger = logging.getLogger("fray.ray")

# ``CoreWorker.submit_task``'s parameters after ``self``, as :func:`_prepare` fills them.
_PARAMETERS = (
    "language",
    "function_descriptor",
    "args",
    "name",
    "num_returns",
    "resources",
    "max_retries",
    "retry_exceptions",
    "retry_exception_allowlist",
    "scheduling_strategy",
    "debugger_breakpoint",
    "serialized_runtime_env_info",
    "generator_backpressure_num_objects",
    "num_objects_per_yield",
    "enable_task_events",
    "labels",
    "label_selector",
    "fallback_strategy",
)

# Task options that only shape the task spec (see ``fray_ray._convert.task_options``).
_PLAIN_OPTIONS = frozenset(
    {"num_cpus", "num_gpus", "memory", "resources", "accelerator_type", "label_selector"}
)


class DirectTask:
    """A no-argument remote function with fixed options, submitted with :meth:`remote`.

    Args:
        function: The function made remote (``ray.remote(max_retries=0)(fn)``).
        options: Its task options (``fray_ray._convert.task_options``).
    """

    __slots__ = ("_function", "_options", "_ready", "_remote")

    def __init__(self, function: Any, options: dict[str, Any]) -> None:
        self._function = function
        self._options = options
        self._remote = function.options(**options)
        # (submit_task, the arguments before and after ``args``, Ray's worker, its core
        # worker, whether this is a driver, ray.remote_function): see ``_prepared``.
        self._ready: tuple[Any, ...] | None = None

    @property
    def direct(self) -> bool:
        """Whether calls go to the core worker directly (after a first ordinary one)."""
        return self._ready is not None

    def remote(self) -> Any:
        """Submits the task; its ref."""
        ready = self._ready
        if ready is not None:
            submit, head, tail, worker, core, driver, hooks = ready
            if (
                getattr(worker, "core_worker", None) is core
                and not worker.debugger_breakpoint
                and hooks._task_launch_hook is None
                and (driver or not core.should_capture_child_tasks_in_placement_group())
            ):
                return submit(*head, [], *tail)[0]
        ref = self._remote.remote()
        if ready is None or ready[4] is not getattr(ready[3], "core_worker", None):
            self._ready = _prepare(self._function, self._options)
        return ref


def _prepare(function: Any, options: dict[str, Any]) -> Any:
    """What :meth:`DirectTask.remote` calls, worked out as ``RemoteFunction._remote`` does;
    ``None`` where it cannot be sure to make the same task. Called after an ordinary
    ``remote()``, which exported the function to this Ray session."""
    try:
        return _prepared(function, options)
    except Exception as exc:  # a Ray laid out otherwise: the ordinary path serves
        logger.debug("submitting through Ray's core worker is off: %r", exc)
        return None


def _prepared(function: Any, options: dict[str, Any]) -> Any:
    import ray._private.worker as ray_worker
    import ray.remote_function as remote_function
    from ray.util.tracing.tracing_helper import _is_tracing_enabled

    # Where this Ray keeps them (``_remote`` reads the same names); missing: the ordinary path.
    names = vars(remote_function)
    option_defaults = names["ray_option_utils"].task_options
    resources_of = names["ray"]._common.utils.resources_from_ray_options
    worker = ray_worker.global_worker
    core = getattr(worker, "core_worker", None)
    if core is None or not set(options) <= _PLAIN_OPTIONS or _is_tracing_enabled():
        return None
    parameters = tuple(inspect.signature(type(core).submit_task).parameters)
    if parameters[1:] != _PARAMETERS:
        return None
    if (
        function._is_cross_language
        or function._is_generator
        or function._decorator is not None
        or function._function_signature
        or function._last_export_cluster_and_job != worker.current_cluster_and_job
    ):
        return None
    # The options as ``_remote`` completes them: Ray's defaults, the function's, the request's.
    merged = {name: option.default_value for name, option in option_defaults.items()}
    merged.update(function._default_options)
    merged.update(options)
    if (
        "max_retries" not in function._default_options  # Ray's default depends on the env
        or merged["num_returns"] not in (None, 1)
        or merged["placement_group"] != "default"
        or merged["placement_group_bundle_index"] != -1
        or merged["placement_group_capture_child_tasks"] is not None
        or merged["scheduling_strategy"] is not None
        or merged["runtime_env"]
        or type(merged["retry_exceptions"]) is not bool
        or merged["_generator_backpressure_num_objects"] is not None
        or merged["_num_objects_per_yield"] not in (None, 1)
    ):
        return None
    values = {
        "language": function._language,
        "function_descriptor": function._function_descriptor,
        "name": merged["name"] or "",
        "num_returns": 1,
        "resources": resources_of(merged),
        "max_retries": int(merged["max_retries"]),
        "retry_exceptions": merged["retry_exceptions"],
        "retry_exception_allowlist": None,
        # No placement group asked for, none captured: what ``_remote`` then passes.
        "scheduling_strategy": "DEFAULT",
        "debugger_breakpoint": b"",
        "serialized_runtime_env_info": function._serialized_base_runtime_env_info or "{}",
        "generator_backpressure_num_objects": -1,
        "num_objects_per_yield": 1,
        "enable_task_events": merged["enable_task_events"],
        "labels": merged["_labels"],
        "label_selector": merged["label_selector"],
        "fallback_strategy": merged["fallback_strategy"],
    }
    split = _PARAMETERS.index("args")
    head = tuple(values[name] for name in _PARAMETERS[:split])
    tail = tuple(values[name] for name in _PARAMETERS[split + 1 :])
    driver = worker.mode == ray_worker.SCRIPT_MODE
    return core.submit_task, head, tail, worker, core, driver, remote_function
