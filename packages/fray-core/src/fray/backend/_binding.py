"""Binding what ``fray.current_client()``, ``fray.current_actor()`` and
``fray.current_job_id()`` answer inside code a backend runs (a job, an actor call)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from fray import _bound
from fray._actor import ActorContext


@contextlib.contextmanager
def binding(
    client: Any = None,
    actor: ActorContext | None = None,
    job: tuple[str, int] | tuple[str, int, Any] | None = None,
) -> Iterator[None]:
    """Binds, for the ``with`` block, ``client`` and ``actor`` (where given; the other
    keeps its binding) and ``job``, the ``(job id, replica index)`` whose code runs here,
    with its :class:`JobRecord` third where the job lives in this process. Jobs submitted
    inside the block become that job's children."""
    current = _bound.bound.get()
    token = _bound.bound.set(
        (current[0] if client is None else client, current[1] if actor is None else actor)
    )
    running = None
    if job is not None:
        running = _bound.job.set((job[0], job[1], job[2] if len(job) > 2 else None))
    try:
        yield
    finally:
        if running is not None:
            _bound.job.reset(running)
        _bound.bound.reset(token)
