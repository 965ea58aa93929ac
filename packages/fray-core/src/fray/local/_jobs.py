"""The local job handle (also over a ``concurrent.futures.Future``, as the predecessor's
``LocalJobHandle(job_id, future)``), and the stop grace period."""

from __future__ import annotations

import os
from concurrent.futures import Future
from typing import Any

from fray.backend import BaseClient, BaseJobHandle, JobRecord, Outcome
from fray.environment_variables import FRAY_TERMINATE_GRACE_S
from fray.errors import InvalidRequestError


def grace_seconds() -> float:
    """``FRAY_TERMINATE_GRACE_S``: seconds between SIGTERM and SIGKILL (default 5).

    Raises:
        InvalidRequestError: It is not a finite number >= 0.
    """
    text = os.environ.get(FRAY_TERMINATE_GRACE_S, "").strip() or "5"
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0.0 <= value < float("inf"):  # also refuses nan
        raise InvalidRequestError.for_field(
            FRAY_TERMINATE_GRACE_S, text, "a number of seconds >= 0 (default 5)"
        )
    return value


class _Futures(BaseClient):
    """What runs the records of handles made from a future: the future itself."""

    scheme = "local"

    def _cancel_attempt(self, job: JobRecord) -> float:
        job.data.cancel()  # a future that is already running cannot be cancelled
        return 0.0


_futures: _Futures | None = None


def _future_ended(job: JobRecord, future: Future[Any]) -> None:
    if future.cancelled():
        job.report(Outcome.stopped())
    elif (error := future.exception()) is not None:
        job.report(Outcome.failed(error))
    else:
        job.report(Outcome.succeeded(future.result()))


class LocalJobHandle(BaseJobHandle):
    """Handle to a job of a :class:`~fray.local.LocalClient`.

    ``LocalJobHandle(job_id, future)`` makes a job handle over a ``concurrent.futures.Future``
    of your own (the predecessor's form): it is RUNNING until the future is done, then
    SUCCEEDED with its value, FAILED with its exception as the cause, or STOPPED if it was
    cancelled; ``terminate()`` cancels it if it has not started.
    """

    __slots__ = ()

    def __init__(self, job_id: JobRecord | str, future: Future[Any] | None = None) -> None:
        if isinstance(job_id, JobRecord):  # the client's own handles
            self._job = job_id  # what BaseJobHandle.__init__ does, one call less per submit
            return
        if not isinstance(job_id, str) or not isinstance(future, Future):
            raise InvalidRequestError.for_field(
                "LocalJobHandle", (job_id, future), "a job id (str) and a concurrent.futures.Future"
            )
        global _futures
        if _futures is None:
            _futures = _Futures()
        record = JobRecord(_futures, job_id, data=future)
        record.begin()
        record.placed()
        super().__init__(record)
        future.add_done_callback(lambda done: _future_ended(record, done))
