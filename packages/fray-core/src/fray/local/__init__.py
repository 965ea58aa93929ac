"""The local backend: jobs in threads and guarded processes, actors in the driver.

Modules, one concern each: ``_client`` (the client, its retry loop and termination),
``_jobs`` (the record and handle), ``_threads`` (thread jobs), ``_processes`` (process
jobs and their guardian ``_reaper.py``), ``_actors`` (actors, handles, groups).
"""

from fray.local._actors import LocalActorGroup, LocalActorHandle, LocalActorMethod
from fray.local._client import LocalClient
from fray.local._jobs import LocalJobHandle, current_job_id, grace_seconds, task_index

__all__ = [
    "LocalActorGroup",
    "LocalActorHandle",
    "LocalActorMethod",
    "LocalClient",
    "LocalJobHandle",
    "current_job_id",
    "grace_seconds",
    "task_index",
]
