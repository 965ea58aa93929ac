"""The Iris backend at the predecessor's ``fray.iris_backend`` path, loaded on first use:
fray-iris's client, handles and request converters (``FrayIrisClient``,
``convert_resources``...), and Fray's own types under the predecessor's names
(``FrayEntrypoint`` is ``fray.Entrypoint``). Fray's types resolve without fray-iris; the
others then raise ``BackendUnavailableError`` with the install command.
"""

from __future__ import annotations

import importlib
import logging
from typing import TYPE_CHECKING, Any

from fray.errors import BackendUnavailableError

if TYPE_CHECKING:
    from fray._actor import ActorContext, HostedActor
    from fray._protocols import ActorFuture, ActorHandle
    from fray._resources import (
        ANY_REGION,
        CpuConfig,
        DeviceConfig,
        GpuConfig,
        ResourceConfig,
        TpuConfig,
    )
    from fray._types import ActorConfig, EnvironmentConfig, JobRequest, JobStatus
    from fray._types import Entrypoint as FrayEntrypoint
    from fray.backend._wire import CallFuture as OperationFuture
    from fray.errors import ActorUnavailableError
    from fray.errors import JobAlreadyExists as FrayJobAlreadyExists
    from fray_iris import (
        NSYS_TASKS_ENV,
        FrayIrisClient,
        IrisActorGroup,
        IrisActorHandle,
        IrisJobHandle,
        convert_constraints,
        convert_container_profile,
        convert_entrypoint,
        convert_environment,
        convert_resources,
        map_iris_job_state,
        resolve_coscheduling,
        wrap_multiprocess,
        wrap_nsys,
    )

logger = logging.getLogger(__name__)

# Fray's own objects, by the predecessor's name: (module, name there). ``OperationFuture``
# is the future ``method.submit()`` returns.

_FRAY: dict[str, tuple[str, str]] = {
    "ANY_REGION": ("fray._resources", "ANY_REGION"),
    "ActorConfig": ("fray._types", "ActorConfig"),
    "ActorContext": ("fray._actor", "ActorContext"),
    "ActorFuture": ("fray._protocols", "ActorFuture"),
    "ActorHandle": ("fray._protocols", "ActorHandle"),
    "ActorUnavailableError": ("fray.errors", "ActorUnavailableError"),
    "CpuConfig": ("fray._resources", "CpuConfig"),
    "DeviceConfig": ("fray._resources", "DeviceConfig"),
    "EnvironmentConfig": ("fray._types", "EnvironmentConfig"),
    "FrayEntrypoint": ("fray._types", "Entrypoint"),
    "FrayJobAlreadyExists": ("fray.errors", "JobAlreadyExists"),
    "GpuConfig": ("fray._resources", "GpuConfig"),
    "HostedActor": ("fray._actor", "HostedActor"),
    "JobRequest": ("fray._types", "JobRequest"),
    "JobStatus": ("fray._types", "JobStatus"),
    "OperationFuture": ("fray.backend._wire", "CallFuture"),
    "ResourceConfig": ("fray._resources", "ResourceConfig"),
    "TpuConfig": ("fray._resources", "TpuConfig"),
}

__all__ = [
    "ANY_REGION",
    "NSYS_TASKS_ENV",
    "ActorConfig",
    "ActorContext",
    "ActorFuture",
    "ActorHandle",
    "ActorUnavailableError",
    "CpuConfig",
    "DeviceConfig",
    "EnvironmentConfig",
    "FrayEntrypoint",
    "FrayIrisClient",
    "FrayJobAlreadyExists",
    "GpuConfig",
    "HostedActor",
    "IrisActorGroup",
    "IrisActorHandle",
    "IrisJobHandle",
    "JobRequest",
    "JobStatus",
    "OperationFuture",
    "ResourceConfig",
    "TpuConfig",
    "convert_constraints",
    "convert_container_profile",
    "convert_entrypoint",
    "convert_environment",
    "convert_resources",
    "logger",
    "map_iris_job_state",
    "resolve_coscheduling",
    "wrap_multiprocess",
    "wrap_nsys",
]


def __getattr__(name: str) -> Any:
    if name in _FRAY:
        module, attr = _FRAY[name]
        value = getattr(importlib.import_module(module), attr)
    elif name in __all__:  # every other name is one of fray_iris's (public) names
        value = getattr(_import_fray_iris(name), name)
    else:
        raise AttributeError(f"module 'fray.iris_backend' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


def _import_fray_iris(name: str) -> Any:
    """``fray_iris``, or the install hint when fray-iris (or Iris) is missing."""
    try:
        value = importlib.import_module("fray_iris")
        getattr(value, name)  # loads the module behind the name: Iris may be missing
        return value
    except ImportError as err:
        if err.name is not None and err.name.split(".")[0] in ("fray_iris", "iris"):
            raise BackendUnavailableError(
                f"fray.iris_backend.{name} needs fray-iris, which is not installed. "
                'Install it with: pip install "fray-core[iris]"'
            ) from err
        raise
