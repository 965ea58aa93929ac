"""What the controller says about jobs, tasks and output, in one shape on every Iris line
(each line's adapter builds them). States are Iris's names in lower case (``running``...)."""

from __future__ import annotations

from typing import NamedTuple

# The job states Iris never leaves, and the task states that end an attempt.
FINISHED = frozenset({"succeeded", "failed", "killed", "worker_failed", "unschedulable"})
TASK_FINISHED = FINISHED | {"preempted", "cosched_failed"}

END_OF_OUTPUT = "[fray] end of this task's output"
"""The last line Fray's task code writes on stdout and on stderr (``_task.end_output``):
once a task's last attempt has shown it on both, Iris has all that task's lines. Readers
leave it out; on stderr a failure's summary may follow it."""
STREAMS = ("stdout", "stderr")


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

    @property
    def parent(self) -> str | None:
        """The parent's wire id (``None`` for a top-level job, ``/<user>/<name>``)."""
        return self.job_id.rsplit("/", 1)[0] if self.job_id.count("/") > 2 else None


class TaskView(NamedTuple):
    """One task of a job.

    Attributes:
        task_index: Its index in the job.
        state: Iris's name of its state, in lower case.
        attempts: Attempts that started.
        exit_code: The last attempt's exit code.
        error: The last attempt's error, if any.
    """

    task_index: int
    state: str
    attempts: int  # attempts that started
    exit_code: int
    error: str


class LogLine(NamedTuple):
    """One line a task wrote.

    Attributes:
        task: The task's wire id, ``/<user>/<job...>/<index>``.
        stream: ``stdout`` or ``stderr``.
        at_ms: When it was written, in milliseconds since the epoch.
        text: The line.
        attempt: The task's attempt that wrote it (from 0).
    """

    task: str  # the task's wire id, /<user>/<job...>/<index>
    stream: str
    at_ms: int
    text: str
    attempt: int


def iris_error(text: str) -> str:
    """Iris's error text without the end-of-output marker (Iris quotes a failed task's last
    line on stderr, which is the marker and the failure's summary)."""
    return text.replace(f"{END_OF_OUTPUT} ", "")


def fray_job_id(wire: str) -> str:
    """Fray's id for an Iris job id: the wire id without its ``/<user>/`` prefix."""
    user, _, rest = wire.strip("/").partition("/")
    return rest or user
