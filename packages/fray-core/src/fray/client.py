"""The client protocols, errors and ``wait_all`` at the predecessor's ``fray.client`` path:
the same objects as ``fray``'s own."""

from __future__ import annotations

import logging

from fray._actor import HostedActor
from fray._protocols import ActorGroup, ActorHandle, Client, JobHandle
from fray._resources import ResourceConfig
from fray._types import ActorConfig, EnvironmentConfig, JobRequest, JobStatus
from fray._wait import wait_all
from fray.errors import JobAlreadyExists, JobFailed

__all__ = [
    "ActorConfig",
    "ActorGroup",
    "ActorHandle",
    "Client",
    "EnvironmentConfig",
    "HostedActor",
    "JobAlreadyExists",
    "JobFailed",
    "JobHandle",
    "JobRequest",
    "JobStatus",
    "ResourceConfig",
    "logger",
    "wait_all",
]

logger = logging.getLogger("fray.client")
