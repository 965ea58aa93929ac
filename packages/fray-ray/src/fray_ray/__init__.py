"""Fray's Ray backend: :class:`RayClient` runs Fray jobs and actors on a Ray cluster.

``FRAY_CLIENT_SPEC=ray`` (or ``ray?namespace=N``, ``ray://host:port``) selects it; code
already running inside Ray gets it from ``fray.current_client()`` without a spec.
"""

from fray_ray._actors import RayActorFuture, RayActorGroup, RayActorHandle
from fray_ray._client import RayClient, RayJobHandle
from fray_ray._convert import HEAD_NODE_RESOURCE

__all__ = [
    "HEAD_NODE_RESOURCE",
    "RayActorFuture",
    "RayActorGroup",
    "RayActorHandle",
    "RayClient",
    "RayJobHandle",
]
