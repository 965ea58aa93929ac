"""Fray's Iris backend: Fray jobs and actors on an Iris cluster (marin-iris), chosen by
``FRAY_CLIENT_SPEC=iris://host:port`` or, inside an Iris job, without a spec.

The names load on first use: every Iris task imports ``fray_iris._task``, which must not
pull in the client. :mod:`fray_iris.predecessor` holds the predecessor's
``fray.iris_backend`` names (fray-core's module of that name forwards to it).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fray_iris._actors import IrisActorFuture, IrisActorGroup, IrisActorHandle
    from fray_iris._client import IrisClient, IrisJobHandle
    from fray_iris.predecessor import (
        NSYS_TASKS_ENV,
        FrayIrisClient,
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

# Each public name, by the module that defines it.
_HOMES = {
    "IrisActorFuture": "fray_iris._actors",
    "IrisActorGroup": "fray_iris._actors",
    "IrisActorHandle": "fray_iris._actors",
    "IrisClient": "fray_iris._client",
    "IrisJobHandle": "fray_iris._client",
}

__all__ = [
    "NSYS_TASKS_ENV",
    "FrayIrisClient",
    "IrisActorFuture",
    "IrisActorGroup",
    "IrisActorHandle",
    "IrisClient",
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


def __getattr__(name: str) -> Any:
    """Loads a public name from its module on first use."""
    if name not in __all__:
        raise AttributeError(f"module 'fray_iris' has no attribute {name!r}")
    module = _HOMES.get(name, "fray_iris.predecessor")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
