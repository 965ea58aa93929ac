"""LocalClient: jobs and actors on this machine, with the semantics of a real cluster.

Callables run in threads of this process unless they need a process (env vars, TPU hosts,
``isolation="process"``); commands always run in processes. Every process job runs in its
own session under a small guardian (``_reaper.py``), so ``terminate()`` stops the whole
process tree and nothing outlives the driver, even if the driver is killed.

Resource requests are validated but not enforced: this machine runs what it is given.
Accelerators are simulated: a TPU job runs one process per VM of each slice with the env a
real slice gives (``TPU_WORKER_ID``, ``TPU_NAME``, ``MEGASCALE_*`` for multislice) and
``JAX_PLATFORMS=cpu``; GPU jobs run on the CPU. Regions, zones and ``preemptible`` have no
meaning on one machine and are accepted as no-ops.
"""

from __future__ import annotations

import collections
import contextlib
import contextvars
import ctypes
import importlib.metadata
import logging
import os
import queue
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from pathlib import Path
from types import TracebackType
from typing import Any, Self, TypeVar

from fray import _client
from fray._actor import ActorContext
from fray._actor import _current as _current_actor
from fray._handles import check_result
from fray._history import JobHistory
from fray._logbuf import LogBuffer, capture_into, echo_stream, follow_many, merge_logs
from fray._types import (
    ActorConfig,
    JobInfo,
    JobRequest,
    JobStatus,
    ResourceConfig,
    TpuConfig,
)
from fray.environment_variables import (
    FRAY_JOB_ID,
    FRAY_NUM_TASKS,
    FRAY_TASK_INDEX,
    FRAY_TERMINATE_GRACE_S,
)
from fray.errors import (
    ActorDiedError,
    ActorError,
    FrayError,
    InvalidRequestError,
    JobFailedError,
    JobNotFoundError,
    JobTimeoutError,
)

__all__ = ["LocalActorGroup", "LocalActorHandle", "LocalClient", "LocalJobHandle"]

logger = logging.getLogger("fray.local")
T = TypeVar("T")

_THREAD_STOP_WAIT_S = 0.5
_REAPER = str(Path(__file__).with_name("_reaper.py"))
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")
_current_job: contextvars.ContextVar[_Job | None] = contextvars.ContextVar(
    "fray_local_job", default=None
)
_task_index: contextvars.ContextVar[int] = contextvars.ContextVar("fray_task_index", default=0)


class _Terminated(BaseException):
    """Raised inside a thread job that was terminated (a BaseException, so ``except
    Exception`` in user code does not swallow it)."""


def _inject(thread_id: int, exc: type[BaseException]) -> None:
    """Raises ``exc`` in the thread ``thread_id`` at its next check of the interpreter's
    eval breaker (a Python call or loop)."""
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread_id), ctypes.py_object(exc))


def _deliver_pending() -> None:
    """A Python call: an exception injected into the calling thread is raised here."""


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


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _requirement_name(requirement: str) -> str:
    return re.split(r"[\s\[<>=!~;@]", requirement.strip(), maxsplit=1)[0]


# ---------------------------------------------------------------------------------------------
# Jobs


class _Replica:
    """One running copy of a job: a thread or a guarded process."""

    def __init__(self, index: int) -> None:
        self.index = index
        self.thread_id: int | None = None
        self.in_user_code = False
        self.process: subprocess.Popen[bytes] | None = None
        self.result_path: str | None = None


class _Job:
    def __init__(
        self, client: LocalClient, job_id: str, request: JobRequest, parent: _Job | None
    ) -> None:
        self.client = client
        self.job_id = job_id
        self.request = request
        self.parent = parent
        self.parent_id = parent.job_id if parent is not None else os.environ.get(FRAY_JOB_ID)
        self.children: list[_Job] = []
        self.status = JobStatus.PENDING
        self.attempts = 0
        self.failures = 0
        self.preemptions = 0
        self.error: str | None = None
        self.cause: BaseException | None = None
        self.exit_code: int | None = None
        self.value: Any = None
        self.log = LogBuffer()
        self.lock = threading.Lock()
        self.done = threading.Event()
        self.callbacks: list[Callable[[], None]] = []
        self.replicas: list[_Replica] = []
        self.stop_requested = False
        self.signalled = False
        self.submitted_at = time.time()
        self.started_at: float | None = None
        self.finished_at: float | None = None
        self.workdir: str | None = None

    def info(self) -> JobInfo:
        return JobInfo(
            job_id=self.job_id,
            name=self.request.name,
            status=self.status,
            attempts=self.attempts,
            preemptions=self.preemptions,
            failures=self.failures,
            error=self.error,
            exit_code=self.exit_code,
            parent=self.parent_id,
            children=tuple(child.job_id for child in self.children),
            replicas=self.request.replica_count,
            submitted_at=self.submitted_at,
            started_at=self.started_at,
            finished_at=self.finished_at,
        )


class LocalJobHandle:
    """Handle to a job of a :class:`LocalClient`."""

    __slots__ = ("_job",)

    def __init__(self, job: _Job) -> None:
        self._job = job

    @property
    def job_id(self) -> str:
        """The job's id."""
        return self._job.job_id

    def status(self) -> JobStatus:
        """The job's current status."""
        return self._job.status

    def wait(self, timeout: float | None = None, *, raise_on_failure: bool = True) -> JobStatus:
        """Blocks until the job is finished; see ``fray.JobHandle.wait``."""
        job = self._job
        if not job.done.wait(timeout):
            raise JobTimeoutError(f"job {job.job_id} is still {job.status.value} after {timeout}s")
        if job.status is JobStatus.FAILED and raise_on_failure:
            raise JobFailedError(job.job_id, job.status, job.error) from job.cause
        return job.status

    def result(self, timeout: float | None = None) -> Any:
        """The callable's return value; see ``fray.JobHandle.result``."""
        status = self.wait(timeout)
        job = self._job
        check_result(job.job_id, status, job.error, is_callable=job.request.entrypoint.is_callable)
        return job.value

    def terminate(self) -> None:
        """Stops the job and its children; returns once they are STOPPED."""
        self._job.client._terminate(self._job)

    def logs(self, *, follow: bool = False, include_children: bool = False) -> Iterator[str]:
        """The job's output lines; see ``fray.JobHandle.logs``."""
        job = self._job
        if not include_children:
            if follow:
                yield from job.log.follow()
            else:
                yield from [line for _ts, line in list(job.log.lines)]
            return

        def buffers() -> list[tuple[str | None, LogBuffer]]:
            found: list[tuple[str | None, LogBuffer]] = [(None, job.log)]
            stack = list(job.children)
            while stack:
                child = stack.pop()
                found.append((child.job_id, child.log))
                stack.extend(child.children)
            return found

        if not follow:
            yield from merge_logs(buffers())
            return
        yield from follow_many(
            buffers,
            lambda: job.done.is_set() and all(child.done.is_set() for child in job.children),
        )

    def info(self) -> JobInfo:
        """Attempts, preemptions, failures, error, parent and children."""
        return self._job.info()

    def add_done_callback(self, callback: Callable[[Any], None]) -> None:
        """Calls ``callback(handle)`` once the job is finished (at once if it already is)."""
        job = self._job
        with job.lock:
            if not job.done.is_set():
                job.callbacks.append(lambda: callback(self))
                return
        callback(self)

    def __repr__(self) -> str:
        return f"LocalJobHandle({self._job.job_id!r}, {self._job.status.value})"


# ---------------------------------------------------------------------------------------------
# Actors


class _Mailbox:
    """Runs an actor's calls in arrival order, at most ``limit`` at a time.

    A blocking call on an idle actor runs directly in the caller's thread (no hand-off);
    otherwise calls queue for the actor's worker threads.
    """

    def __init__(self, actor: _Actor, limit: int) -> None:
        self._actor = actor
        self._limit = limit
        self._cond = threading.Condition(threading.Lock())
        self._queue: collections.deque[tuple[Future[Any], str, tuple[Any, ...], dict[str, Any]]]
        self._queue = collections.deque()
        self._active = 0
        self._workers: list[threading.Thread] = []
        self._idle_workers = 0
        self._closed = False

    def call(self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        with self._cond:
            if self._closed:
                raise self._actor.died_error()
            inline = self._active < self._limit and not self._queue
            if inline:
                self._active += 1
        if not inline:
            return self.submit(method, args, kwargs).result()
        try:
            return self._actor.invoke(method, args, kwargs)
        finally:
            with self._cond:
                self._active -= 1
                if self._queue:
                    self._cond.notify()

    def submit(self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Future[Any]:
        future: Future[Any] = _LocalActorFuture()
        with self._cond:
            if self._closed:
                raise self._actor.died_error()
            self._queue.append((future, method, args, kwargs))
            if self._idle_workers == 0 and len(self._workers) < self._limit:
                worker = threading.Thread(
                    target=self._work, name=f"fray-actor-{self._actor.name}", daemon=True
                )
                self._workers.append(worker)
                worker.start()
            else:
                self._cond.notify()
        return future

    def _work(self) -> None:
        while True:
            with self._cond:
                while not self._closed and (not self._queue or self._active >= self._limit):
                    self._idle_workers += 1
                    self._cond.wait()
                    self._idle_workers -= 1
                if self._closed:
                    return
                future, method, args, kwargs = self._queue.popleft()
                self._active += 1
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(self._actor.invoke(method, args, kwargs))
                except BaseException as exc:
                    future.set_exception(exc)
            with self._cond:
                self._active -= 1
                if self._queue:
                    self._cond.notify()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            pending = list(self._queue)
            self._queue.clear()
            self._cond.notify_all()
        for future, *_ in pending:
            if future.set_running_or_notify_cancel():
                future.set_exception(self._actor.died_error())
        current = threading.current_thread()
        for worker in self._workers:
            if worker is not current:
                worker.join(timeout=5)


class _LocalActorFuture(Future[Any]):
    """A ``concurrent.futures.Future`` whose timeout is a ``JobTimeoutError``."""

    def result(self, timeout: float | None = None) -> Any:
        try:
            return super().result(timeout)
        except FutureTimeout:
            if self.done():
                raise
            raise JobTimeoutError(f"actor call did not finish within {timeout}s") from None


class _Actor:
    def __init__(
        self,
        client: LocalClient,
        key: str,
        name: str,
        index: int,
        group: str,
        config: ActorConfig,
    ) -> None:
        self.client = client
        self.key = key
        self.name = name
        self.index = index
        self.group = group
        self.instance: Any = None
        self.status = JobStatus.PENDING
        self.error: BaseException | None = None
        self.ready = threading.Event()
        self.mailbox = _Mailbox(self, config.max_concurrency)
        self.context = ActorContext(LocalActorHandle(key), index, group)

    def died_error(self) -> ActorDiedError:
        return ActorDiedError(f"actor {self.name} is {self.status.value}; it takes no more calls")

    def invoke(self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        token = _current_actor.set(self.context)
        client_token = _client._explicit.set(self.client)
        try:
            return getattr(self.instance, method)(*args, **kwargs)
        except SystemExit as exc:
            # As on Ray and Iris, where it ends the actor's process: the actor is gone.
            self.status = JobStatus.FAILED
            self.error = exc
            self.mailbox.close()
            raise ActorDiedError(f"actor {self.name} exited (SystemExit({exc.code!r}))") from None
        finally:
            _client._explicit.reset(client_token)
            _current_actor.reset(token)


_ACTORS: dict[str, _Actor] = {}
_ACTORS_LOCK = threading.Lock()


_STOPPED_ACTORS: set[str] = set()  # keys of actors that were shut down in this process


def _lookup_actor(key: str) -> _Actor:
    actor = _ACTORS.get(key)
    if actor is None:
        if key in _STOPPED_ACTORS:
            raise ActorDiedError(f"actor {key.rsplit('/', 1)[-1]} was shut down")
        raise ActorError(
            f"local actor {key!r} is not in this process. Local actors live in the driver "
            "process: call them from the driver or from thread jobs of the same LocalClient "
            "(a job with env vars or isolation='process' runs in another process)"
        )
    return actor


class LocalActorMethod:
    """``handle.method``: call it, or ``.remote()`` it for a future."""

    __slots__ = ("_handle", "_method")

    def __init__(self, handle: LocalActorHandle, method: str) -> None:
        self._handle = handle
        self._method = method

    def remote(self, *args: Any, **kwargs: Any) -> Future[Any]:
        """Starts the call; returns a future."""
        return self._handle._actor().mailbox.submit(self._method, args, kwargs)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Calls and waits."""
        return self._handle._actor().mailbox.call(self._method, args, kwargs)


class LocalActorHandle:
    """Handle to a local actor. Pickles by name; resolves in the same process."""

    __slots__ = ("_key", "_resolved")

    def __init__(self, key: str) -> None:
        self._key = key
        self._resolved: _Actor | None = None

    @property
    def name(self) -> str:
        """The actor's name."""
        return self._key.rsplit("/", 1)[-1]

    def _actor(self) -> _Actor:
        actor = self._resolved
        if actor is None:
            actor = _lookup_actor(self._key)
            self._resolved = actor
        if actor.status is not JobStatus.RUNNING:
            if actor.status is JobStatus.PENDING:
                actor.ready.wait()
            if actor.status is not JobStatus.RUNNING:
                raise actor.died_error()
        return actor

    def __getattr__(self, method: str) -> LocalActorMethod:
        if method.startswith("_"):
            raise AttributeError(method)
        return LocalActorMethod(self, method)

    def __reduce__(self) -> tuple[Any, ...]:
        return (LocalActorHandle, (self._key,))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, LocalActorHandle) and other._key == self._key

    def __hash__(self) -> int:
        return hash(self._key)

    def __repr__(self) -> str:
        return f"LocalActorHandle({self.name!r})"


class LocalActorGroup:
    """``count`` in-process actors; see ``fray.ActorGroup``."""

    def __init__(self, client: LocalClient, name: str, actors: list[_Actor]) -> None:
        self._client = client
        self.name = name
        self._actors = actors
        self._yielded: set[int] = set()
        self._lock = threading.Lock()

    @property
    def ready_count(self) -> int:
        """Actors ready to take calls."""
        return sum(1 for a in self._actors if a.status is JobStatus.RUNNING)

    def __len__(self) -> int:
        return len(self._actors)

    def wait_ready(self, count: int | None = None, timeout: float | None = 300.0) -> list[Any]:
        """Waits for ``count`` actors (all by default); returns the first ready handles."""
        total = len(self._actors)
        want = total if count is None else count
        if isinstance(want, bool) or not isinstance(want, int) or not 0 <= want <= total:
            raise InvalidRequestError.for_field(
                "wait_ready.count", count, f"must be an integer from 0 to the group size {total}"
            )
        deadline = None if timeout is None else time.monotonic() + timeout
        for actor in self._actors:
            ready = [a for a in self._actors if a.status is JobStatus.RUNNING]
            if len(ready) >= want:
                break
            self._raise_if_unreachable(want)
            remaining = None if deadline is None else max(deadline - time.monotonic(), 0)
            if not actor.ready.wait(remaining):
                raise JobTimeoutError(
                    f"only {self.ready_count}/{want} actors of {self.name} ready after {timeout}s"
                )
        self._raise_if_unreachable(want)
        ready = [a for a in self._actors if a.status is JobStatus.RUNNING]
        handles = ready[:want]
        with self._lock:
            self._yielded.update(a.index for a in handles)
        return [a.context.handle for a in handles]

    def _raise_if_unreachable(self, want: int) -> None:
        """Raises when too many actors have failed or stopped for ``want`` to become ready."""
        total = len(self._actors)
        failed = [a for a in self._actors if a.status in (JobStatus.FAILED, JobStatus.STOPPED)]
        if total - len(failed) >= want:
            return
        first = next((a for a in failed if a.error is not None), None)
        raise ActorError(
            f"only {total - len(failed)} of {total} actors of {self.name} can become ready, "
            f"{want} were asked for" + (f"; {first.name} failed: {first.error!r}" if first else "")
        ) from (first.error if first else None)

    def discover_new(self) -> list[Any]:
        """Handles of ready actors not returned before."""
        with self._lock:
            fresh = [
                a
                for a in self._actors
                if a.status is JobStatus.RUNNING and a.index not in self._yielded
            ]
            self._yielded.update(a.index for a in fresh)
        return [a.context.handle for a in fresh]

    def statuses(self) -> list[JobStatus]:
        """One status per actor."""
        return [a.status for a in self._actors]

    def is_done(self) -> bool:
        """Whether every actor has stopped for good."""
        return all(a.status.is_finished for a in self._actors)

    def shutdown(self) -> None:
        """Stops every actor; pending calls fail with ``ActorDiedError``."""
        self._client._stop_actors(self._actors)

    def __repr__(self) -> str:
        return f"LocalActorGroup({self.name!r}, ready={self.ready_count}/{len(self._actors)})"


# ---------------------------------------------------------------------------------------------
# The client


class _JobThreads:
    """Runs jobs on at most ``size`` reused threads; more wait their turn (PENDING).

    Unlike ``ThreadPoolExecutor``'s, the threads are daemons: a thread job blocked for good
    must not keep the driver from exiting (the interpreter joins non-daemon threads first),
    and when the driver exits its process jobs go too (see ``_reaper.py``). Threads are never
    retired while the client is open: a job's processes are tied to the thread that started
    them (``PR_SET_PDEATHSIG`` fires when that thread ends).
    """

    def __init__(self, size: int) -> None:
        self._size = size
        self._work: queue.SimpleQueue[tuple[Callable[..., None], tuple[Any, ...]] | None]
        self._work = queue.SimpleQueue()
        self._idle = threading.Semaphore(0)
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()

    def submit(self, fn: Callable[..., None], *args: Any) -> None:
        self._work.put((fn, args))
        if self._idle.acquire(timeout=0):  # an idle thread takes it
            return
        with self._lock:
            if len(self._threads) < self._size:
                thread = threading.Thread(
                    target=self._run, name=f"fray-job-{len(self._threads)}", daemon=True
                )
                self._threads.append(thread)
                thread.start()

    def _run(self) -> None:
        while True:
            item = self._work.get()
            if item is None:
                return
            fn, args = item
            # The job records its own outcome; nothing may end the thread early.
            with contextlib.suppress(BaseException):
                fn(*args)
            # An idle thread must not keep its last job (and so its value and output) alive
            # until it takes another one.
            del item, fn, args
            self._idle.release()

    def shutdown(self, wait: bool = True) -> None:
        with self._lock:
            threads = list(self._threads)
        for _ in threads:
            self._work.put(None)
        if wait:
            for thread in threads:
                if thread is not threading.current_thread():  # shutdown() from inside a job
                    thread.join()


class LocalClient:
    """Runs jobs and actors on this machine. See the module docstring for the semantics.

    Args:
        max_threads: Most jobs that run at once (more wait as PENDING); ``None`` for no limit
            beyond 1024.
        echo_logs: Also copy job output to this process's stdout.
    """

    scheme = "local"

    def __init__(self, max_threads: int | None = None, *, echo_logs: bool = True) -> None:
        if max_threads is not None and (
            isinstance(max_threads, bool) or not isinstance(max_threads, int) or max_threads < 1
        ):
            raise InvalidRequestError.for_field(
                "LocalClient.max_threads", max_threads, "must be an integer >= 1, or None"
            )
        self.max_threads = max_threads
        self._echo = echo_logs
        self._uid = secrets.token_hex(4)
        self._pool = _JobThreads(max_threads or 1024)
        self._history: JobHistory[_Job] = JobHistory()
        self._grace = grace_seconds()  # checked now, not when a job is being stopped
        self._groups: list[LocalActorGroup] = []
        self._actor_names: set[str] = set()
        self._lock = threading.RLock()
        self._tmp: str | None = None
        self.is_shutdown = False
        self._finalizer = weakref.finalize(self, LocalClient._cleanup_processes, self._history.jobs)

    @classmethod
    def from_spec(cls, spec: _client.ClientSpec) -> LocalClient:
        """Builds a client from ``local`` or ``local?threads=N``."""
        spec.reject_unknown({"threads"}, address=False)
        return cls(max_threads=spec.param_int("threads"))

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.shutdown()

    def __repr__(self) -> str:
        return f"LocalClient(max_threads={self.max_threads}, jobs={len(self._history)})"

    # -- jobs --------------------------------------------------------------------------------

    def submit(self, request: JobRequest, *, adopt_existing: bool = True) -> LocalJobHandle:
        """Starts a job. Local job names need not be unique: each submit is a new job, so
        ``adopt_existing`` has nothing to adopt."""
        del adopt_existing
        if not isinstance(request, JobRequest):
            raise InvalidRequestError.for_field(
                "submit.request", request, "must be a fray.JobRequest"
            )
        self._check_open()
        process = self._needs_process(request)
        self._check_packages(request)
        parent = _current_job.get()
        if parent is not None and parent.client is not self:
            parent = None
        prefix = parent.job_id if parent is not None else os.environ.get(FRAY_JOB_ID)
        job_id = f"{request.name}-{secrets.token_hex(4)}"
        if prefix:
            job_id = f"{prefix}/{job_id}"
        job = _Job(self, job_id, request, parent)
        if process and request.entrypoint.is_callable:
            self._write_payload(job)
        with self._lock:
            self._check_open()
            self._history.add(job_id, job)
            if parent is not None:
                with parent.lock:
                    parent.children.append(job)
        self._pool.submit(self._run_job, job, process)
        return LocalJobHandle(job)

    def get_job(self, job_id: str) -> LocalJobHandle:
        """A handle to a job of this client, by id."""
        job = self._history.get(job_id)
        if job is None:
            raise JobNotFoundError(job_id, self._history.not_found(job_id, "LocalClient"))
        return LocalJobHandle(job)

    def list_jobs(self) -> list[JobInfo]:
        """Every unfinished job of this client and its most recent finished ones (see
        ``FRAY_JOB_HISTORY``), in submission order."""
        with self._lock:
            jobs = self._history.values()
        return [job.info() for job in jobs]

    def _check_open(self) -> None:
        if self.is_shutdown:
            raise FrayError("this LocalClient has been shut down; create a new one")

    @staticmethod
    def _needs_process(request: JobRequest) -> bool:
        is_tpu = isinstance(request.resources.device, TpuConfig)
        has_env = bool(request.environment and request.environment.env_vars)
        if request.isolation == "thread":
            reason = None
            if not request.entrypoint.is_callable:
                reason = "a command always runs in a process"
            elif has_env:
                reason = "env vars need a process of their own"
            elif is_tpu:
                reason = "TPU hosts each need a process with their own env"
            if reason:
                raise InvalidRequestError.for_field(
                    "JobRequest.isolation", "thread", f"{reason}; use 'auto' or 'process'"
                )
            return False
        if request.isolation == "process":
            return True
        return not request.entrypoint.is_callable or has_env or is_tpu

    @staticmethod
    def _check_packages(request: JobRequest) -> None:
        env = request.environment
        if env is None:
            return
        for requirement in env.pip_packages:
            name = _requirement_name(requirement)
            try:
                importlib.metadata.version(name)
            except importlib.metadata.PackageNotFoundError:
                raise InvalidRequestError.for_field(
                    "EnvironmentConfig.pip_packages",
                    requirement,
                    "the local backend runs jobs in this Python environment and does not "
                    f"install packages; {name} is not installed here (pip install it, or "
                    "run on Ray or Iris, which install pip_packages per job)",
                ) from None
        if env.docker_image is not None:
            raise InvalidRequestError.for_field(
                "EnvironmentConfig.docker_image",
                env.docker_image,
                "the local backend cannot run containers; leave it unset to run here",
            )

    def _workdir(self) -> str:
        with self._lock:
            if self._tmp is None:
                self._tmp = tempfile.mkdtemp(prefix=f"fray-local-{self._uid}-")
            return self._tmp

    def _write_payload(self, job: _Job) -> None:
        import cloudpickle

        entry = job.request.entrypoint
        try:
            data = cloudpickle.dumps((entry.callable, entry.args, entry.kwargs))
        except Exception as err:
            raise InvalidRequestError.for_field(
                "JobRequest.entrypoint",
                entry.describe(),
                f"a job that runs in its own process must be picklable: {type(err).__name__}: "
                f"{err}",
            ) from err
        workdir = os.path.join(self._workdir(), job.job_id.replace("/", "__"))
        os.makedirs(workdir, mode=0o700, exist_ok=True)
        fd = os.open(os.path.join(workdir, "payload.pkl"), os.O_WRONLY | os.O_CREAT, 0o600)
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        job.workdir = workdir

    def _run_job(self, job: _Job, process: bool) -> None:
        request = job.request
        try:
            with job.lock:
                if job.stop_requested:
                    return
                job.status = JobStatus.RUNNING
                job.started_at = time.time()
            while True:
                with job.lock:
                    if job.stop_requested:
                        return
                    job.attempts += 1
                    if job.attempts > 1:
                        job.log.reopen()
                outcome = self._attempt_process(job) if process else self._attempt_thread(job)
                kind = outcome[0]
                with job.lock:
                    if job.stop_requested:
                        return
                if kind == "ok":
                    job.value = outcome[1]
                    self._finish(job, JobStatus.SUCCEEDED)
                    return
                if kind == "failed":
                    _, cause, error, code = outcome
                    job.failures += 1
                    job.cause, job.error, job.exit_code = cause, error, code
                    if job.failures <= request.max_retries_failure:
                        job.log.write(f"[fray] attempt {job.attempts} failed ({error}); retrying\n")
                        continue
                    self._finish(job, JobStatus.FAILED)
                    return
                # Preempted: a replica was killed by something other than terminate().
                _, error, code = outcome
                job.preemptions += 1
                job.error, job.exit_code = error, code
                if job.preemptions <= request.max_retries_preemption:
                    job.log.write(
                        f"[fray] attempt {job.attempts} was preempted ({error}); retrying\n"
                    )
                    continue
                job.error = (
                    f"preempted {job.preemptions} times, more than max_retries_preemption="
                    f"{request.max_retries_preemption}; last: {error}"
                )
                self._finish(job, JobStatus.FAILED)
                return
        except BaseException as exc:  # a bug in this module: never leave a job hanging
            job.cause, job.error = exc, f"internal error in LocalClient: {exc!r}"
            self._finish(job, JobStatus.FAILED)
            if not isinstance(exc, _Terminated | Exception):
                raise
        finally:
            if job.stop_requested:
                self._finish(job, JobStatus.STOPPED)

    def _finish(self, job: _Job, status: JobStatus) -> None:
        with self._lock:  # before it is seen done (a second call changes nothing)
            self._history.finished(job.job_id)
        with job.lock:
            if job.done.is_set():
                return
            job.status = status
            job.finished_at = time.time()
            job.log.close()
            job.done.set()
            callbacks, job.callbacks = job.callbacks, []
            children = list(job.children)
        for child in children:  # children die with their parent
            if not child.done.is_set():
                self._terminate(child)
        for callback in callbacks:
            try:
                callback()
            except Exception:
                logger.exception("a done-callback of job %s raised", job.job_id)
        if job.workdir is not None:
            shutil.rmtree(job.workdir, ignore_errors=True)

    # -- thread jobs -------------------------------------------------------------------------

    def _attempt_thread(self, job: _Job) -> tuple[Any, ...]:
        count = job.request.replica_count
        replicas = [_Replica(i) for i in range(count)]
        job.replicas = replicas
        results: list[Any] = [None] * count
        errors: list[BaseException | None] = [None] * count

        def run(replica: _Replica) -> None:
            try:
                ctx = contextvars.Context()
                results[replica.index] = ctx.run(self._run_replica_thread, job, replica)
            except BaseException as exc:
                errors[replica.index] = exc

        threads: list[threading.Thread] = []
        for replica in replicas[1:]:
            thread = threading.Thread(
                target=run, args=(replica,), name=f"fray-{job.job_id}", daemon=True
            )
            threads.append(thread)
            thread.start()
        run(replicas[0])
        for thread in threads:
            thread.join()
        for error in errors:
            if isinstance(error, _Terminated):
                return ("stopped",)
        for error in errors:
            if error is not None:
                return ("failed", error, f"{type(error).__name__}: {error}", None)
        return ("ok", results[0] if count == 1 else results)

    def _run_replica_thread(self, job: _Job, replica: _Replica) -> Any:
        entry = job.request.entrypoint
        assert entry.callable is not None
        _client._explicit.set(self)
        _current_job.set(job)
        _task_index.set(replica.index)
        replica.thread_id = threading.get_ident()
        try:
            with capture_into(job.log, self._echo):
                with job.lock:
                    if job.stop_requested:
                        raise _Terminated
                    replica.in_user_code = True
                try:
                    return entry.callable(*entry.args, **entry.kwargs)
                finally:
                    with job.lock:
                        replica.in_user_code = False
                        signalled = job.signalled
                    if signalled:
                        # The user code may have returned before a stop injected into it
                        # arrived: take it here, where it changes nothing. (Clearing it with
                        # PyThreadState_SetAsyncExc(id, NULL) instead leaves CPython 3.11's
                        # eval breaker set for good: every thread then slows down, and a
                        # traced one, e.g. under a debugger or hypothesis, spins forever.)
                        # Not contextlib.suppress: its __enter__ is a Python call, where
                        # the stop would be raised outside the suppression.
                        try:  # noqa: SIM105
                            _deliver_pending()
                        except _Terminated:
                            pass
        except _Terminated:
            raise
        except BaseException:
            if job.stop_requested:
                raise _Terminated from None
            raise

    # -- process jobs ------------------------------------------------------------------------

    def _replica_env(self, job: _Job, index: int, coordinator_port: int) -> dict[str, str]:
        request = job.request
        env = dict(os.environ)
        device = request.resources.device
        defaults = dict(device.default_env_vars())
        if isinstance(device, TpuConfig):
            # No TPU here: JAX runs on the CPU, with the env a real host of the slice gets.
            defaults["JAX_PLATFORMS"] = "cpu"
            vms = device.vm_count()
            slices = request.replica_count // vms
            slice_id, worker = divmod(index, vms)
            env["TPU_NAME"] = f"{job.job_id.replace('/', '-')}-slice-{slice_id}"
            env["TPU_WORKER_ID"] = str(worker)
            env["TPU_ACCELERATOR_TYPE"] = device.variant
            env["TPU_WORKER_HOSTNAMES"] = ",".join(["127.0.0.1"] * vms)
            if slices > 1:
                env["MEGASCALE_COORDINATOR_ADDRESS"] = f"127.0.0.1:{coordinator_port}"
                env["MEGASCALE_NUM_SLICES"] = str(slices)
                env["MEGASCALE_SLICE_ID"] = str(slice_id)
                env["MEGASCALE_PORT"] = str(coordinator_port)
        for key, value in defaults.items():
            env.setdefault(key, value)
        if request.environment is not None:
            env.update(request.environment.env_vars)
        env[FRAY_JOB_ID] = job.job_id
        env[FRAY_TASK_INDEX] = str(index)
        env[FRAY_NUM_TASKS] = str(request.replica_count)
        env["PYTHONUNBUFFERED"] = "1"
        if request.entrypoint.is_callable:
            # The job unpickles functions by reference: give it the driver's import path.
            paths = [p for p in sys.path if p and os.path.isdir(p)]
            if env.get("PYTHONPATH"):
                paths.append(env["PYTHONPATH"])
            env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
        return env

    def _attempt_process(self, job: _Job) -> tuple[Any, ...]:
        request = job.request
        entry = request.entrypoint
        count = request.replica_count
        port = _free_port() if isinstance(request.resources.device, TpuConfig) else 0
        replicas = [_Replica(i) for i in range(count)]
        exits: queue.SimpleQueue[tuple[int, int]] = queue.SimpleQueue()
        readers: list[threading.Thread] = []
        with job.lock:
            if job.stop_requested:
                return ("stopped",)
            job.replicas = replicas
            job.signalled = False
            for replica in replicas:
                if entry.is_callable:
                    assert job.workdir is not None
                    replica.result_path = os.path.join(
                        job.workdir, f"result-{job.attempts}-{replica.index}.pkl"
                    )
                    argv = [
                        sys.executable,
                        "-m",
                        "fray._runner",
                        os.path.join(job.workdir, "payload.pkl"),
                        replica.result_path,
                    ]
                else:
                    assert entry.command is not None
                    argv = list(entry.command)
                replica.process = subprocess.Popen(
                    [sys.executable, _REAPER, str(os.getpid()), "--", *argv],
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                    env=self._replica_env(job, replica.index, port),
                    start_new_session=True,
                )
                reader = threading.Thread(
                    target=self._pump,
                    args=(job, replica, exits),
                    name=f"fray-log-{job.job_id}",
                    daemon=True,
                )
                reader.start()
                readers.append(reader)
        codes: dict[int, int] = {}
        while len(codes) < count:
            index, code = exits.get()
            codes[index] = code
            if code != 0 and len(codes) < count:
                # Gang semantics: one replica down takes the attempt down.
                self._signal_replicas(job, signal.SIGTERM)
                threading.Timer(self._grace, self._signal_replicas, (job, signal.SIGKILL)).start()
        for reader in readers:
            reader.join()
        if job.stop_requested:
            return ("stopped",)
        bad = [(i, c) for i, c in sorted(codes.items()) if c != 0]
        if not bad:
            if not entry.is_callable:
                job.exit_code = 0
                return ("ok", None)
            values = [self._read_result(r)[1] for r in replicas]
            return ("ok", values[0] if count == 1 else values)
        index, code = next(((i, c) for i, c in bad if c > 0), bad[0])
        if code < 0:
            name = signal.Signals(-code).name
            return ("preempted", f"replica {index} was killed by {name}", code)
        last = next((line for _ts, line in reversed(job.log.lines) if line.strip()), "")
        if entry.is_callable:
            record = self._read_result(replicas[index])
            if record[0] == "error":
                exc = record[1]
                return ("failed", exc, f"{type(exc).__name__}: {exc}", code)
        where = f"replica {index} " if count > 1 else ""
        error = f"{where}exited with code {code}" + (f"; last output: {last}" if last else "")
        return ("failed", None, error, code)

    @staticmethod
    def _read_result(replica: _Replica) -> tuple[Any, ...]:
        import cloudpickle

        assert replica.result_path is not None
        try:
            with open(replica.result_path, "rb") as f:
                return cloudpickle.loads(f.read())
        except FileNotFoundError:
            return ("missing",)
        except Exception as exc:
            return ("error", RuntimeError(f"the job's result could not be read: {exc!r}"), "")

    def _pump(
        self, job: _Job, replica: _Replica, exits: queue.SimpleQueue[tuple[int, int]]
    ) -> None:
        process = replica.process
        assert process is not None and process.stdout is not None
        echo = echo_stream() if self._echo else None
        sweeper = threading.Thread(
            target=self._sweep_group, args=(process,), name=f"fray-sweep-{job.job_id}", daemon=True
        )
        sweeper.start()
        for raw in iter(process.stdout.readline, b""):
            text = raw.decode("utf-8", errors="replace")
            if not text.endswith("\n"):  # the output's last line, without its newline
                text += "\n"
            job.log.write(text)
            if echo is not None:
                with contextlib.suppress(Exception):
                    echo.write(text)
        process.stdout.close()
        sweeper.join()
        exits.put((replica.index, process.wait()))

    @staticmethod
    def _sweep_group(process: subprocess.Popen[bytes]) -> None:
        """Once a replica's guardian has exited, kills whatever is left of its process group.

        The guardian does this itself when its command ends, but a guardian killed outright
        (SIGKILL, the OOM killer) cannot: the job's other processes would outlive it and hold
        the output pipe open, leaving the job RUNNING for good. The exited guardian is left
        unreaped until then (``WNOWAIT``), so the group id cannot have been reused.
        """
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitid(os.P_PID, process.pid, os.WEXITED | os.WNOWAIT)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)

    def _signal_replicas(self, job: _Job, sig: signal.Signals) -> None:
        for replica in list(job.replicas):
            process = replica.process
            if process is not None and process.poll() is None:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(process.pid, sig)

    # -- termination -------------------------------------------------------------------------

    def _terminate(self, job: _Job) -> None:
        for child in list(job.children):
            if not child.done.is_set():
                self._terminate(child)
        with job.lock:
            if job.done.is_set():
                return
            job.stop_requested = True
            job.signalled = True
            for replica in job.replicas:
                if replica.in_user_code and replica.thread_id is not None:
                    _inject(replica.thread_id, _Terminated)
            started = job.status is JobStatus.RUNNING
            threads_only = all(r.process is None for r in job.replicas)
        if not started:
            self._finish(job, JobStatus.STOPPED)
            return
        if threads_only:
            # The injected exception lands when the thread next runs Python code; a thread
            # blocked in C (a lock, a socket) unwinds later, but the job is STOPPED now.
            if not job.done.wait(_THREAD_STOP_WAIT_S):
                self._finish(job, JobStatus.STOPPED)
            return
        self._signal_replicas(job, signal.SIGTERM)
        if job.done.wait(self._grace):
            return
        self._signal_replicas(job, signal.SIGKILL)
        if not job.done.wait(2.0):
            # A thread blocked in C code cannot be interrupted; the job is STOPPED anyway.
            logger.warning("job %s did not stop within the grace period", job.job_id)
            self._finish(job, JobStatus.STOPPED)

    @staticmethod
    def _cleanup_processes(jobs: dict[str, _Job]) -> None:
        for job in list(jobs.values()):
            for replica in job.replicas:
                process = replica.process
                if process is not None and process.poll() is None:
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.killpg(process.pid, signal.SIGKILL)

    # -- actors ------------------------------------------------------------------------------

    def create_actor(
        self,
        actor_class: type[T],
        *args: Any,
        name: str,
        resources: ResourceConfig | None = None,
        actor_config: ActorConfig | None = None,
        **kwargs: Any,
    ) -> LocalActorHandle:
        """Creates one actor and returns its handle once its ``__init__`` has run.

        Raises:
            ActorError: ``__init__`` raised (chained as ``__cause__``).
        """
        group = self.create_actor_group(
            actor_class,
            *args,
            name=name,
            count=1,
            resources=resources,
            actor_config=actor_config,
            **kwargs,
        )
        return group.wait_ready(timeout=None)[0]

    def create_actor_group(
        self,
        actor_class: type[T],
        *args: Any,
        name: str,
        count: int,
        resources: ResourceConfig | None = None,
        actor_config: ActorConfig | None = None,
        **kwargs: Any,
    ) -> LocalActorGroup:
        """Creates ``count`` actors named ``{name}-{i}``; each ``__init__`` runs in the
        background, so this returns at once. Use ``wait_ready`` to wait for them."""
        self._check_open()
        _validate_actor_args(actor_class, name, count, resources, actor_config)
        config = actor_config or ActorConfig()
        actors: list[_Actor] = []
        with self._lock:
            taken = [f"{name}-{i}" for i in range(count) if f"{name}-{i}" in self._actor_names]
            if taken:
                raise ActorError(f"an actor named {taken[0]!r} already exists in this client")
            for i in range(count):
                actor_name = f"{name}-{i}"
                key = f"local-{self._uid}/{actor_name}"
                actor = _Actor(self, key, actor_name, i, name, config)
                actors.append(actor)
                self._actor_names.add(actor_name)
                with _ACTORS_LOCK:
                    _ACTORS[key] = actor
            group = LocalActorGroup(self, name, actors)
            self._groups.append(group)
        for actor in actors:
            threading.Thread(
                target=self._construct,
                args=(actor, actor_class, args, kwargs),
                name=f"fray-actor-init-{actor.name}",
                daemon=True,
            ).start()
        return group

    def _construct(
        self, actor: _Actor, cls: type[Any], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> None:
        token = _current_actor.set(actor.context)
        explicit = _client._explicit.set(self)
        try:
            instance = cls(*args, **kwargs)
        except BaseException as exc:
            actor.error = exc
            actor.status = JobStatus.FAILED
            actor.mailbox.close()
        else:
            actor.instance = instance
            if actor.status is JobStatus.PENDING:
                actor.status = JobStatus.RUNNING
        finally:
            _client._explicit.reset(explicit)
            _current_actor.reset(token)
            actor.ready.set()

    def _stop_actors(self, actors: list[_Actor]) -> None:
        for actor in actors:
            actor.ready.wait(timeout=30)
            if not actor.status.is_finished:
                actor.status = JobStatus.STOPPED
            actor.mailbox.close()
            with _ACTORS_LOCK:
                _ACTORS.pop(actor.key, None)
                _STOPPED_ACTORS.add(actor.key)
            actor.instance = None
            with self._lock:
                self._actor_names.discard(actor.name)

    # -- shutdown ----------------------------------------------------------------------------

    def shutdown(self, wait: bool = True) -> None:
        """Stops every job (children first) and actor, and removes temporary files."""
        with self._lock:
            if self.is_shutdown:
                return
            self.is_shutdown = True
            jobs = self._history.values()
            groups = list(self._groups)
        roots = [job for job in jobs if job.parent is None]
        threads = [
            threading.Thread(target=self._terminate, args=(job,), daemon=True)
            for job in roots
            if not job.done.is_set()
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        for group in groups:
            self._stop_actors(group._actors)  # pyright: ignore[reportPrivateUsage]
        self._pool.shutdown(wait=wait)
        self._cleanup_processes(self._history.jobs)
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
        _client.forget_default(self)


def _validate_actor_args(
    actor_class: Any, name: Any, count: Any, resources: Any, actor_config: Any
) -> None:
    if not isinstance(actor_class, type):
        raise InvalidRequestError.for_field("actor_class", actor_class, "must be a class")
    if not isinstance(name, str) or not _NAME_RE.match(name):
        raise InvalidRequestError.for_field(
            "name", name, "actor names are 1-128 letters, digits, '-', '_' and '.'"
        )
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise InvalidRequestError.for_field("count", count, "must be an integer >= 1")
    if resources is not None and not isinstance(resources, ResourceConfig):
        raise InvalidRequestError.for_field("resources", resources, "must be a ResourceConfig")
    if actor_config is not None and not isinstance(actor_config, ActorConfig):
        raise InvalidRequestError.for_field("actor_config", actor_config, "must be an ActorConfig")


def task_index() -> int:
    """This replica's index within its job (0 for single-replica jobs and the driver)."""
    if _current_job.get() is not None:
        return _task_index.get()
    return int(os.environ.get(FRAY_TASK_INDEX, "0"))


def current_job_id() -> str | None:
    """The id of the job running this code, or ``None`` outside a job."""
    job = _current_job.get()
    if job is not None:
        return job.job_id
    return os.environ.get(FRAY_JOB_ID)
