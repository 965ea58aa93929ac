"""The context variables behind ``current_client()``, ``current_actor()`` and
``current_job_id()``.

``bound`` holds ``(client, actor context)``: one variable, so a backend binds an actor call
with a single ``set`` and ``reset``; binding one half keeps the other. ``job`` holds
``(job id, replica index, record)`` while a job's code runs in this thread (the record where
the job lives in this process); a job's own process reads ``FRAY_JOB_ID`` and
``FRAY_TASK_INDEX`` instead.
"""

from __future__ import annotations

import contextvars
import os
from typing import TYPE_CHECKING, Any

from fray.environment_variables import FRAY_JOB_ID, FRAY_TASK_INDEX

if TYPE_CHECKING:
    from fray._actor import ActorContext

Bound = tuple[Any, "ActorContext | None"]
"""``(client, actor context)``: what ``current_client()`` (when set) and ``current_actor()``
answer."""

bound: contextvars.ContextVar[Bound] = contextvars.ContextVar("fray_bound", default=(None, None))
job: contextvars.ContextVar[tuple[str, int, Any] | None] = contextvars.ContextVar(
    "fray_job", default=None
)


def bind_client(client: Any) -> contextvars.Token[Bound]:
    """Binds ``client``, keeping the actor bound around it; returns the token."""
    return bound.set((client, bound.get()[1]))


def bind_actor(context: ActorContext | None) -> contextvars.Token[Bound]:
    """Binds ``context``, keeping the client bound around it; returns the token."""
    return bound.set((bound.get()[0], context))


def current_job_id() -> str | None:
    """The id of the job running this code, or ``None`` outside a job."""
    running = job.get()
    return running[0] if running is not None else os.environ.get(FRAY_JOB_ID)


def task_index() -> int:
    """This replica's index within its job (0 for single-replica jobs and the driver)."""
    running = job.get()
    return running[1] if running is not None else int(os.environ.get(FRAY_TASK_INDEX, "0"))
