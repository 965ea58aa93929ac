# pyright: standard
"""The predecessor's ``fray.iris_backend`` names that belong to the Iris backend, which
fray-core's ``fray.iris_backend`` forwards to: ``FrayIrisClient`` (an
:class:`~fray_iris.IrisClient` built the predecessor's way), the job and actor handles, and
the helpers its users call to build requests for raw Iris (``convert_resources``...), taking
what either predecessor line passes; ``fray_iris`` loads its other names from here too. Not
on the submit path.
"""

from __future__ import annotations

import importlib
import os
import re
from pathlib import Path
from typing import Any

from iris.cluster.types import Entrypoint as IrisEntrypoint
from iris.cluster.types import EnvironmentSpec, ResourceSpec

from fray import (
    CpuConfig,
    DeviceConfig,
    Entrypoint,
    EnvironmentConfig,
    GpuConfig,
    ResourceConfig,
    TpuConfig,
)
from fray.errors import BackendUnavailableError, InvalidRequestError
from fray_iris import _convert as convert

# fray_iris's own name (it loads it from here), not the predecessor's.
from fray_iris._actors import IrisActorFuture as IrisActorFuture
from fray_iris._actors import IrisActorGroup, IrisActorHandle
from fray_iris._client import IrisClient, IrisJobHandle
from fray_iris._iris_0_2_20 import NEWER

__all__ = [
    "NSYS_TASKS_ENV",
    "FrayIrisClient",
    "IrisActorGroup",
    "IrisActorHandle",
    "IrisJobHandle",
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
"""Selects the tasks :func:`wrap_nsys` runs under Nsight Systems: ``first``, ``all``, or
task indices separated by commas."""

_NSYS_TASKS = re.compile(r"first|all|\d+(,\d+)*")


class FrayIrisClient(IrisClient):
    """An :class:`~fray_iris.IrisClient` built the predecessor's way (same arguments)."""

    def __init__(
        self,
        controller_address: str,
        workspace: str | Path | None = None,
        bundle_id: str | None = None,
    ) -> None:
        super().__init__(controller_address, workspace=workspace, bundle_id=bundle_id)

    @staticmethod
    def from_iris_client(iris_client: Any) -> FrayIrisClient:
        """Wraps an existing ``iris.client.IrisClient`` (not shut down with this client)."""
        client = FrayIrisClient.__new__(FrayIrisClient)
        IrisClient.__init__(client, iris_client=iris_client)
        return client


# The predecessor's names for fray-iris's own conversions.
convert_resources = convert.to_resource_spec
convert_constraints = convert.to_constraints
convert_container_profile = convert.to_container_profile


map_iris_job_state = convert.job_status  # a job_pb2 number, a name, or 0.2.227's JobState


def convert_entrypoint(entrypoint: Entrypoint) -> IrisEntrypoint:
    """Iris's entrypoint: the callable as it is (without Fray's task wrapper), or the command."""
    call = entrypoint.callable_entrypoint
    if call is not None:
        return IrisEntrypoint.from_callable(call.callable, *call.args, **call.kwargs)
    assert entrypoint.command is not None  # an Entrypoint has exactly one of the two
    return IrisEntrypoint.from_command(*entrypoint.command)


def convert_environment(
    env: EnvironmentConfig | None, device: DeviceConfig | None = None
) -> EnvironmentSpec | None:
    """Iris's ``EnvironmentSpec``: ``env`` over the device's default variables, or ``None``."""
    env_vars = {**(device.default_env_vars() if device else {}), **(env.env_vars if env else {})}
    return convert.to_environment(env, env_vars) if env is not None or env_vars else None


def resolve_coscheduling(resources: ResourceConfig | DeviceConfig, replicas: int) -> Any:
    """How Iris places ``replicas`` tasks together, for a ``ResourceConfig`` or a device."""
    if not isinstance(resources, ResourceConfig):
        if not isinstance(resources, CpuConfig | GpuConfig | TpuConfig):
            raise InvalidRequestError.for_field(
                "resources", resources, "a ResourceConfig, or a CpuConfig, GpuConfig or TpuConfig"
            )
        resources = ResourceConfig(device=resources)
    return convert.to_coscheduling(resources, replicas) if replicas > 1 else None


def wrap_nsys(entrypoint: IrisEntrypoint) -> IrisEntrypoint:
    """``entrypoint`` under Nsight Systems (marin-iris 0.2.227) if ``IRIS_NSYS_TASKS`` is set."""
    tasks = os.environ.get(NSYS_TASKS_ENV)
    if not tasks:
        return entrypoint
    if not _NSYS_TASKS.fullmatch(tasks):
        raise InvalidRequestError.for_field(
            NSYS_TASKS_ENV, tasks, "first, all, or task indices separated by commas (0,3)"
        )
    _newer_module("iris.hooks.nsys_main", f"{NSYS_TASKS_ENV} (Nsight profiling)")
    hook = ["$IRIS_PYTHON", "-m", "iris.hooks.nsys_main", "--tasks", tasks, "--"]
    command = list(entrypoint.command)
    if len(command) == 3 and command[:2] == ["bash", "-c"]:  # a callable's bash script
        inner = command[2].removeprefix("exec ")
        return _with_command(entrypoint, ["bash", "-c", f"exec {' '.join(hook)} {inner}"])
    return _with_command(entrypoint, [*hook, *command])


def wrap_multiprocess(
    entrypoint: IrisEntrypoint, resources: ResourceSpec | ResourceConfig, processes_per_task: int
) -> IrisEntrypoint:
    """``entrypoint`` under Iris's multi-GPU supervisor (marin-iris 0.2.227): that many
    processes per task, each with its share of the GPUs."""
    spec = (
        convert.to_resource_spec(resources) if isinstance(resources, ResourceConfig) else resources
    )
    multigpu = _newer_module("iris.jax.multigpu", "processes_per_task > 1")
    try:
        hook = multigpu.build_multigpu_hook(spec, processes_per_task)
    except ValueError as err:
        raise InvalidRequestError.for_field(
            "processes_per_task", processes_per_task, f"on Iris, {err}"
        ) from err
    return _with_command(entrypoint, hook.wrap(entrypoint.command))


def _with_command(entrypoint: IrisEntrypoint, command: list[str]) -> IrisEntrypoint:
    """``entrypoint`` running ``command`` instead, with the same files."""
    return IrisEntrypoint(
        command=command,
        workdir_files=entrypoint.workdir_files,
        workdir_file_refs=entrypoint.workdir_file_refs,
    )


def _newer_module(name: str, what: str) -> Any:
    """Iris's module ``name``, or why the installed marin-iris cannot do ``what``."""
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as err:
        raise BackendUnavailableError(
            f"{what} needs {name}, which marin-iris {convert.IRIS_VERSION} does not have: "
            f"install {NEWER}"
        ) from err
