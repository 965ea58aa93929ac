"""Fray: run ML jobs and actors on a laptop, a Ray cluster or an Iris cluster.

    from fray import Entrypoint, JobRequest, ResourceConfig, current_client, wait_all

    client = current_client()            # local unless FRAY_CLIENT_SPEC or a cluster says otherwise
    hello = Entrypoint.from_callable(print, ["hi"])
    job = client.submit(JobRequest(name="hello", entrypoint=hello))
    wait_all([job])

``import fray`` stays light: the request types (pydantic) and the backends (ray, jax, iris,
fsspec) load only when first used.
"""

from __future__ import annotations

import importlib
import warnings
from typing import TYPE_CHECKING, Any

from fray._actor import ActorContext, HostedActor, current_actor
from fray._bound import current_job_id, task_index
from fray._wait import wait_all

# Imported now, not on first use: importing a submodule binds its name in this package,
# and ``fray.current_client`` must stay the function (the module's own name rebinds it).
from fray.current_client import current_client, set_current_client
from fray.errors import (
    ActorDiedError,
    ActorError,
    ActorUnavailableError,
    BackendUnavailableError,
    FrayError,
    InvalidRequestError,
    JobAlreadyExistsError,
    JobFailedError,
    JobNotFoundError,
    JobTimeoutError,
)

if TYPE_CHECKING:
    from fray._pool import ActorPool
    from fray._pool_parts import MemberResult, MemberState, PoolState, PoolStatus
    from fray._protocols import ActorFuture, ActorGroup, ActorHandle, ActorMethod, Client, JobHandle
    from fray._resources import ANY_REGION
    from fray._types import (
        ActorConfig,
        CpuConfig,
        DeviceConfig,
        Entrypoint,
        EnvironmentConfig,
        GpuConfig,
        JobInfo,
        JobRequest,
        JobStatus,
        ResourceConfig,
        TpuConfig,
    )
    from fray.local import LocalClient

__version__ = "0.1.0"

__all__ = [
    "ANY_REGION",
    "ActorConfig",
    "ActorContext",
    "ActorDiedError",
    "ActorError",
    "ActorFuture",
    "ActorGroup",
    "ActorHandle",
    "ActorMethod",
    "ActorPool",
    "ActorUnavailableError",
    "BackendUnavailableError",
    "Client",
    "CpuConfig",
    "DeviceConfig",
    "Entrypoint",
    "EnvironmentConfig",
    "FrayError",
    "GpuConfig",
    "HostedActor",
    "InvalidRequestError",
    "JobAlreadyExistsError",
    "JobFailedError",
    "JobHandle",
    "JobInfo",
    "JobNotFoundError",
    "JobRequest",
    "JobStatus",
    "JobTimeoutError",
    "LocalClient",
    "MemberResult",
    "MemberState",
    "PoolState",
    "PoolStatus",
    "ResourceConfig",
    "TpuConfig",
    "current_actor",
    "current_client",
    "current_job_id",
    "set_current_client",
    "task_index",
    "wait_all",
]

# Loaded on first use, from the first of these modules that has it: the request types pull in
# pydantic, the backends much more.
_LAZY = (
    "fray._resources",
    "fray._types",
    "fray._protocols",
    "fray._pool",
    "fray._pool_parts",
    "fray.local",
)

# Names that moved off the top level: they keep working for one release, with a warning
# naming their place now (see docs/migrating-from-fray-v2.md).
_MOVED = {
    **dict.fromkeys(("LocalActorHandle", "LocalActorMethod", "LocalJobHandle"), "fray.local"),
    **dict.fromkeys(
        ("ClientSpec", "client_from_spec", "parse_client_spec", "register_backend"),
        "fray.backend",
    ),
    **dict.fromkeys(("JobFailed", "JobAlreadyExists"), "fray.errors"),
    **dict.fromkeys(
        (
            "BinaryEntrypoint",
            "CallableEntrypoint",
            "DeviceKind",
            "GpuType",
            "TpuTopologyInfo",
            "TpuType",
            "create_environment",
            "get_tpu_topology",
            "parse_memory",
        ),
        "fray.types",
    ),
}


def __getattr__(name: str) -> Any:
    if name in __all__:
        for module in map(importlib.import_module, _LAZY):
            if hasattr(module, name):
                value = globals()[name] = getattr(module, name)
                return value
    moved = _MOVED.get(name)
    if moved is None:
        raise AttributeError(f"module 'fray' has no attribute {name!r}")
    warnings.warn(
        f"fray.{name} moved to {moved}.{name}; import it from there (the old name goes in "
        "the next release)",
        DeprecationWarning,
        stacklevel=2,
    )
    return getattr(importlib.import_module(moved), name)


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
