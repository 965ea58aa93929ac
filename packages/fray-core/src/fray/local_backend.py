"""The local backend at the predecessor's ``fray.local_backend`` path: the same objects as
``fray.local``'s."""

from __future__ import annotations

import logging

from fray._actor import ActorContext, HostedActor
from fray._protocols import ActorFuture, ActorGroup, ActorHandle
from fray._resources import ResourceConfig
from fray._types import (
    ActorConfig,
    BinaryEntrypoint,
    CallableEntrypoint,
    EnvironmentConfig,
    JobRequest,
    JobStatus,
)
from fray.errors import ActorUnavailableError
from fray.local import (
    LocalActorGroup,
    LocalActorHandle,
    LocalActorMethod,
    LocalClient,
    LocalJobHandle,
)

__all__ = [
    "ActorConfig",
    "ActorContext",
    "ActorFuture",
    "ActorGroup",
    "ActorHandle",
    "ActorUnavailableError",
    "BinaryEntrypoint",
    "CallableEntrypoint",
    "EnvironmentConfig",
    "HostedActor",
    "JobRequest",
    "JobStatus",
    "LocalActorGroup",
    "LocalActorHandle",
    "LocalActorMethod",
    "LocalClient",
    "LocalJobHandle",
    "ResourceConfig",
    "logger",
]

logger = logging.getLogger("fray.local")
