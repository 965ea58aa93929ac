"""The local backend: jobs in threads and guarded processes, actors in the driver.

Modules, one concern each: ``_client`` (the client: checks and the attempt hooks),
``_jobs`` (the handle), ``_threads`` (thread attempts and the pool), ``_processes``
(process attempts and their guardian ``_reaper.py``), ``_actors`` (in-process actors,
also the fake client's).
"""

from fray._bound import current_job_id, task_index
from fray.local._actors import InProcessActors, LocalActorGroup, LocalActorHandle, LocalActorMethod
from fray.local._client import LocalClient
from fray.local._jobs import LocalJobHandle, grace_seconds

__all__ = [
    "InProcessActors",
    "LocalActorGroup",
    "LocalActorHandle",
    "LocalActorMethod",
    "LocalClient",
    "LocalJobHandle",
    "current_job_id",
    "grace_seconds",
    "task_index",
]
