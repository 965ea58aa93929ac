"""Where the dashboard reads from: a :class:`Source` per backend. A live client
(:class:`ClientSource`), the run store of past local runs (:class:`RunStoreSource`), or fixed
data (:class:`MemorySource`, for tests, demos and benchmarks)."""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

from fray._types import JobInfo
from fray.dashboard._views import GangView, GroupView, group_view
from fray.errors import JobNotFoundError

__all__ = ["ClientSource", "MemorySource", "RunStoreSource", "Source", "SpecSource"]


class Source(Protocol):
    """One backend as the dashboard reads it. Any method may raise: the page then shows that
    source's error and the other sources still render.

    Attributes:
        name: What the page calls it (unique among the dashboard's sources).
    """

    name: str

    def jobs(self) -> Sequence[JobInfo]:
        """Every job the source knows of, oldest first."""
        ...

    def job(self, job_id: str) -> JobInfo:
        """One job (``JobNotFoundError`` if the source does not know it)."""
        ...

    def logs(self, job_id: str, tail: int) -> Sequence[str]:
        """The last ``tail`` lines of a job's output (with its replicas' prefixes)."""
        ...

    def groups(self) -> Sequence[GroupView]:
        """The actor groups the source knows of."""
        ...

    def gangs(self) -> Sequence[GangView]:
        """The multi-host TPU jobs the source can describe host by host."""
        ...


class MemorySource:
    """A source over fixed data: the jobs (any order), their log lines, groups and gangs."""

    def __init__(
        self,
        name: str,
        jobs: Iterable[JobInfo],
        *,
        logs: Mapping[str, Sequence[str]] | None = None,
        groups: Sequence[GroupView] = (),
        gangs: Sequence[GangView] = (),
    ) -> None:
        self.name = name
        self._jobs = sorted(jobs, key=lambda info: info.submitted_at or 0.0)
        self._by_id = {info.job_id: info for info in self._jobs}
        self._logs = dict(logs or {})
        self._groups, self._gangs = tuple(groups), tuple(gangs)

    def jobs(self) -> Sequence[JobInfo]:
        """See :class:`Source`."""
        return self._jobs

    def job(self, job_id: str) -> JobInfo:
        """See :class:`Source`."""
        try:
            return self._by_id[job_id]
        except KeyError:
            raise JobNotFoundError(job_id) from None

    def logs(self, job_id: str, tail: int) -> Sequence[str]:
        """See :class:`Source`."""
        self.job(job_id)
        lines = self._logs.get(job_id, ())
        return lines[len(lines) - tail :] if tail else ()

    def groups(self) -> Sequence[GroupView]:
        """See :class:`Source`."""
        return self._groups

    def gangs(self) -> Sequence[GangView]:
        """See :class:`Source`."""
        return self._gangs

    def close(self) -> None:
        """Nothing to release."""


class ClientSource:
    """A live client of any backend (``fray.Client``), read through its public methods.

    One listing serves every question asked within ``max_age`` seconds (a page refresh asks
    several: the jobs, then each expanded job's children), and a question asked while it runs
    waits for it rather than list again.

    The groups shown are those the client made (a client of ``fray.backend`` keeps its
    last 1,000, each with the job that made it) and any given here or with :meth:`add_group`
    (a group of another client, say).
    """

    def __init__(
        self,
        client: Any,
        *,
        name: str | None = None,
        groups: Iterable[Any] = (),
        max_age: float = 1.0,
    ) -> None:
        self.client = client
        self.name = name or client.scheme
        self.max_age = max_age
        self._lock = threading.Lock()
        self._listing = threading.Lock()
        self._listed: tuple[float, Sequence[JobInfo]] | None = None
        self._groups: list[tuple[Any, str | None]] = [(group, None) for group in groups]

    def add_group(self, group: Any, job_id: str | None = None) -> None:
        """Shows actor group ``group`` (a live ``fray.ActorGroup``), hosted by ``job_id``."""
        with self._lock:
            self._groups.append((group, job_id))

    def connect(self) -> Any:
        """The client to ask."""
        return self.client

    def jobs(self) -> Sequence[JobInfo]:
        """See :class:`Source` (a listing at most ``max_age`` seconds old)."""
        with self._listing:
            listed = self._listed
            if listed is None or time.monotonic() - listed[0] > self.max_age:
                started = time.monotonic()
                listed = self._listed = (started, self.connect().list_jobs())
            return listed[1]

    def job(self, job_id: str) -> JobInfo:
        """See :class:`Source`."""
        return self.connect().get_job(job_id).info()

    def logs(self, job_id: str, tail: int) -> Sequence[str]:
        """See :class:`Source`."""
        return self.connect().get_job(job_id).logs(tail) if tail else ()

    def groups(self) -> Sequence[GroupView]:
        """See :class:`Source`."""
        with self._lock:
            groups = list(self._groups)
        made = getattr(self.connect(), "_actor_groups", None)  # a client of fray.backend's
        if made is not None:
            given = {id(group) for group, _job_id in groups}
            groups += [(g, job_id) for g, job_id in made() if id(g) not in given]
        return [group_view(group, job_id) for group, job_id in groups]

    def gangs(self) -> Sequence[GangView]:
        """None: a client's ``JobInfo`` says nothing of slices and hosts (see docs/cli.md)."""
        return ()

    def close(self) -> None:
        """Leaves the client to its owner."""


class SpecSource(ClientSource):
    """The backend a client spec names (``ray``, ``iris://host:port``), connected on first
    use, and again on the next use after a failed connection (the page shows the error);
    :meth:`close` shuts the client down."""

    def __init__(self, spec: str, *, name: str | None = None) -> None:
        super().__init__(None, name=name or spec)
        self.spec = spec

    def connect(self) -> Any:
        """The client, connected now if it is not yet (one connection at a time)."""
        from fray.backend import client_from_spec

        with self._lock:
            if self.client is None:
                self.client = client_from_spec(self.spec, "--spec")
            return self.client

    def close(self) -> None:
        """Shuts the client down, if it was connected."""
        with self._lock:
            client, self.client = self.client, None
        if client is not None:
            client.shutdown()


class RunStoreSource:
    """The local runs recorded in the state directory (``fray run``, and ``LocalClient``s
    made with ``record=True``), also after the processes that ran them have exited."""

    def __init__(self, store: Any = None, *, name: str = "runs") -> None:
        from fray.cli._jobs import RunStore

        self.store = store if store is not None else RunStore()
        self.name = name

    def jobs(self) -> Sequence[JobInfo]:
        """See :class:`Source`."""
        return [_job_info(record) for record in self.store.records()]

    def job(self, job_id: str) -> JobInfo:
        """See :class:`Source`."""
        return _job_info(self.store.get_job(job_id).info())

    def logs(self, job_id: str, tail: int) -> Sequence[str]:
        """See :class:`Source`."""
        lines = collections.deque(self.store.get_job(job_id).logs(), maxlen=tail)
        return list(lines) if tail else ()

    def groups(self) -> Sequence[GroupView]:
        """None: the run store keeps jobs only."""
        return ()

    def gangs(self) -> Sequence[GangView]:
        """None: the run store keeps jobs only."""
        return ()

    def close(self) -> None:
        """Nothing to release."""


def _job_info(record: Mapping[str, Any]) -> JobInfo:
    """A recorded run as a ``JobInfo`` (the record's other facts, e.g. its command, left out)."""
    return JobInfo(**{key: record[key] for key in JobInfo.model_fields if key in record})
