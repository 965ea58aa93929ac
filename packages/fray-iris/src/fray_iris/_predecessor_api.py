# pyright: standard
"""The conversion helpers of the predecessor's ``fray.iris_backend``, on fray-iris's own.

Code written for the predecessor builds Iris requests itself with these (``from
fray.iris_backend import convert_environment``) and submits them through raw Iris. Each one
takes Fray's types and returns the types of whichever marin-iris is installed, and accepts
what callers of either predecessor line pass (0.2.20 and 0.2.227 differ: see each function).
The conversions are ``fray_iris._convert``'s, the ones Fray's own submissions use; the few
pieces only marin-iris 0.2.227 has raise an error naming what is missing on 0.2.20.
"""

from __future__ import annotations

import os
import re
from typing import Any

from iris.cluster.constraints import Constraint
from iris.cluster.types import CoschedulingConfig, EnvironmentSpec, ResourceSpec
from iris.cluster.types import Entrypoint as IrisEntrypoint
from iris.rpc import job_pb2

from fray import (
    CpuConfig,
    DeviceConfig,
    Entrypoint,
    EnvironmentConfig,
    GpuConfig,
    JobStatus,
    ResourceConfig,
    TpuConfig,
)
from fray.errors import InvalidRequestError
from fray_iris import _iris
from fray_iris._convert import (
    environment_spec,
    job_status,
    to_constraints,
    to_coscheduling,
    to_resource_spec,
)

__all__ = [
    "NSYS_TASKS_ENV",
    "convert_constraints",
    "convert_container_profile",
    "convert_entrypoint",
    "convert_environment",
    "convert_resources",
    "map_iris_job_state",
    "resolve_coscheduling",
    "wrap_multiprocess",
    "wrap_nsys",
]

NSYS_TASKS_ENV = "IRIS_NSYS_TASKS"
"""The variable that selects which tasks :func:`wrap_nsys` runs under Nsight Systems:
``first``, ``all``, or task indices separated by commas."""

_NSYS_TASKS = re.compile(r"first|all|\d+(,\d+)*")

_STATE_NUMBERS: dict[str, int] = dict(job_pb2.JobState.items())


def convert_resources(resources: ResourceConfig) -> ResourceSpec:
    """Iris's ``ResourceSpec`` for one replica: cpu, memory and disk (in bytes), and the
    device (a TPU with its chips per VM, a GPU with its count; ``GpuConfig("auto")`` leaves
    the variant open)."""
    return to_resource_spec(resources)


def convert_constraints(resources: ResourceConfig) -> list[Constraint]:
    """Iris's placement constraints: non-preemptible capacity when ``preemptible=False``,
    regions (``[ANY_REGION]``: any region rather than the parent job's), zone, target
    cluster and device alternatives.

    Raises:
        InvalidRequestError: ``regions=[ANY_REGION]`` or a ``target_cluster`` with marin-iris
            0.2.20, which cannot express them.
    """
    return to_constraints(resources)


def convert_container_profile(resources: ResourceConfig) -> int:
    """The Iris ``ContainerProfile`` number for ``resources.container_profile`` (its enum
    name, e.g. ``"CONTAINER_PROFILE_GVISOR"``); 0, unspecified, when it is ``None``.

    Raises:
        InvalidRequestError: a name Iris does not know, or any name with marin-iris 0.2.20
            (which has no container profiles).
    """
    profile = resources.container_profile
    if profile is None:
        return 0
    if not _iris.CONTAINER_PROFILES:
        raise InvalidRequestError.for_field(
            "ResourceConfig.container_profile",
            profile,
            f"only None with marin-iris {_iris.IRIS_VERSION}: container profiles need "
            f"{_iris.NEWER_IRIS}",
        )
    number = _iris.CONTAINER_PROFILES.get(profile)
    if number is None:
        names = ", ".join(sorted(_iris.CONTAINER_PROFILES))
        raise InvalidRequestError.for_field(
            "ResourceConfig.container_profile", profile, f"one of Iris's profiles: {names}"
        )
    return number


def convert_entrypoint(entrypoint: Entrypoint) -> IrisEntrypoint:
    """Iris's entrypoint for raw Iris submission: the callable called with its arguments
    (Iris pickles it and runs it as it is, without Fray's task wrapper), or the command.

    Fray's own ``submit`` does not use this: it runs callables through its task wrapper,
    which stores their return value for ``JobHandle.result()``.
    """
    call = entrypoint.callable_entrypoint
    if call is not None:
        return IrisEntrypoint.from_callable(call.callable, *call.args, **call.kwargs)
    assert entrypoint.command is not None  # an Entrypoint has exactly one of the two
    return IrisEntrypoint.from_command(*entrypoint.command)


def convert_environment(
    env: EnvironmentConfig | None, device: DeviceConfig | None = None
) -> EnvironmentSpec | None:
    """Iris's ``EnvironmentSpec``: the env vars of ``env`` over the device's default ones,
    ``env``'s pip packages and extras; ``None`` when there is neither an environment nor a
    device env var (Iris's defaults then apply).

    ``docker_image`` and ``workspace`` are not part of Iris's environment: the image goes to
    ``submit(task_image=...)`` and the workspace to the Iris client.
    """
    env_vars = dict(device.default_env_vars()) if device is not None else {}
    if env is not None:
        env_vars.update(env.env_vars)
    if env is None and not env_vars:
        return None
    return environment_spec(env, env_vars)


def map_iris_job_state(iris_state: Any) -> JobStatus:
    """Fray's status for an Iris job state, given as either line reports it: the
    ``job_pb2.JobState`` number (0.2.20's ``Job.state_only()``) or 0.2.227's
    ``iris.resources.state.JobState`` (a string enum, ``"running"`` ...).

    Pending and building are PENDING, killed is STOPPED, the failed states are FAILED;
    unknown states count as PENDING.
    """
    if isinstance(iris_state, str):
        iris_state = _STATE_NUMBERS.get(f"JOB_STATE_{iris_state.upper()}", -1)
    return job_status(iris_state)


def resolve_coscheduling(
    resources: ResourceConfig | DeviceConfig, replicas: int
) -> CoschedulingConfig | None:
    """How Iris places the ``replicas`` tasks of one job together, or ``None`` (one task,
    or a device that needs no gang).

    Takes a ``ResourceConfig`` (the 0.2.227 line) or its device alone (the 0.2.20 line).
    A TPU type of several VMs is grouped by slice (``tpu-name``); several GPU nodes by the
    topology level Iris picks for the GPU type (0.2.20: always ``leafgroup``).

    Raises:
        InvalidRequestError: ``resources`` is neither; GPU ``device_alternatives`` whose
            types Iris places on different topology levels.
    """
    config = _as_resources(resources)
    if replicas <= 1:
        return None
    device = config.device
    if isinstance(device, GpuConfig):
        return CoschedulingConfig(group_by=_gpu_gang_level(config, device, replicas))
    return to_coscheduling(config)


def _as_resources(resources: ResourceConfig | DeviceConfig) -> ResourceConfig:
    if isinstance(resources, ResourceConfig):
        return resources
    if isinstance(resources, CpuConfig | GpuConfig | TpuConfig):
        return ResourceConfig(device=resources)
    raise InvalidRequestError.for_field(
        "resources", resources, "a ResourceConfig, or a CpuConfig, GpuConfig or TpuConfig"
    )


def _gpu_gang_level(config: ResourceConfig, device: GpuConfig, replicas: int) -> str:
    """The one topology level every acceptable GPU type of ``config`` coschedules on."""
    variants = [device.variant, *(config.device_alternatives or ())]
    levels = {v: _iris.gpu_gang_level(v, device.count, replicas) for v in variants}
    if len(set(levels.values())) > 1:
        got = ", ".join(f"{variant}={level}" for variant, level in levels.items())
        raise InvalidRequestError.for_field(
            "ResourceConfig.device_alternatives",
            list(config.device_alternatives or ()),
            f"GPU types that share one coscheduling topology level; got {got}",
        )
    return levels[device.variant]


def wrap_nsys(entrypoint: IrisEntrypoint) -> IrisEntrypoint:
    """``entrypoint`` run under Nsight Systems (``iris.hooks.nsys_main``) when
    ``IRIS_NSYS_TASKS`` is set, else ``entrypoint`` itself.

    Nsight must be the task's first process (CUDA reads its injection library once, at
    ``cuInit``), and Iris does not add it, so the wrapper goes in front of the command at
    submit time; a task the variable does not select runs the command unchanged.

    Raises:
        InvalidRequestError: the variable is not ``first``, ``all`` or indices like ``0,3``.
        BackendUnavailableError: the variable is set and marin-iris is 0.2.20, which has no
            ``iris.hooks.nsys_main``.
    """
    tasks = os.environ.get(NSYS_TASKS_ENV)
    if not tasks:
        return entrypoint
    if not _NSYS_TASKS.fullmatch(tasks):
        raise InvalidRequestError.for_field(
            NSYS_TASKS_ENV, tasks, "first, all, or task indices separated by commas (0,3)"
        )
    _iris.newer_module("iris.hooks.nsys_main", f"{NSYS_TASKS_ENV} (Nsight profiling)")
    hook = ["$IRIS_PYTHON", "-m", "iris.hooks.nsys_main", "--tasks", tasks, "--"]
    command = list(entrypoint.command)
    if len(command) == 3 and command[:2] == ["bash", "-c"]:
        # A callable's command is a bash script: the wrapper goes inside it.
        inner = command[2].removeprefix("exec ")
        return _with_command(entrypoint, ["bash", "-c", f"exec {' '.join(hook)} {inner}"])
    return _with_command(entrypoint, [*hook, *command])


def wrap_multiprocess(
    entrypoint: IrisEntrypoint, resources: ResourceSpec | ResourceConfig, processes_per_task: int
) -> IrisEntrypoint:
    """``entrypoint`` under Iris's multi-GPU supervisor (``iris.jax.multigpu``), which runs
    ``processes_per_task`` processes per task, each with its share of the task's GPUs.

    Raises:
        InvalidRequestError: ``processes_per_task`` does not divide the GPU count, or the
            resources have no GPU.
        BackendUnavailableError: marin-iris is 0.2.20, which has no multi-GPU supervisor.
    """
    spec = to_resource_spec(resources) if isinstance(resources, ResourceConfig) else resources
    multigpu = _iris.newer_module("iris.jax.multigpu", "processes_per_task > 1")
    try:
        hook = multigpu.build_multigpu_hook(spec, processes_per_task)
    except ValueError as err:
        raise InvalidRequestError.for_field(
            "processes_per_task", processes_per_task, f"on Iris, {err}"
        ) from err
    return _with_command(entrypoint, hook.wrap(entrypoint.command))


def _with_command(entrypoint: IrisEntrypoint, command: list[str]) -> IrisEntrypoint:
    """``entrypoint`` with another command and the same files."""
    return IrisEntrypoint(
        command=command,
        workdir_files=entrypoint.workdir_files,
        workdir_file_refs=entrypoint.workdir_file_refs,
    )
