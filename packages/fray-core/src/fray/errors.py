"""Fray's exceptions: one tree, shared by every backend.

Backends translate their own library's exceptions at the boundary, so user code only ever
catches these (and its own exceptions, chained as ``__cause__``)::

    FrayError
    ├── InvalidRequestError        (also a ValueError)   bad field in a request or spec
    ├── BackendUnavailableError    (also an ImportError) backend package not installed
    ├── JobNotFoundError           (also a LookupError)  get_job() of an unknown id
    ├── JobAlreadyExistsError      (also a RuntimeError) a job of that name already runs
    ├── JobFailedError             (also a RuntimeError) the job ended FAILED (or STOPPED
    │                                                    where a result was asked for)
    ├── JobTimeoutError            (also a TimeoutError) a wait ran out of time
    └── ActorError                 (also a RuntimeError) an actor could not be created or called
        ├── ActorDiedError                               the actor is gone
        └── ActorUnavailableError                        the actor, or a long-running call
                                                         on it, cannot be reached any more

``JobFailed`` and ``JobAlreadyExists`` are aliases kept for code written against the older API.
"""

from __future__ import annotations

from typing import Any

from fray._secrets import redacted

__all__ = [
    "ActorDiedError",
    "ActorError",
    "ActorUnavailableError",
    "BackendUnavailableError",
    "FrayError",
    "InvalidRequestError",
    "JobAlreadyExists",
    "JobAlreadyExistsError",
    "JobFailed",
    "JobFailedError",
    "JobNotFoundError",
    "JobTimeoutError",
]


class FrayError(Exception):
    """Base class of every error Fray raises."""


class InvalidRequestError(FrayError, ValueError):
    """A request, config or spec has a bad value: the ``field`` (dotted, e.g.
    ``"JobRequest.name"``, or ``None``), the rejected ``value`` and what is ``allowed``."""

    def __init__(
        self, message: str, *, field: str | None = None, value: Any = None, allowed: str = ""
    ) -> None:
        super().__init__(message)
        self.field = field
        self.value = value
        self.allowed = allowed

    @classmethod
    def for_field(cls, field: str, value: Any, allowed: str) -> InvalidRequestError:
        """Builds the standard message: the field, the bad value (what is named like a secret
        keeps its name and loses its value) and what is allowed."""
        value = redacted(value)
        return cls(
            f"{field}: {value!r} is not valid; {allowed}", field=field, value=value, allowed=allowed
        )


class BackendUnavailableError(FrayError, ImportError):
    """The backend asked for is not installed; the message is the exact install command."""


class JobNotFoundError(FrayError, LookupError):
    """No job with that id is known to the client."""

    def __init__(self, job_id: str, message: str | None = None) -> None:
        super().__init__(message or f"no job with id {job_id!r}")
        self.job_id = job_id


class JobAlreadyExistsError(FrayError, RuntimeError):
    """A job named ``job_name`` is already running and the request did not ask to adopt it
    (``handle``: a handle to it, when the backend can give one)."""

    def __init__(self, job_name: str, handle: Any = None) -> None:
        super().__init__(f"a job named {job_name!r} already exists")
        self.job_name = job_name
        self.handle = handle


class JobFailedError(FrayError, RuntimeError):
    """A job ended without success: ``job_id``, its final ``status`` (also
    ``failed_status``, for older code) and the backend's ``error`` text. The user's own
    exception, where known, is chained as ``__cause__`` and named in the message."""

    def __init__(self, job_id: str, status: Any, error: str | None = None) -> None:
        status_text = getattr(status, "value", status)
        message = f"Job {job_id} finished with status {status_text}"
        if error:
            message += f": {error}"
        super().__init__(message)
        self.job_id = job_id
        self.status = status
        self.failed_status = status
        self.error = error


class JobTimeoutError(FrayError, TimeoutError):
    """A wait on jobs or actor calls ran past its timeout. The work itself keeps running."""


class ActorError(FrayError, RuntimeError):
    """An actor could not be created, reached or called."""


class ActorDiedError(ActorError):
    """The actor's process or instance is gone; calls to it cannot complete."""


class ActorUnavailableError(ActorError):
    """The actor cannot be reached, or its server no longer knows a long-running call
    (``method.submit(...)``) this caller started: the call's outcome is lost."""


JobFailed = JobFailedError
JobAlreadyExists = JobAlreadyExistsError
