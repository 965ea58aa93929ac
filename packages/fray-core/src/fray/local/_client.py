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

import functools
import importlib.metadata
import itertools
import logging
import os
import re
import secrets
import shutil
import signal
import stat
import tempfile
import threading
import tomllib
import weakref
from collections.abc import Sequence
from typing import Any, TypeVar

from fray._actor import HostedActor
from fray._client import ClientSpec
from fray._types import ActorConfig, JobInfo, JobRequest, JobStatus, ResourceConfig, TpuConfig
from fray.backend import (
    BaseClient,
    JobHistory,
    capabilities_of,
    forget_default_client,
    hosted_init_failed,
    job_id_part,
    validate_actor_args,
)
from fray.environment_variables import FRAY_JOB_ID
from fray.errors import ActorError, InvalidRequestError, JobNotFoundError
from fray.local._actors import LocalActor, LocalActorGroup, register, unregister
from fray.local._jobs import LocalJob, LocalJobHandle, current_job, grace_seconds
from fray.local._processes import (
    attempt_process,
    kill_all,
    signal_replicas,
    stop_replicas,
    write_payload,
)
from fray.local._threads import JobThreads, Reserved, Terminated, attempt_thread, inject_stop

__all__ = ["LocalClient"]

logger = logging.getLogger("fray.local")
T = TypeVar("T")

_THREAD_STOP_WAIT_S = 0.5


def _requirement_name(requirement: str) -> str:
    return re.split(r"[\s\[<>=!~;@]", requirement.strip(), maxsplit=1)[0]


LOCAL_CAPABILITIES = capabilities_of("local")


# Distributions found installed (a lookup scans every folder of sys.path). Only the yes is
# kept: a package installed while the driver runs is seen at the next submit.
_FOUND_INSTALLED: set[str] = set()


def _installed(name: str) -> bool:
    if name in _FOUND_INSTALLED:
        return True
    try:
        importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return False
    _FOUND_INSTALLED.add(name)
    return True


def _project_extras(start: str) -> tuple[str, dict[str, list[str]]] | None:
    """The nearest ``pyproject.toml`` at or above ``start`` and its optional dependencies."""
    folder = os.path.abspath(start)
    while True:
        path = os.path.join(folder, "pyproject.toml")
        try:
            st = os.stat(path)
        except OSError:
            st = None
        if st is not None and stat.S_ISREG(st.st_mode):
            return path, _declared_extras(path, st.st_mtime_ns, st.st_size)
        parent = os.path.dirname(folder)
        if parent == folder:
            return None
        folder = parent


@functools.lru_cache(maxsize=16)
def _declared_extras(path: str, mtime_ns: int, size: int) -> dict[str, list[str]]:
    """The optional dependencies ``path`` declares; read again once it has changed (a new
    modification time or size)."""
    del mtime_ns, size  # the cache key
    with open(path, "rb") as f:
        project = tomllib.load(f).get("project", {})
    return dict(project.get("optional-dependencies", {}))


def _check_extras(extras: Sequence[str], start: str) -> None:
    """Each extra is one of the project's, and what it requires (unconditionally) is
    installed here."""
    found = _project_extras(start)
    if found is None:
        raise InvalidRequestError.for_field(
            "EnvironmentConfig.extras",
            list(extras),
            f"extras of the project the job runs from; no pyproject.toml at or above {start} "
            "(set EnvironmentConfig.workspace to the project)",
        )
    path, declared = found
    for extra in extras:
        if extra not in declared:
            raise InvalidRequestError.for_field(
                "EnvironmentConfig.extras",
                extra,
                f"one of the extras {path} declares: {', '.join(sorted(declared)) or 'none'}",
            )
        for requirement in declared[extra]:
            name = _requirement_name(requirement)
            if ";" not in requirement and not _installed(name):
                raise InvalidRequestError.for_field(
                    "EnvironmentConfig.extras",
                    extra,
                    "extras whose packages are installed here: the local backend runs jobs in "
                    f"this Python environment and installs nothing, and {name} (from extra "
                    f"{extra!r} of {path}) is not installed (install the project with that "
                    "extra, or run on Iris, which installs extras per job)",
                )


class LocalClient(BaseClient):
    """Runs jobs and actors on this machine. See the module docstring for the semantics.

    Args:
        max_threads: Most jobs that run at once (more wait as PENDING); ``None`` for no limit
            beyond 1024.
        echo_logs: Also copy job output to this process's stdout.
        target: Also check every request (and actor resources) against the capability table
            of this backend (``"ray"``, ``"iris"``), so code tested here is refused where
            that cluster would refuse it, with its message.
    """

    scheme = "local"
    capabilities = LOCAL_CAPABILITIES

    def __init__(
        self, max_threads: int | None = None, *, echo_logs: bool = True, target: str | None = None
    ) -> None:
        self._set_target(target, "LocalClient.target")
        if max_threads is not None and (
            isinstance(max_threads, bool) or not isinstance(max_threads, int) or max_threads < 1
        ):
            raise InvalidRequestError.for_field(
                "LocalClient.max_threads", max_threads, "must be an integer >= 1, or None"
            )
        self.max_threads = max_threads
        self.echo_logs = echo_logs
        self._uid = secrets.token_hex(4)
        # Job ids end in 8 hex digits: a count from a random start, unique in this client
        # (random ones could repeat) and without a system call per job.
        self._serials = itertools.count(secrets.randbits(32))
        self._pool = JobThreads(max_threads or 1024)
        self._history: JobHistory[LocalJob] = JobHistory()
        self.grace = grace_seconds()  # checked now, not when a job is being stopped
        self._groups: list[LocalActorGroup] = []
        self._actor_names: set[str] = set()
        self._lock = threading.RLock()
        self._tmp: str | None = None
        self.is_shutdown = False
        self._finalizer = weakref.finalize(self, kill_all, self._history.jobs)

    @classmethod
    def from_spec(cls, spec: ClientSpec) -> LocalClient:
        """Builds a client from ``local``, ``local?threads=N`` or ``local?target=ray``."""
        spec.reject_unknown({"threads", "target"}, address=False)
        return cls(max_threads=spec.param_int("threads"), target=spec.params.get("target"))

    def __repr__(self) -> str:
        return f"LocalClient(max_threads={self.max_threads}, jobs={len(self._history)})"

    # -- jobs --------------------------------------------------------------------------------

    def submit(self, request: JobRequest, *, adopt_existing: bool = True) -> LocalJobHandle:
        """Starts a job. Local job names need not be unique: each submit is a new job, so
        ``adopt_existing`` has nothing to adopt."""
        del adopt_existing
        self._check_request(request)
        self._check_open()
        process = self._needs_process(request)
        self._check_packages(request)
        # A thread is woken now and waits for the job: its wake-up overlaps the rest.
        turn: Reserved | None = None
        try:
            turn = self._pool.reserve()
            job = self._new_job(request, process)
        except BaseException:
            if turn is not None:
                turn.give(None)
            raise
        turn.give(self._run_job, job, process)
        return LocalJobHandle(job)

    def _new_job(self, request: JobRequest, process: bool) -> LocalJob:
        """The job's record, in the history (and its parent's children)."""
        parent = current_job.get()
        if parent is not None and parent.client is not self:
            parent = None
        prefix = parent.job_id if parent is not None else os.environ.get(FRAY_JOB_ID)
        job_id = f"{job_id_part(request.name)}-{next(self._serials) & 0xFFFFFFFF:08x}"
        if prefix:
            job_id = f"{prefix}/{job_id}"
        job = LocalJob(self, job_id, request, parent, prefix)
        if process and request.entrypoint.is_callable:
            write_payload(job, os.path.join(self._workdir(), job_id.replace("/", "__")))
        with self._lock:
            self._check_open()
            self._history.add(job_id, job)
            if parent is not None:
                with parent.lock:
                    parent.children.append(job)
        return job

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
        return [LocalJobHandle(job).info() for job in jobs]

    @staticmethod
    def _needs_process(request: JobRequest) -> bool:
        """Whether a request runs in a process of its own (``isolation="thread"`` for those
        that must is refused by :data:`LOCAL`'s table)."""
        if request.isolation != "auto":
            return request.isolation == "process"
        has_env = bool(request.environment and request.environment.env_vars)
        is_tpu = isinstance(request.resources.device, TpuConfig)
        return not request.entrypoint.is_callable or has_env or is_tpu

    @staticmethod
    def _check_packages(request: JobRequest) -> None:
        """The local backend installs nothing: ``pip_packages`` and the requirements of the
        project's ``extras`` must already be installed here."""
        env = request.environment
        if env is None:
            return
        for requirement in env.pip_packages:
            name = _requirement_name(requirement)
            if not _installed(name):
                raise InvalidRequestError.for_field(
                    "EnvironmentConfig.pip_packages",
                    requirement,
                    "the local backend runs jobs in this Python environment and does not "
                    f"install packages; {name} is not installed here (pip install it, or "
                    "run on Ray or Iris, which install pip_packages per job)",
                )
        if env.extras:
            _check_extras(env.extras, env.workspace or os.getcwd())

    def _workdir(self) -> str:
        with self._lock:
            if self._tmp is None:
                self._tmp = tempfile.mkdtemp(prefix=f"fray-local-{self._uid}-")
                # Removed at shutdown(), or when the client is collected or the interpreter
                # exits without one.
                weakref.finalize(self, shutil.rmtree, self._tmp, True)
            return self._tmp

    def _run_job(self, job: LocalJob, process: bool) -> None:
        try:
            if not job.mark_running():
                return
            while True:
                with job.lock:
                    if job.stop_requested:
                        return
                    if job.begin_attempt() > 1:
                        job.log.reopen()
                timer = self._arm_timeout(job)
                outcome: tuple[Any, ...]
                try:
                    outcome = attempt_process(self, job) if process else attempt_thread(self, job)
                finally:
                    if timer is not None:
                        timer.cancel()
                if job.stop_requested:
                    return
                if job.timed_out == job.attempts:
                    job.on_timeout(len(job.replicas))
                    job.finish(JobStatus.FAILED)
                    return
                kind = outcome[0]
                if kind == "stopped":
                    return
                if kind == "ok":
                    job.value = outcome[1]
                    job.finish(JobStatus.SUCCEEDED)
                    return
                if kind == "failed":
                    _, cause, error, code, failed = outcome
                    if job.on_failure(cause, error, code, failed_tasks=failed):
                        continue
                    job.finish(JobStatus.FAILED)
                    return
                # Preempted: a replica was killed by something other than terminate().
                _, error, code = outcome
                if job.on_preemption(error, code):
                    continue
                job.finish(JobStatus.FAILED)
                return
        except BaseException as exc:  # a bug in this module: never leave a job hanging
            job.cause, job.error = exc, f"internal error in LocalClient: {exc!r}"
            job.finish(JobStatus.FAILED)
            if not isinstance(exc, Terminated | Exception):
                raise
        finally:
            if not job.ended:  # stopped: by terminate(), or before it could start
                job.finish(JobStatus.STOPPED)

    def _arm_timeout(self, job: LocalJob) -> threading.Timer | None:
        """Stops the attempt now starting once it has run ``JobRequest.timeout`` seconds."""
        timeout = job.request.timeout
        if timeout is None:
            return None
        timer = threading.Timer(timeout, self._time_out, (job, job.attempts))
        timer.daemon = True
        timer.start()
        return timer

    def _time_out(self, job: LocalJob, attempt: int) -> None:
        with job.lock:
            if job.ended or job.stop_requested or job.attempts != attempt:
                return
            job.timed_out = attempt
            job.signalled = True
            for replica in job.replicas:
                if replica.in_user_code and replica.thread_id is not None:
                    inject_stop(replica.thread_id)
            processes = any(r.process is not None for r in job.replicas)
        if processes:
            stop_replicas(job, self.grace)

    def _job_ended(self, job: LocalJob) -> None:
        with self._lock:  # before it is seen done
            self._history.finished(job.job_id)

    # -- termination -------------------------------------------------------------------------

    def _terminate(self, job: LocalJob) -> None:
        for child in list(job.children):
            if not child.is_done:
                self._terminate(child)
        with job.lock:
            if job.ended:
                return
            job.stop_requested = True
            job.signalled = True
            for replica in job.replicas:
                if replica.in_user_code and replica.thread_id is not None:
                    inject_stop(replica.thread_id)
            started = job.status is JobStatus.RUNNING
            threads_only = all(r.process is None for r in job.replicas)
        if not started:
            job.finish(JobStatus.STOPPED)
            return
        if threads_only:
            # The injected exception lands when the thread next runs Python code; a thread
            # blocked in C (a lock, a socket) unwinds later, but the job is STOPPED now.
            if not job.wait_done(_THREAD_STOP_WAIT_S):
                job.finish(JobStatus.STOPPED)
            return
        signal_replicas(job, signal.SIGTERM)
        if job.wait_done(self.grace):
            return
        signal_replicas(job, signal.SIGKILL)
        if not job.wait_done(2.0):
            # A thread blocked in C code cannot be interrupted; the job is STOPPED anyway.
            logger.warning("job %s did not stop within the grace period", job.job_id)
            job.finish(JobStatus.STOPPED)

    # -- actors ------------------------------------------------------------------------------

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
        validate_actor_args(actor_class, name, count, resources, actor_config)
        self._check_resources(resources)
        config = actor_config or ActorConfig()
        actors: list[LocalActor] = []
        with self._lock:
            taken = [f"{name}-{i}" for i in range(count) if f"{name}-{i}" in self._actor_names]
            if taken:
                raise ActorError(f"an actor named {taken[0]!r} already exists in this client")
            for i in range(count):
                actor_name = f"{name}-{i}"
                key = f"local-{self._uid}/{actor_name}"
                actor = LocalActor(self, key, actor_name, i, name, config)
                actors.append(actor)
                self._actor_names.add(actor_name)
                register(actor)
            group = LocalActorGroup(self, name, actors)
            self._groups.append(group)
        for actor in actors:
            threading.Thread(
                target=actor.construct,
                args=(actor_class, args, kwargs),
                name=f"fray-actor-init-{actor.name}",
                daemon=True,
            ).start()
        return group

    def host_actor(
        self,
        actor_class: type[T],
        *args: Any,
        name: str,
        actor_config: ActorConfig | None = None,
        **kwargs: Any,
    ) -> HostedActor:
        """Runs ``actor_class(*args, **kwargs)`` here, in the calling thread, and returns
        once ``__init__`` has run. Its handle works as every local actor's does: from this
        process (the driver, thread jobs and actors)."""
        self._check_open()
        validate_actor_args(actor_class, name, 1, None, actor_config)
        config = actor_config or ActorConfig()
        with self._lock:
            if name in self._actor_names:
                raise ActorError(f"an actor named {name!r} already exists in this client")
            actor = LocalActor(
                self, f"local-{self._uid}/{name}", name, 0, name, config, hosted=True
            )
            self._actor_names.add(name)
            register(actor)
            group = LocalActorGroup(self, name, [actor])
            self._groups.append(group)
        actor.construct(actor_class, args, kwargs)
        if actor.status is JobStatus.FAILED:
            self._stop_actors([actor])
            error = actor.error
            raise hosted_init_failed(name, actor_class, error) from error
        return HostedActor(actor.handle, lambda: self._stop_actors([actor]))

    def _stop_actors(self, actors: list[LocalActor]) -> None:
        for actor in actors:
            actor.ready.wait(timeout=30)
            actor.set_status(JobStatus.STOPPED)
            actor.mailbox.close()
            unregister(actor)
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
        roots = [job for job in jobs if job.parent_job is None]
        threads = [
            threading.Thread(target=self._terminate, args=(job,), daemon=True)
            for job in roots
            if not job.is_done
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        for group in groups:
            self._stop_actors(group.actors)
        self._pool.shutdown(wait=wait)
        kill_all(self._history.jobs)
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
        forget_default_client(self)
