# pyright: standard
"""Reading an Iris job's output: every line so far in one fetch, children's lines prefixed
``[child-id]``, merged so that following a job never repeats nor loses a line."""

from __future__ import annotations

import collections
import time
from typing import TYPE_CHECKING, Any

from fray_iris import _iris
from fray_iris._convert import translate_errors
from fray_iris._task import fray_job_id

if TYPE_CHECKING:
    from fray_iris._jobs import IrisJob

__all__ = ["LineMerge", "fetch_lines"]

LogKey = tuple[str, int, str]  # stream, time, text: what tells two lines apart

# Iris reports a task's end before its worker has sent the task's last lines (the worker's
# log client sends every second, and once more as the task is cleaned up): a read of a job's
# logs waits until this long after the end.
_LOGS_SETTLE_S = 1.0


def _settle_in(job: IrisJob) -> float:
    """How long until a read of an ended job's logs holds its last lines: until
    ``_LOGS_SETTLE_S`` after the end, by Iris's clock where it is not behind this process's,
    and never longer than that from when this process saw the end."""
    if not job.ended:
        return 0.0
    since = time.monotonic() - job.ended_seen
    if job.iris_finished_at is not None:
        since = max(since, time.time() - job.iris_finished_at)
    return max(_LOGS_SETTLE_S - since, 0.0)


def fetch_lines(
    job: IrisJob, include_children: bool, tail: int | None = None
) -> list[tuple[LogKey, str]]:
    """Every line of ``job`` so far (and of its descendants, prefixed, if asked), in time
    order, each with its key; with ``tail``, at least the last ``tail`` lines, read from the
    end of the log by Iris where its last lines are the job's own."""
    settle = _settle_in(job)
    if settle > 0:
        time.sleep(settle)
    if tail:
        with translate_errors(f"logs of {job.job_id}", job_id=job.job_id):
            entries = _iris.fetch_logs(job.session.raw, job.wire, max_lines=tail, tail=True)
        lines = _own_lines(job, entries, include_children)
        if len(lines) >= tail or len(entries) < tail:
            return lines
        # Some of those last lines were children's: read them all.
    with translate_errors(f"logs of {job.job_id}", job_id=job.job_id):
        entries = _iris.fetch_logs(job.session.raw, job.wire)
    return _own_lines(job, entries, include_children)


def _own_lines(job: IrisJob, entries: Any, include_children: bool) -> list[tuple[LogKey, str]]:
    """The job's lines (``[i] `` before each when it has several replicas, as on every
    backend) and, if asked, its descendants' (``[<child id>] `` before each)."""
    out: list[tuple[LogKey, str]] = []
    several = job.replica_count() > 1
    for entry in entries:
        task = entry.task_id
        owner = task.parent.to_wire() if task.parent is not None else task.to_wire()
        key = (entry.key, entry.timestamp.epoch_ms(), entry.data)
        if owner == job.wire_id:
            out.append((key, f"[{task.task_index}] {entry.data}" if several else entry.data))
        elif include_children:
            out.append((key, f"[{fray_job_id(owner)}] {entry.data}"))
    return out


class LineMerge:
    """The lines one ``logs()`` call has seen, in the order it saw them.

    Each fetch of a job's logs returns everything so far; a line counts as new only when
    its key (stream, time, text) occurs more often than in earlier fetches, so a follow
    never repeats a line, and a child's line that arrives late is added, not lost.
    """

    __slots__ = ("lines", "seen")

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.seen: collections.Counter[LogKey] = collections.Counter()

    def merge(self, entries: list[tuple[LogKey, str]]) -> list[str]:
        """Adds the lines of a fresh fetch not seen before; returns every line seen."""
        fresh: collections.Counter[LogKey] = collections.Counter()
        for key, line in entries:
            fresh[key] += 1
            if fresh[key] > self.seen[key]:
                self.seen[key] += 1
                self.lines.append(line)
        return self.lines
