"""Fray's Iris backend: run Fray jobs and actors on an Iris cluster (marin-iris).

    from fray import Entrypoint, JobRequest
    from fray_iris import IrisClient

    with IrisClient("127.0.0.1:10000") as client:
        job = client.submit(JobRequest(name="hello", entrypoint=Entrypoint.from_callable(print)))
        job.wait()

``FRAY_CLIENT_SPEC=iris://host:port`` selects this backend for ``fray.current_client()``;
inside an Iris job it is chosen without a spec. The names load on first use: every Iris task
imports ``fray_iris._task``, which must not pull in the Iris client.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fray_iris._actors import IrisActorFuture, IrisActorGroup, IrisActorHandle
    from fray_iris._client import IrisClient, IrisJobHandle
    from fray_iris._predecessor import (
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

# Where each name lives: the predecessor's names (``fray.iris_backend``) in _predecessor.
_LAZY = dict.fromkeys(__all__, "fray_iris._predecessor")
_LAZY.update(
    IrisActorFuture="fray_iris._actors",
    IrisActorGroup="fray_iris._actors",
    IrisActorHandle="fray_iris._actors",
    IrisClient="fray_iris._client",
    IrisJobHandle="fray_iris._client",
)


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'fray_iris' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
