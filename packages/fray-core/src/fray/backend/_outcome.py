"""How one attempt of a job ended (the :class:`Outcome` a backend reports to the engine), and
what a cluster that runs a job's attempts itself says of the job (:class:`Observed`)."""

from __future__ import annotations

import traceback
from collections.abc import Callable
from typing import Any, Literal, NamedTuple

from fray._types import JobStatus

OutcomeKind = Literal["succeeded", "failed", "preempted", "stopped", "timed_out", "unplaced"]


class Outcome(NamedTuple):
    """How one attempt ended, built with the class methods; a backend reports it with
    :meth:`JobRecord.report`. It pickles (a cause that would not becomes a ``RuntimeError``
    with its type and text), so a worker process can send it back.

    Attributes:
        value: The callable's return value (``succeeded``).
        cause: The user's exception behind a failure, where known.
        error: What went wrong, in words (failure, preemption, why it was not placed).
        failed_tasks: How many replicas failed (``failed``), for ``max_task_failures``.
        trace: The failure's traceback, where :meth:`of_call` caught it.
    """

    kind: OutcomeKind
    value: Any = None
    cause: BaseException | None = None
    error: str | None = None
    exit_code: int | None = None
    failed_tasks: int = 1
    trace: str | None = None

    @classmethod
    def succeeded(cls, value: Any = None, exit_code: int | None = None) -> Outcome:
        """The attempt succeeded with ``value``."""
        return cls("succeeded", value, exit_code=exit_code)

    @classmethod
    def failed(
        cls,
        cause: BaseException | None = None,
        error: str | None = None,
        exit_code: int | None = None,
        failed_tasks: int = 1,
    ) -> Outcome:
        """The attempt failed; ``error`` defaults to the cause's type and text."""
        if error is None:
            error = f"{type(cause).__name__}: {cause}" if cause is not None else "failed"
        return cls("failed", None, cause, error, exit_code, max(failed_tasks, 1))

    @classmethod
    def preempted(cls, reason: str, exit_code: int | None = None) -> Outcome:
        """The attempt was lost to something outside it (a node went away)."""
        return cls("preempted", error=reason, exit_code=exit_code)

    @classmethod
    def stopped(cls) -> Outcome:
        """The attempt was stopped (by ``terminate()`` or shutdown)."""
        return cls("stopped")

    @classmethod
    def timed_out(cls) -> Outcome:
        """The attempt ran past ``JobRequest.timeout``."""
        return cls("timed_out")

    @classmethod
    def unplaced(cls, reason: str | None = None) -> Outcome:
        """No node took the attempt within ``JobRequest.scheduling_timeout``."""
        return cls("unplaced", error=reason)

    @classmethod
    def of_call(cls, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Outcome:
        """Calls ``fn`` and returns how it went: every exception is caught, ``SystemExit``
        included (its code is the exit code; any other exception's is 1)."""
        try:
            return cls("succeeded", fn(*args, **kwargs))
        except BaseException as exc:
            code = exc.code if isinstance(exc, SystemExit) and isinstance(exc.code, int) else 1
            error = f"{type(exc).__name__}: {exc}"
            return cls("failed", None, exc, error, code or 1, trace=traceback.format_exc())

    def __reduce__(self) -> tuple[Any, ...]:
        cause = None if self.cause is None else portable_error(self.cause)
        return (Outcome, (*self[:2], cause, *self[3:]))


def portable_error(exc: BaseException) -> BaseException:
    """``exc`` if it survives pickling; otherwise a ``RuntimeError`` with its type and text."""
    import cloudpickle

    try:
        cloudpickle.loads(cloudpickle.dumps(exc))
    except Exception:
        return RuntimeError(f"{type(exc).__name__}: {exc}")
    return exc


class Observed(NamedTuple):
    """What a cluster that runs a job's attempts itself says of the job (Iris's own retries,
    a job found by id), for :meth:`JobRecord.observe`; ``None`` is "not known": the record
    keeps what it has.

    Attributes:
        status: The job's status; a final one ends the record.
        attempts: Attempts started so far (never lowers the record's count).
        failures: Attempts that failed on their own (never lowers it).
        preemptions: Attempts lost to preemption (never lowers it).
        cause: The user's exception behind a failure, where known.
    """

    status: JobStatus | None = None
    attempts: int | None = None
    failures: int | None = None
    preemptions: int | None = None
    replicas: int | None = None
    started_at: float | None = None
    finished_at: float | None = None
    exit_code: int | None = None
    error: str | None = None
    cause: BaseException | None = None
    name: str | None = None
    parent: str | None = None
