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

from typing import TYPE_CHECKING, Any

from fray._actor import ActorContext, HostedActor, current_actor
from fray._client import ClientSpec, client_from_spec, parse_client_spec, register_backend
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
    JobAlreadyExists,
    JobAlreadyExistsError,
    JobFailed,
    JobFailedError,
    JobNotFoundError,
    JobTimeoutError,
)

if TYPE_CHECKING:
    from fray._compat import DeviceKind, GpuType, TpuTopologyInfo, TpuType, get_tpu_topology
    from fray._protocols import (
        ActorFuture,
        ActorGroup,
        ActorHandle,
        ActorMethod,
        Client,
        JobHandle,
    )
    from fray._resources import ANY_REGION
    from fray._types import (
        ActorConfig,
        BinaryEntrypoint,
        CallableEntrypoint,
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
        create_environment,
        parse_memory,
    )
    from fray.local import (
        LocalActorHandle,
        LocalActorMethod,
        LocalClient,
        LocalJobHandle,
        current_job_id,
        task_index,
    )

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
    "ActorUnavailableError",
    "BackendUnavailableError",
    "BinaryEntrypoint",
    "CallableEntrypoint",
    "Client",
    "ClientSpec",
    "CpuConfig",
    "DeviceConfig",
    "DeviceKind",
    "Entrypoint",
    "EnvironmentConfig",
    "FrayError",
    "GpuConfig",
    "GpuType",
    "HostedActor",
    "InvalidRequestError",
    "JobAlreadyExists",
    "JobAlreadyExistsError",
    "JobFailed",
    "JobFailedError",
    "JobHandle",
    "JobInfo",
    "JobNotFoundError",
    "JobRequest",
    "JobStatus",
    "JobTimeoutError",
    "LocalActorHandle",
    "LocalActorMethod",
    "LocalClient",
    "LocalJobHandle",
    "ResourceConfig",
    "TpuConfig",
    "TpuTopologyInfo",
    "TpuType",
    "client_from_spec",
    "create_environment",
    "current_actor",
    "current_client",
    "current_job_id",
    "get_tpu_topology",
    "parse_client_spec",
    "parse_memory",
    "register_backend",
    "set_current_client",
    "task_index",
    "wait_all",
]

# Loaded on first use: the request types pull in pydantic, the backends much more.
_LAZY = {
    **dict.fromkeys(
        (
            "LocalActorHandle",
            "LocalActorMethod",
            "LocalActorHandle",
            "LocalActorMethod",
            "LocalClient",
            "LocalJobHandle",
            "LocalJobHandle",
            "current_job_id",
            "task_index",
        ),
        "fray.local",
    ),
    **dict.fromkeys(
        ("DeviceKind", "GpuType", "TpuTopologyInfo", "TpuType", "get_tpu_topology"),
        "fray._compat",
    ),
    "ANY_REGION": "fray._resources",
    **dict.fromkeys(
        ("ActorFuture", "ActorGroup", "ActorHandle", "ActorMethod", "Client", "JobHandle"),
        "fray._protocols",
    ),
    **dict.fromkeys(
        (
            "ActorConfig",
            "BinaryEntrypoint",
            "CallableEntrypoint",
            "CpuConfig",
            "DeviceConfig",
            "Entrypoint",
            "EnvironmentConfig",
            "GpuConfig",
            "JobInfo",
            "JobRequest",
            "JobStatus",
            "ResourceConfig",
            "TpuConfig",
            "create_environment",
            "parse_memory",
        ),
        "fray._types",
    ),
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'fray' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})
