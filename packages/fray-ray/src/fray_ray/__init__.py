"""Fray's Ray backend: :class:`RayClient` runs Fray jobs and actors on a Ray cluster.

``FRAY_CLIENT_SPEC=ray`` (or ``ray?namespace=N``, ``ray://host:port``) selects it; code
already running inside Ray gets it from ``fray.current_client()`` without a spec.
:class:`KindClient` and :class:`JobKind` are the seam fray-tpu's TPU gangs build on, and
:mod:`fray_ray.errors` says what a Ray error means for every Fray layer on Ray.
"""

from fray_ray._actors import RayActorFuture, RayActorGroup, RayActorHandle
from fray_ray._client import RayClient
from fray_ray._convert import HEAD_NODE_RESOURCE, environment_runtime_env
from fray_ray._kinds import JobKind, KindClient, RayJobHandle

__all__ = [
    "HEAD_NODE_RESOURCE",
    "JobKind",
    "KindClient",
    "RayActorFuture",
    "RayActorGroup",
    "RayActorHandle",
    "RayClient",
    "RayJobHandle",
    "environment_runtime_env",
]
