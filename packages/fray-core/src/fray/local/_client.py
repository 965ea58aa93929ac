"""LocalClient: jobs and actors on this machine, with the semantics of a real cluster.

Callables run in threads of this process unless they need a process (env vars, TPU hosts,
``isolation="process"``); commands always do. A process job runs in its own session under a
guardian (``_reaper.py``): ``terminate()`` stops its whole process tree, and nothing outlives
the driver. A thread job is stopped by an exception raised in its threads, which code blocked
in C only sees when it returns to Python: it is then recorded STOPPED after half a second and
left to end on its own (use ``isolation="process"`` for jobs that must always stop).

Resources are validated, not enforced. A TPU job runs one process per VM of each slice with
the env a real slice gives (``TPU_WORKER_ID``, ``MEGASCALE_*``...) and ``JAX_PLATFORMS=cpu``;
GPU jobs run on the CPU; regions, zones and ``preemptible`` are no-ops.

With ``record=True`` (spec ``local?record=1``) every job is also recorded in the run store
(``FRAY_STATE_DIR``), where ``fray jobs`` and ``fray dashboard`` find it after this process
has exited; off by default, it costs nothing then.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import os
import re
import shutil
import signal
import tempfile
import tomllib
import weakref
from collections.abc import Sequence
from typing import Any

from fray._actor import HostedActor
from fray._model import whole
from fray._types import ActorConfig, EnvironmentConfig, JobRequest, ResourceConfig, TpuConfig
from fray.backend import BaseClient, ClientSpec, JobRecord, Outcome, capabilities_of
from fray.backend._capabilities import has_secrets, sets_env_vars
from fray.errors import InvalidRequestError
from fray.local._actors import InProcessActors
from fray.local._jobs import LocalJobHandle, grace_seconds
from fray.local._processes import run_processes, signal_replicas, stop_processes
from fray.local._threads import JobThreads, run_threads, stop_threads

_THREAD_STOP_WAIT_S = 0.5
_KILL_WAIT_S = 2.0


def _not_installed(requirement: str) -> str | None:
    """The name of the package ``requirement`` asks for, if it is not installed here."""
    name = re.split(r"[\s\[<>=!~;@]", requirement.strip(), maxsplit=1)[0]
    try:
        importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return name
    return None


def _check_packages(env: EnvironmentConfig) -> None:
    """The local backend installs nothing: ``pip_packages`` and the requirements of the
    project's ``extras`` must already be installed here."""
    for requirement in env.pip_packages:
        name = _not_installed(requirement)
        if name is not None:
            raise InvalidRequestError.for_field(
                "EnvironmentConfig.pip_packages",
                requirement,
                "the local backend runs jobs in this Python environment and does not install "
                f"packages; {name} is not installed here (pip install it, or run on Ray or "
                "Iris, which install pip_packages per job)",
            )
    if env.extras:
        _check_extras(env.extras, env.workspace or os.getcwd())


def _check_extras(extras: Sequence[str], start: str) -> None:
    """Each extra is one of the nearest project's (``pyproject.toml`` at or above
    ``start``), and what it requires (unconditionally) is installed here."""
    field = "EnvironmentConfig.extras"
    folder = os.path.abspath(start)
    while not os.path.isfile(os.path.join(folder, "pyproject.toml")):
        if os.path.dirname(folder) == folder:
            raise InvalidRequestError.for_field(
                field,
                list(extras),
                f"extras of the project the job runs from; no pyproject.toml at or above {start} "
                "(set EnvironmentConfig.workspace to the project)",
            )
        folder = os.path.dirname(folder)
    path = os.path.join(folder, "pyproject.toml")
    with open(path, "rb") as f:
        declared = dict(tomllib.load(f).get("project", {}).get("optional-dependencies", {}))
    for extra in extras:
        if extra not in declared:
            raise InvalidRequestError.for_field(
                field,
                extra,
                f"one of the extras {path} declares: {', '.join(sorted(declared)) or 'none'}",
            )
        for requirement in declared[extra]:
            name = None if ";" in requirement else _not_installed(requirement)
            if name is not None:
                raise InvalidRequestError.for_field(
                    field,
                    extra,
                    "extras whose packages are installed here: the local backend runs jobs in "
                    f"this Python environment and installs nothing, and {name} (from extra "
                    f"{extra!r} of {path}) is not installed (install the project with that "
                    "extra, or run on Iris, which installs extras per job)",
                )


def _needs_process(request: JobRequest) -> bool:
    """Whether a request runs in processes of its own (``isolation="thread"`` for one that
    must is refused by the local capability table)."""
    if request.isolation != "auto":
        return request.isolation == "process"
    if request.entrypoint.callable is None or isinstance(request.resources.device, TpuConfig):
        return True
    return request.environment is not None and (sets_env_vars(request) or has_secrets(request))


def _payload(request: JobRequest) -> bytes:
    """The callable and its arguments, pickled for a job process (or InvalidRequestError)."""

    import cloudpickle

    entry = request.entrypoint
    try:
        return cloudpickle.dumps((entry.callable, entry.args, entry.kwargs))
    except Exception as err:
        raise InvalidRequestError.for_field(
            "JobRequest.entrypoint",
            entry.describe(),
            f"a job that runs in its own process must be picklable: {type(err).__name__}: {err}",
        ) from err


@dataclasses.dataclass(slots=True)
class LocalData:
    """What a process job keeps (``JobRecord.data``; a thread job keeps nothing, ``None``,
    so a finished one is its record and the record's lock): its pickled callable, its
    private folder, the variables delivering its secrets, and the current attempt's
    replicas."""

    payload: bytes | None
    workdir: str | None = None
    secrets: dict[str, str] = dataclasses.field(default_factory=dict[str, str])
    replicas: list[Any] = dataclasses.field(default_factory=list[Any])


class LocalClient(BaseClient):
    """Runs jobs and actors on this machine (see the module docstring).

    Args:
        max_threads: Most jobs that run at once (more wait as PENDING); ``None``: 1024.
        echo_logs: Also copy job output to this process's stdout.
        target: Also check every request against this backend's capability table
            (``"ray"``, ``"iris"``), so code tested here is refused where it would be there.
        record: Also record every job (its facts and, once it ends, its output) in the run
            store, for ``fray jobs`` and ``fray dashboard`` after this process exits.
    """

    scheme = "local"
    capabilities = capabilities_of("local")
    handle_type = LocalJobHandle
    ignores = ("setup_scripts", "sync_packages")

    def __init__(
        self,
        max_threads: int | None = None,
        *,
        echo_logs: bool = True,
        target: str | None = None,
        record: bool = False,
    ) -> None:
        super().__init__(target, "LocalClient.target")
        if max_threads is not None and not whole(max_threads, 1):
            raise InvalidRequestError.for_field(
                "LocalClient.max_threads", max_threads, "must be an integer >= 1, or None"
            )
        for field, value in (("echo_logs", echo_logs), ("record", record)):
            if not isinstance(value, bool):
                raise InvalidRequestError.for_field(f"LocalClient.{field}", value, "True or False")
        self.max_threads = max_threads
        self.echo_logs = echo_logs
        self.grace = grace_seconds()  # checked now, not when a job is being stopped
        self.pool = JobThreads(max_threads or 1024, LocalClient._attempt)
        self._actors = InProcessActors(self, serve_after_end=True)
        self._tmp: str | None = None
        self._finalizer = weakref.finalize(self, _kill_all, self._jobs)
        self._recorder = _recorder() if record else None

    @classmethod
    def from_spec(cls, spec: ClientSpec) -> LocalClient:
        """Builds a client from ``local``, ``local?threads=N``, ``local?target=ray`` or
        ``local?record=1``."""
        spec.reject_unknown({"threads", "target", "record"}, address=False)
        record = spec.params.get("record", "0")
        if record not in ("0", "1"):
            raise InvalidRequestError.for_field(f"{spec.field}.record", record, "0 or 1")
        return cls(
            max_threads=spec.param_int("threads"),
            target=spec.params.get("target"),
            record=record == "1",
        )

    # -- jobs --------------------------------------------------------------------------------

    def _prepare(self, request: JobRequest) -> LocalData | None:
        if request.environment is not None:
            _check_packages(request.environment)
        if not _needs_process(request):
            return None
        return LocalData(_payload(request) if request.entrypoint.is_callable else None)

    def _start_attempt(self, job: JobRecord) -> Outcome | None:
        if self._recorder is not None and job.begun == 1 and job.request is not None:
            # Recorded as its first attempt starts, which is as it is submitted.
            env = job.request.environment
            secrets = {} if env is None else {**env.env_vars, **env.secrets}
            what = job.request.entrypoint.describe()
            self._recorder.submitted(self.handle_type(job), secrets, what)
        self.pool.submit(job)
        return None

    @staticmethod
    def _attempt(job: JobRecord) -> None:
        """Runs an attempt on a pool thread. Never raises: the job records its outcome."""
        try:
            client = job.client
            assert isinstance(client, LocalClient)
            if not job.placed():  # stopped while it waited for its turn
                outcome = Outcome.stopped()
            else:
                if client._recorder is not None:
                    client._recorder.changed(job.job_id)  # placed
                outcome = (
                    run_threads(client, job) if job.data is None else run_processes(client, job)
                )
        except BaseException as exc:  # a bug here: never leave a job hanging
            outcome = Outcome.failed(exc, f"internal error in LocalClient: {exc!r}")
        job.report(outcome)

    def _cancel_attempt(self, job: JobRecord) -> float:
        data: LocalData | None = job.data
        with job.lock:
            if data is None:
                stop_threads(job)
                return _THREAD_STOP_WAIT_S
            replicas = list(data.replicas)
        stop_processes(replicas, self.grace)
        return self.grace + _KILL_WAIT_S

    def job_folder(self, job: JobRecord) -> str:
        """A private (0700) folder for the job's files, removed when it ends."""
        with self._lock:
            if self._tmp is None:
                self._tmp = tempfile.mkdtemp(prefix="fray-local-")
                # Removed at shutdown(), or when the client is collected or the interpreter
                # exits without one.
                weakref.finalize(self, shutil.rmtree, self._tmp, True)
        folder = os.path.join(self._tmp, job.job_id.replace("/", "__"))
        os.makedirs(folder, mode=0o700, exist_ok=True)
        return folder

    def _job_ended(self, job: JobRecord) -> None:
        super()._job_ended(job)  # its files go before anyone waiting sees it ended
        if self._recorder is not None:
            self._recorder.ended(job.job_id, job.log.snapshot())
        data = job.data
        if isinstance(data, LocalData):
            data.payload = None  # the history keeps no pickled callables
            if data.workdir is not None:
                shutil.rmtree(data.workdir, ignore_errors=True)

    # -- actors ------------------------------------------------------------------------------

    def _create_actor_group(
        self,
        actor_class: type[Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        *,
        name: str,
        count: int,
        resources: ResourceConfig | None,
        actor_config: ActorConfig | None,
        single: bool,
    ) -> Any:
        # Each __init__ runs in the background: this returns at once.
        del resources, single
        return self._actors.create(actor_class, args, kwargs, name, count, actor_config)

    def _host_actor(
        self,
        actor_class: type[Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        name: str,
        actor_config: ActorConfig | None,
    ) -> HostedActor:
        return self._actors.host(actor_class, args, kwargs, name=name, config=actor_config)

    # -- shutdown ----------------------------------------------------------------------------

    def _shutdown(self, wait: bool) -> None:
        self._actors.shutdown()
        self.pool.close()
        _kill_all(self._jobs)
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)


def _recorder() -> Any:
    """The run store's recorder (imported only when a client records)."""
    from fray.cli._jobs import RunRecorder

    return RunRecorder()


def _kill_all(jobs: dict[str, JobRecord]) -> None:
    """SIGKILLs every process of these jobs (at shutdown, and the client's finalizer)."""
    for job in list(jobs.values()):
        data = job.data
        if isinstance(data, LocalData):
            signal_replicas(list(data.replicas), signal.SIGKILL)
