# pyright: standard
"""What fray-iris keeps of one Iris job (:class:`IrisJob`, a record's ``data`` for its whole
life) and what Iris's view of a job says to its record (:func:`observed`)."""

from __future__ import annotations

import collections
import dataclasses
import enum
import logging
import time
from typing import Any

from iris.cluster.types import JobName

from fray.backend import JobRecord, Observed
from fray_iris import _convert as convert
from fray_iris._views import END_OF_OUTPUT, STREAMS, JobView, LogLine, TaskView, fray_job_id

logger = logging.getLogger("fray.iris")

# Iris's worker sends a task's last lines after its end. Each of Fray's tasks ends its output
# with a marker, waited for this long after the job's end; a task that cannot write one (a
# command, a task Iris killed) is given LOGS_GRACE_S.
LOGS_WAIT_S = 30.0
LOGS_GRACE_S = 2.0
_ENDED_ITSELF = ("succeeded", "failed")  # task states where its own code ran to its end


class Output(enum.Enum):
    """Whether a job's lines on Iris are whole."""

    OPEN = "open"  # it runs, or its last lines may still come
    WHOLE = "whole"  # each task showed its end-of-output marker
    CUT = "cut"  # some task's marker did not come (or cannot): a warning said so


@dataclasses.dataclass(slots=True)
class IrisJob:
    """A record's ``data`` for its whole life: what to submit, then what Iris said of the job.

    Attributes:
        entrypoint: What Iris runs, until it is submitted (``None`` for a job found by id).
        submit_args: ``IrisClient.submit``'s other arguments but the name (until then).
        wire: The Iris job id, once Iris has the job (``None`` before).
        pending_reason: Iris's last reason for not placing the job.
        pending_at: When that reason was asked for (monotonic seconds).
        own: Its lines, in the order first seen, by (key, how often a fetch had that key):
            Iris returns every line so far on each fetch, and a late line is added.
        family: Its lines and its descendants', the same way.
        tasks: Its tasks as Iris reported them when the job ended.
        ends: ``(task index, attempt, stream)`` of each end-of-output marker seen.
        output: Whether its lines are whole.
    """

    entrypoint: Any = None
    submit_args: dict[str, Any] = dataclasses.field(default_factory=dict)
    wire: JobName | None = None
    pending_reason: str | None = None
    pending_at: float = 0.0
    own: dict[tuple[Any, int], str] = dataclasses.field(default_factory=dict)
    family: dict[tuple[Any, int], str] = dataclasses.field(default_factory=dict)
    tasks: list[TaskView] = dataclasses.field(default_factory=list)
    ends: set[tuple[int, int, str]] = dataclasses.field(default_factory=set)
    output: Output = Output.OPEN

    def take(self, job: JobRecord, entries: list[LogLine], children: bool) -> list[Any]:
        """Its lines (``[i] `` first), if asked its descendants' (``[<id>] `` first), with
        keys; its tasks' end-of-output markers are noted, and nobody's is kept."""
        assert self.wire is not None  # lines are read once Iris has the job
        out: list[Any] = []
        wire = self.wire.to_wire()
        for entry in entries:
            owner, _, index = entry.task.rpartition("/")
            text, marker, _ = entry.text.partition(END_OF_OUTPUT)
            if marker and owner == wire:
                self.ends.add((int(index), entry.attempt, entry.stream))
            if marker and not text:
                continue
            if owner == wire:
                out.append((entry, f"[{index}] {text}" if job.replicas > 1 else text))
            elif children:
                out.append((entry, f"[{fray_job_id(owner)}] {text}"))
        return out

    def merge(self, lines: list[tuple[Any, str]], children: bool) -> list[str]:
        """Adds the lines of a fresh fetch (from :meth:`take`) not seen before to its own
        (``children``: to its family's); returns every line seen."""
        seen = self.family if children else self.own
        count: collections.Counter[Any] = collections.Counter()
        for key, text in lines:
            count[key] += 1
            seen.setdefault((key, count[key]), text)
        return list(seen.values())

    def settled(self, job: JobRecord) -> bool:
        """Whether the ended job's lines are whole: each task's last attempt has shown the
        end-of-output marker on both streams. A marker that may still come (the task ended
        by itself) is waited for :data:`LOGS_WAIT_S` after the end, one that cannot (a
        command, a task Iris killed) :data:`LOGS_GRACE_S`; then a warning says, once, that
        lines may be missing."""
        if self.output is not Output.OPEN:
            return True
        fray_task = job.request is not None and job.request.entrypoint.is_callable
        missing = {  # task index: whether its marker may still come
            t.task_index: fray_task and t.state in _ENDED_ITSELF and 0 <= t.exit_code < 128
            for t in self.tasks
            if t.attempts and not {(t.task_index, t.attempts - 1, s) for s in STREAMS} <= self.ends
        }
        if not missing:
            self.output = Output.WHOLE
            return True
        wait = LOGS_WAIT_S if all(missing.values()) else LOGS_GRACE_S
        if time.time() < (job.finished_at or 0.0) + wait:
            return False
        self.output = Output.CUT
        logger.warning(
            "the lines of job %s may be incomplete: no end-of-output marker from task(s) %s "
            "within %g s of its end (a command, or a task Iris stopped, writes none)",
            job.job_id,
            ", ".join(map(str, sorted(missing))),
            wait,
        )
        return True


def observed(view: JobView, tasks: list[TaskView], **end: Any) -> Observed:
    """What Iris says of a job, for its record: counts, when it started, its replicas and the
    exit code (a failed task's, else the job's); its tasks say how many attempts began. Once
    it ended, ``end`` adds its final ``status`` (with the ``cause`` and ``error`` of a
    failure)."""
    return Observed(
        attempts=max([convert.attempts(view), *(task.attempts for task in tasks)]),
        failures=view.failures,
        preemptions=view.preemptions,
        replicas=len(tasks) or view.tasks or None,
        started_at=view.started_at,
        exit_code=next((task.exit_code for task in tasks if task.exit_code), view.exit_code),
        **end,
    )
