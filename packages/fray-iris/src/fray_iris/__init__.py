"""Fray's Iris backend: run Fray jobs and actors on an Iris cluster (marin-iris).

    from fray import Entrypoint, JobRequest
    from fray_iris import IrisClient

    with IrisClient("127.0.0.1:10000") as client:
        job = client.submit(JobRequest(name="hello", entrypoint=Entrypoint.from_callable(print)))
        job.wait()

``FRAY_CLIENT_SPEC=iris://host:port`` selects this backend for ``fray.current_client()``;
inside an Iris job it is chosen without any spec, using the job's own Iris context.

The names below load on first use: Iris tasks import ``fray_iris._task`` on every start, and
that must not pull in the Iris client.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fray_iris._actor_handle import IrisActorFuture, IrisActorHandle
    from fray_iris._actors import IrisActorGroup
    from fray_iris._client import IrisClient
    from fray_iris._convert import job_status, to_iris_request, to_resource_spec
    from fray_iris._jobs import IrisJobHandle
    from fray_iris._predecessor import FrayIrisClient

__all__ = [
    "FrayIrisClient",
    "IrisActorFuture",
    "IrisActorGroup",
    "IrisActorHandle",
    "IrisClient",
    "IrisJobHandle",
    "job_status",
    "to_iris_request",
    "to_resource_spec",
]

_LAZY = {
    "FrayIrisClient": "fray_iris._predecessor",
    "IrisActorFuture": "fray_iris._actor_handle",
    "IrisActorGroup": "fray_iris._actors",
    "IrisActorHandle": "fray_iris._actor_handle",
    "IrisClient": "fray_iris._client",
    "IrisJobHandle": "fray_iris._jobs",
    "job_status": "fray_iris._convert",
    "to_iris_request": "fray_iris._convert",
    "to_resource_spec": "fray_iris._convert",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'fray_iris' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
