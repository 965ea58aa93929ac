"""What the controller says about a job, its tasks and its output, in the same shape on
every Iris line: each line's adapter (``_iris_0_2_20``, ``_iris_0_2_227``) builds these from
its own types. States are Iris's names in lower case (``pending``, ``running``, ``killed``,
``unschedulable``...)."""

from __future__ import annotations

from typing import NamedTuple

__all__ = [
    "FINISHED",
    "TASK_FINISHED",
    "JobView",
    "LogLine",
    "TaskView",
    "fray_job_id",
    "parent_of",
]

FINISHED = frozenset({"succeeded", "failed", "killed", "worker_failed", "unschedulable"})
"""The job states Iris never leaves."""

TASK_FINISHED = FINISHED | {"preempted", "cosched_failed"}
"""The task states that end an attempt."""


class JobView(NamedTuple):
    """One job's status (times in seconds since the epoch)."""

    job_id: str  # the wire id, /<user>/<name>[/<child>...]
    state: str
    error: str
    exit_code: int
    failures: int
    preemptions: int
    submitted_at: float | None
    started_at: float | None
    finished_at: float | None
    pending_reason: str
    tasks: int
    parent: str | None  # the parent's wire id


class TaskView(NamedTuple):
    """One task of a job."""

    task_index: int
    state: str
    attempts: int  # attempts that started
    exit_code: int
    error: str


class LogLine(NamedTuple):
    """One line of a job's output."""

    task: str  # the task's wire id, /<user>/<job...>/<index>
    stream: str
    at_ms: int
    text: str


def parent_of(wire: str) -> str | None:
    """The wire id of a job's parent (``None`` for a top-level job, ``/<user>/<name>``)."""
    return wire.rsplit("/", 1)[0] if wire.count("/") > 2 else None


def fray_job_id(wire: str) -> str:
    """Fray's id for an Iris job id: the wire id without its ``/<user>/`` prefix."""
    parts = wire.strip("/").split("/")
    return "/".join(parts[1:]) if len(parts) > 1 else parts[0]
