"""Errors of TPU gang jobs (no ray import)."""

from __future__ import annotations

from typing import Any

from fray.errors import JobFailedError

__all__ = ["CommandFailedError", "ExitCalledError", "TpuJobFailedError", "TpuSchedulingError"]


class TpuJobFailedError(JobFailedError):
    """A TPU gang job ended without success.

    Raised by ``run_on_pod`` and by the handle's ``wait()``/``result()``. The first problem
    (usually the user's own exception) is chained as ``__cause__``; its type and text are in
    the message.

    Attributes:
        attempts: Attempts started.
        preemptions: Attempts lost to preemption.
        failures: Attempts that failed on their own.
        reason: ``"failure"``, ``"preemption"``, ``"scheduling"`` or ``"internal"``.
    """

    def __init__(
        self,
        job_id: str,
        status: Any,
        error: str | None = None,
        *,
        attempts: int = 0,
        preemptions: int = 0,
        failures: int = 0,
        reason: str = "failure",
    ) -> None:
        super().__init__(job_id, status, error)
        self.attempts = attempts
        self.preemptions = preemptions
        self.failures = failures
        self.reason = reason

    def __reduce__(self) -> Any:
        return (
            _rebuild,
            (
                type(self),
                self.job_id,
                self.status,
                self.error,
                self.attempts,
                self.preemptions,
                self.failures,
                self.reason,
            ),
        )


class TpuSchedulingError(TpuJobFailedError):
    """The slices asked for could not be gathered within the scheduling timeout.

    The message says what was asked for and which slices of that type the cluster has.
    """


def _rebuild(
    cls: type[TpuJobFailedError],
    job_id: str,
    status: Any,
    error: str | None,
    attempts: int,
    preemptions: int,
    failures: int,
    reason: str,
) -> TpuJobFailedError:
    return cls(
        job_id,
        status,
        error,
        attempts=attempts,
        preemptions=preemptions,
        failures=failures,
        reason=reason,
    )


class CommandFailedError(RuntimeError):
    """A command entrypoint exited with a non-zero code on one host."""

    def __init__(self, command: str, code: int, last_line: str = "") -> None:
        message = f"command {command!r} exited with code {code}"
        if last_line:
            message += f"; last output: {last_line}"
        super().__init__(message)
        self.command = command
        self.code = code
        self.last_line = last_line

    def __reduce__(self) -> Any:
        return (type(self), (self.command, self.code, self.last_line))


class ExitCalledError(RuntimeError):
    """The user's callable called ``sys.exit`` with a failing code on one host.

    Raised in place of ``SystemExit``, which would otherwise end the host actor and look
    like the loss of the VM (a preemption) rather than the program's own failure.
    """

    def __init__(self, code: object) -> None:
        super().__init__(f"the function called sys.exit: SystemExit({code!r})")
        self.code = code

    def __reduce__(self) -> Any:
        return (type(self), (self.code,))
