# pyright: standard
"""The Iris connection a client and its handles share, and the few questions about the job
tree that more than one part of the backend asks the controller."""

from __future__ import annotations

import contextlib
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from typing import Any

from iris.cluster.types import JobName, is_job_finished
from iris.rpc import controller_pb2, job_pb2

from fray.errors import FrayError
from fray_iris import _iris
from fray_iris._convert import translate_errors
from fray_iris._iris import RawIrisClient
from fray_iris._results import ResultStore

__all__ = ["POLL_FIRST_S", "POLL_MAX_S", "Session", "backoff", "normalize_address"]

POLL_FIRST_S = 0.05  # the first pause between two looks at a job
POLL_MAX_S = 1.0  # the longest
_TERMINATE_WAIT_S = 120.0


def backoff() -> Iterator[float]:
    """Pauses between looks at the controller: 50 ms, growing by half each time, to 1 s."""
    delay = POLL_FIRST_S
    while True:
        yield delay
        delay = min(delay * 1.5, POLL_MAX_S)


def normalize_address(address: str) -> str:
    """``host:port`` as ``http://host:port``; a URL as it is."""
    if "://" not in address:
        return f"http://{address}"
    return address


class Session:
    """The Iris connection a client and its handles share.

    Handles outlive ``IrisClient.shutdown()`` (a stopped job can still be waited on): once
    the client's own connection is closed, a fresh one is opened on first use and closed
    when the session is collected.

    Attributes:
        address: The controller's URL, where known.
        user: The Iris user whose jobs these are (``/<user>/...``).
        results: Where tasks store return values, if anywhere.
    """

    def __init__(
        self,
        raw: RawIrisClient,
        *,
        owned: bool,
        address: str | None,
        reopen: Callable[[], RawIrisClient] | None,
        user: str,
        results: ResultStore | None,
    ) -> None:
        self._raw = raw
        self._owned = owned
        self._closed = False
        self._reopen = reopen
        self._lock = threading.Lock()
        self.address = address
        self.user = user
        self.results = results
        self._finalizer: weakref.finalize[Any, Any] | None = None
        self._watcher: Any = None

    def take_ownership(self, reopen: Callable[[], RawIrisClient]) -> None:
        """This session opened its client itself (``reopen`` opens another): it closes it."""
        self._owned = True
        self._reopen = reopen

    @property
    def raw(self) -> RawIrisClient:
        """The live marin-iris client."""
        if not self._closed:
            return self._raw
        with self._lock:
            if self._closed and self._reopen is not None:
                self._raw = self._reopen()
                self._closed = False
                self._finalizer = weakref.finalize(self, _close_quietly, self._raw)
        return self._raw

    def close(self) -> None:
        """Closes the connection if this session opened it."""
        with self._lock:
            if self._closed or not self._owned:
                self._closed = True
                return
            self._closed = True
            _close_quietly(self._raw)

    @property
    def watcher(self) -> Any:
        """The one thread that watches this session's jobs for their done-callbacks."""
        with self._lock:
            if self._watcher is None:
                from fray_iris._watch import DoneWatcher

                self._watcher = DoneWatcher(self)
            return self._watcher

    def wire(self, fray_id: str) -> JobName:
        """The Iris id of a Fray job id (Iris ids start with ``/<user>/``)."""
        if fray_id.startswith("/"):
            return JobName.from_wire(fray_id)
        return JobName.from_wire(f"/{self.user}/{fray_id}")

    def what(self, action: str) -> Any:
        """Translates Iris's errors inside the block, naming ``action`` and the controller."""
        return translate_errors(action, address=self.address)

    # -- the job tree ------------------------------------------------------------------------

    def states(self, wires: list[JobName]) -> dict[str, int]:
        """The state of each job, by wire id, in one call (unknown jobs are left out)."""
        return self.raw._cluster_client.get_job_states(wires)

    def children(self, wire: JobName) -> list[str]:
        """Wire ids of the jobs submitted from ``wire``, oldest first."""
        query = controller_pb2.Controller.JobQuery(
            scope=controller_pb2.Controller.JOB_QUERY_SCOPE_CHILDREN,
            parent_job_id=wire.to_wire(),
        )
        statuses = self.raw._cluster_client.list_jobs(query=query)
        return [s.job_id for s in sorted(statuses, key=lambda s: s.submitted_at.epoch_ms)]

    def descendants(self, wire: JobName) -> list[job_pb2.JobStatus]:
        """Every job below ``wire`` in the tree."""
        return _iris.list_jobs(self.raw, wire.to_wire() + "/")

    def all_finished(self, wire: JobName) -> bool:
        """Whether every job below ``wire`` has finished."""
        return all(is_job_finished(s.state) for s in self.descendants(wire))

    def wait_finished(self, wires: list[JobName], *, include_descendants: bool) -> None:
        """Polls until every job (and, if asked, every descendant) is finished."""
        deadline = time.monotonic() + _TERMINATE_WAIT_S
        delays = backoff()
        pending = list(wires)
        while pending:
            with translate_errors("waiting for jobs to stop"):
                states = self.states(pending)
            pending = [w for w in pending if not is_job_finished(states.get(w.to_wire(), 0) or 0)]
            pending = [w for w in pending if w.to_wire() in states]
            if not pending:
                break
            if time.monotonic() > deadline:
                raise FrayError(f"Iris jobs {[str(w) for w in pending]} did not stop in time")
            time.sleep(next(delays))
        if not include_descendants:
            return
        for wire in wires:
            while True:
                with translate_errors("waiting for child jobs to stop"):
                    left = [s for s in self.descendants(wire) if not is_job_finished(s.state)]
                if not left:
                    break
                if time.monotonic() > deadline:
                    raise FrayError(f"child jobs {[s.job_id for s in left]} did not stop in time")
                for status in left:  # Iris stops children itself; make sure of it
                    with translate_errors("stopping a child job"):
                        _iris.terminate(self.raw, JobName.from_wire(status.job_id))
                time.sleep(next(delays))


def _close_quietly(raw: RawIrisClient) -> None:
    with contextlib.suppress(Exception):  # closing is best effort
        raw.shutdown()
