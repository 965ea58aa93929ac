"""Binding what ``fray.current_client()``, ``fray.current_actor()`` and
``fray.current_job_id()`` answer inside code a backend runs (a job, an actor call)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from fray import _bound
from fray._actor import ActorContext
from fray.backend._output import LineSink, restore_output, route_output


@contextlib.contextmanager
def binding(
    client: Any = None,
    actor: ActorContext | None = None,
    job: tuple[str, int, Any] | None = None,
    output: tuple[LineSink, bool] | None = None,
) -> Iterator[None]:
    """Binds, for the ``with`` block, ``client`` and ``actor`` (where given; the other
    keeps its binding) and ``job``, the ``(job id, replica index, JobRecord or None)``
    whose code runs here (its record where the job lives in this process; a pair without
    it, as before, binds the same). Jobs submitted inside the block become that job's
    children. ``output``: also routes the block's ``print`` output into a sink (and echoes
    it where true), as :func:`capture_into` does, for one context manager instead of two on
    a job's path."""
    current = _bound.bound.get()
    token = _bound.bound.set(
        (current[0] if client is None else client, current[1] if actor is None else actor)
    )
    running = None if job is None else _bound.job.set(job)
    routed = output and route_output(*output)
    try:
        yield
    finally:
        if output is not None:
            restore_output(routed)
        if running is not None:
            _bound.job.reset(running)
        _bound.bound.reset(token)
