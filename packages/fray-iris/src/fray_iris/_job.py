# pyright: standard
"""What fray-iris keeps of one Iris job (:class:`IrisJob`, a record's ``data`` for its whole
life) and what Iris's view of a job says to its record (:func:`observed`)."""

from __future__ import annotations

import collections
import dataclasses
import time
from typing import Any

from iris.cluster.types import JobName

from fray import JobStatus
from fray.backend import Observed
from fray_iris import _convert as convert
from fray_iris._views import JobView, TaskView


@dataclasses.dataclass(slots=True)
class IrisJob:
    """A record's ``data`` for its whole life: what to submit, then what Iris said of the job.

    Attributes:
        entrypoint: What Iris runs, until it is submitted (``None`` for a job found by id).
        submit_args: ``IrisClient.submit``'s other arguments but the name (until then).
        wire: The Iris job id, once Iris has the job (``None`` before).
        pending_reason: Iris's last reason for not placing the job.
        pending_at: When that reason was asked for (monotonic seconds).
        lines: Its lines in the order first seen, without and with its children's (Iris
            returns every line so far on each fetch; a child's late line is added).
        seen: How often each line's key was seen, per entry of ``lines``.
        new_at: When a fetch last brought a new line (epoch seconds).
    """

    entrypoint: Any = None
    submit_args: dict[str, Any] = dataclasses.field(default_factory=dict)
    wire: JobName | None = None
    pending_reason: str | None = None
    pending_at: float = 0.0
    lines: dict[bool, list[str]] = dataclasses.field(default_factory=lambda: {False: [], True: []})
    seen: dict[bool, collections.Counter[Any]] = dataclasses.field(default_factory=dict)
    new_at: float = 0.0

    @property
    def iris_id(self) -> JobName:
        """The Iris job id (only asked for once the job was submitted)."""
        if self.wire is None:
            raise RuntimeError("the job has not been submitted to Iris yet")
        return self.wire

    def merge(self, children: bool, entries: list[tuple[Any, str]]) -> list[str]:
        """Adds the lines of a fresh fetch not seen before; returns every line seen."""
        seen = self.seen.setdefault(children, collections.Counter())
        fresh: collections.Counter[Any] = collections.Counter()
        for key, text in entries:
            fresh[key] += 1
            if fresh[key] > seen[key]:
                seen[key] += 1
                self.lines[children].append(text)
                self.new_at = time.time()
        return self.lines[children]


def observed(
    view: JobView,
    tasks: list[TaskView],
    status: JobStatus | None = None,
    cause: BaseException | None = None,
    error: str | None = None,
) -> Observed:
    """What Iris says of a job, for its record: counts, when it started, its replicas, the
    exit code (a failed task's, else the job's) and, once it ended, its final ``status``
    (with the ``cause`` and ``error`` of a failure); its tasks say how many attempts began."""
    codes = [task.exit_code for task in tasks if task.exit_code]
    return Observed(
        status=status,
        attempts=max([convert.attempts(view), *(task.attempts for task in tasks)]),
        failures=view.failures,
        preemptions=view.preemptions,
        replicas=len(tasks) or view.tasks or None,
        started_at=view.started_at,
        exit_code=codes[0] if codes else view.exit_code,
        error=error,
        cause=cause,
    )
