"""Fray's Iris backend: Fray jobs and actors on an Iris cluster (marin-iris), chosen by
``FRAY_CLIENT_SPEC=iris://host:port`` or, inside an Iris job, without a spec.

The names load on first use, from :mod:`fray_iris.predecessor` (which holds the
predecessor's ``fray.iris_backend`` names, fray-core's module of that name forwards to it,
and imports the others): every Iris task imports ``fray_iris._task``, which must not pull
in the client.
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
    value = getattr(importlib.import_module("fray_iris.predecessor"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
