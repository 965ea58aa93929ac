# pyright: standard
"""Entry points: ``submit_tpu_job`` (the RayClient route) and ``run_on_pod`` and friends."""

from __future__ import annotations

import concurrent.futures
import contextlib
import os
import secrets
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import cloudpickle
import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from fray import JobInfo, JobRequest, JobStatus, TpuConfig
from fray.errors import InvalidRequestError, JobTimeoutError
from fray.topology import get_tpu_topology
from fray_tpu import environment_variables as ev
from fray_tpu._errors import TpuJobFailedError, TpuSchedulingError
from fray_tpu._multislice import DEFAULT_MEGASCALE_PORT
from fray_tpu.ray._host import HostPayload
from fray_tpu.ray._state import JobState
from fray_tpu.ray._supervisor import GangSpec, supervise
from fray_tpu.ray._util import rget

__all__ = [
    "TpuJobHandle",
    "run_on_pod",
    "run_on_pod_multislice",
    "run_on_pod_multislice_resumable",
    "run_on_pod_resumable",
    "submit_tpu_job",
]

_DEFAULT_SCHEDULING_TIMEOUT_S = 600.0
_DEFAULT_HEALTH_INTERVAL_S = 2.0
_TERMINATE_GRACE_S = 30.0


def _env_float(name: str, default: float) -> float:
    text = os.environ.get(name)
    if not text:
        return default
    try:
        value = float(text)
    except ValueError:
        raise InvalidRequestError.for_field(name, text, "must be a number of seconds") from None
    if value <= 0:
        raise InvalidRequestError.for_field(name, text, "must be a positive number of seconds")
    return value


class TpuJobHandle:
    """Handle to a TPU gang job on Ray; implements ``fray.JobHandle``.

    ``result()`` is the list of per-host return values ordered slice by slice, then by
    worker id within a slice (a single value when the job has one replica).

    Once the supervisor has returned, the handle copies the job's state (counters, output
    lines, first cause) from the job's state actor and releases that actor: a finished job
    leaves no process behind, however long the driver runs. Everything the handle answers
    after that comes from the copy.
    """

    def __init__(self, job_id: str, state: Any, ref: Any, replicas: int, is_callable: bool) -> None:
        self._job_id = job_id
        self._state = state
        self._ref = ref
        self._replicas = replicas
        self._is_callable = is_callable
        self._future: concurrent.futures.Future[Any] = ref.future()
        # Set once, by _outcome(), after the copies below it.
        self._final: dict[str, Any] | None = None
        self._lines: list[str] = []  # every line the state held at the end
        self._dropped = 0  # lines the state had dropped before those
        self._cause: bytes | None = None  # the first cause, pickled
        self._settle_lock = threading.Lock()
        # Nobody may ever wait on this handle: the copy is taken when the supervisor returns.
        self._future.add_done_callback(lambda _future: self._settle_soon())

    @property
    def job_id(self) -> str:
        """The job's id."""
        return self._job_id

    # -- status ----------------------------------------------------------------------------

    def _settle_soon(self) -> None:
        """From Ray's completion callback, which must not block: settles in a thread."""
        threading.Thread(
            target=self._outcome, name=f"fray-tpu-settle-{self._job_id}", daemon=True
        ).start()

    def _outcome(self) -> dict[str, Any]:
        """The supervisor's final answer, merged with the state actor's counters (blocks
        until the supervisor returns). The first call copies the job's state and releases
        its actor."""
        final = self._final
        if final is not None:
            return final
        try:
            answer = self._future.result()
        except Exception as exc:
            # The supervisor task itself failed or was cancelled (terminate's last resort).
            answer = {"status": "stopped" if _is_cancelled(exc) else "failed", "crash": exc}
        with self._settle_lock:
            if self._final is not None:
                return self._final
            try:
                kept = rget(self._state.final.remote(), timeout=30)
            except Exception:  # the state actor is gone: only the supervisor's answer is left
                kept = {}
            snap = kept.get("snapshot") or {}
            status = answer.get("status", "failed")
            if snap.get("stop_requested") and status != "succeeded":
                status = "stopped"
            final = {**snap, **answer, "status": status}
            if "crash" in answer and not final.get("error"):
                final["error"] = f"the TPU supervisor task failed: {answer['crash']}"
                final["reason"] = "internal"
            self._lines = list(kept.get("lines") or [])
            self._dropped = int(kept.get("dropped") or 0)
            self._cause = kept.get("first_cause")
            self._final = final
            with contextlib.suppress(Exception):  # already gone is just as good
                ray.kill(self._state, no_restart=True)
        return final

    def status(self) -> JobStatus:
        """The job's current status."""
        snap = self._running_snapshot()
        if snap is not None:
            return JobStatus(snap["status"])
        if self._future.done():  # ended (its state may be released): the copy says
            return JobStatus(self._outcome()["status"])
        return JobStatus.RUNNING  # the state actor could not be reached

    def wait(self, timeout: float | None = None, *, raise_on_failure: bool = True) -> JobStatus:
        """Blocks until the job is finished; see ``fray.JobHandle.wait``."""
        try:
            self._future.result(timeout=timeout)
        except concurrent.futures.TimeoutError:
            raise JobTimeoutError(
                f"TPU job {self._job_id} is still {self.status().value} after {timeout}s"
            ) from None
        except Exception:
            pass  # reported through _outcome()
        final = self._outcome()
        status = JobStatus(final["status"])
        if status is JobStatus.FAILED and raise_on_failure:
            raise self._error(final)
        return status

    def _error(self, final: dict[str, Any]) -> TpuJobFailedError:
        reason = final.get("reason") or "failure"
        cls = TpuSchedulingError if reason == "scheduling" else TpuJobFailedError
        error = cls(
            self._job_id,
            JobStatus(final["status"]),
            final.get("error"),
            attempts=final.get("attempts", 0),
            preemptions=final.get("preemptions", 0),
            failures=final.get("failures", 0),
            reason=reason,
        )
        cause: BaseException | None = None
        with contextlib.suppress(Exception):
            if self._cause is not None:
                loaded = cloudpickle.loads(self._cause)
                if isinstance(loaded, BaseException):
                    cause = loaded
        if cause is None and isinstance(final.get("crash"), BaseException):
            cause = final["crash"]
        error.__cause__ = cause
        return error

    def result(self, timeout: float | None = None) -> Any:
        """Per-host return values, slice by slice (one value for a one-replica job)."""
        status = self.wait(timeout)
        final = self._outcome()
        if status is not JobStatus.SUCCEEDED:
            raise TpuJobFailedError(self._job_id, status, final.get("error") or "stopped")
        if not self._is_callable:
            raise TpuJobFailedError(
                self._job_id, status, "a command job has no return value; read its logs()"
            )
        results = list(final.get("results") or [])
        return results[0] if self._replicas == 1 and len(results) == 1 else results

    def terminate(self) -> None:
        """Stops the gang on every host; returns once the job is STOPPED (or finished)."""
        if self._future.done():
            return
        with contextlib.suppress(Exception):
            rget(self._state.request_stop.remote(), timeout=30)
        try:
            self._future.result(timeout=_TERMINATE_GRACE_S)
        except concurrent.futures.TimeoutError:
            with contextlib.suppress(Exception):
                ray.cancel(self._ref, force=True, recursive=True)
            with contextlib.suppress(Exception):
                self._future.result(timeout=_TERMINATE_GRACE_S)
        except Exception:
            pass
        self._outcome()

    # -- logs and info ---------------------------------------------------------------------

    def logs(self, *, follow: bool = False, include_children: bool = False) -> Iterator[str]:
        """Output lines of every host (and fray-tpu's own ``[fray-tpu]`` notes).

        ``include_children`` is accepted for the protocol; TPU jobs started from inside the
        gang are jobs of their own and are not followed here.
        """
        start = 0
        while True:
            if self._final is not None:  # ended: the rest is in the copy
                yield from self._lines[max(start - self._dropped, 0) :]
                return
            try:
                lines, start, finished = rget(
                    self._state.read_logs.remote(start, 1.0 if follow else 0.0), timeout=60
                )
            except Exception:
                if not self._future.done():
                    return
                self._outcome()  # it ended, and its state was released: read the copy
                continue
            yield from lines
            if not follow or (finished and not lines and self._future.done()):
                return
            if finished and not lines:
                time.sleep(0.1)  # recorded as finished; the supervisor is still tearing down

    def info(self) -> JobInfo:
        """Attempts, preemptions, failures and error."""
        snap: dict[str, Any] | None = self._running_snapshot()
        if snap is None:
            snap = self._outcome() if self._future.done() else {"status": "running"}
        return JobInfo(
            job_id=self._job_id,
            name=snap.get("name") or self._job_id,
            status=JobStatus(snap.get("status", "running")),
            attempts=snap.get("attempts", 0),
            preemptions=snap.get("preemptions", 0),
            failures=snap.get("failures", 0),
            error=snap.get("error"),
            replicas=self._replicas,
            submitted_at=snap.get("submitted_at"),
            started_at=snap.get("started_at"),
            finished_at=snap.get("finished_at"),
        )

    def _running_snapshot(self) -> dict[str, Any] | None:
        """The state actor's snapshot while the supervisor runs; ``None`` once it has
        returned (its state may be released) or when the actor cannot be reached."""
        if self._future.done():
            return None
        try:
            snap: dict[str, Any] = rget(self._state.snapshot.remote(), timeout=30)
        except Exception:
            return None
        if JobStatus(snap.get("status", "running")).is_finished:
            # Recorded but the supervisor has not returned yet (it is tearing down).
            return {**snap, "status": "running"}
        return snap

    def placement(self) -> list[dict[str, Any]]:
        """Where the current (or last) attempt runs: slice, worker, node id and IP per host."""
        try:
            snap = self._final or rget(self._state.snapshot.remote(), timeout=30)
        except Exception:
            if not self._future.done():
                raise
            snap = self._outcome()
        return list(snap.get("placement") or [])

    def wait_for_attempt(self, attempt: int, timeout: float) -> bool:
        """Blocks until attempt ``attempt`` has started; ``False`` on timeout or job end."""
        try:
            snap = self._final or rget(
                self._state.wait_for_attempt.remote(attempt, timeout), timeout=timeout + 30
            )
        except Exception:
            if not self._future.done():
                raise
            snap = self._outcome()
        return bool(snap.get("attempts", 0) >= attempt)

    def add_done_callback(self, callback: Callable[[Any], None]) -> None:
        """Calls ``callback(handle)`` once the job is finished (at once if it already is)."""
        self._future.add_done_callback(lambda _f: callback(self))

    def __repr__(self) -> str:
        return f"TpuJobHandle({self._job_id!r})"


def _is_cancelled(exc: BaseException) -> bool:
    from ray import exceptions as rx

    return isinstance(exc, rx.TaskCancelledError)


# -- building the spec ----------------------------------------------------------------------


def _unwrap_remote_function(fn: Any) -> tuple[Callable[..., Any], dict[str, Any]]:
    """A plain callable for a ``@ray.remote`` function, plus the options it carried."""
    from ray.remote_function import RemoteFunction

    if isinstance(fn, RemoteFunction):
        options = dict(getattr(fn, "_default_options", {}) or {})
        return fn._function, options
    return fn, {}


def _allowed_slices(num_slices: int | Sequence[int]) -> tuple[int, ...]:
    if isinstance(num_slices, bool):
        raise InvalidRequestError.for_field(
            "num_slices", num_slices, "must be a positive int or a non-empty list of them"
        )
    if isinstance(num_slices, int):
        values = (num_slices,)
    else:
        try:
            values = tuple(num_slices)
        except TypeError:
            raise InvalidRequestError.for_field(
                "num_slices", num_slices, "must be a positive int or a non-empty list of them"
            ) from None
    if not values or any(isinstance(v, bool) or not isinstance(v, int) or v < 1 for v in values):
        raise InvalidRequestError.for_field(
            "num_slices", num_slices, "must be a positive int or a non-empty list of them"
        )
    return tuple(sorted(set(values)))


def _check_budget(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidRequestError.for_field(name, value, "must be an int >= 0")
    return value


def _start(
    *,
    job_id: str,
    name: str,
    tpu_type: str,
    allowed: tuple[int, ...],
    payload: HostPayload,
    env_vars: Mapping[str, str],
    runtime_env: Mapping[str, Any],
    num_cpus: float,
    memory: int | None,
    resources: Mapping[str, float],
    max_retries_preemption: int,
    max_retries_failure: int,
    scheduling_timeout: float | None,
    health_interval: float | None,
    supervisor_options: Mapping[str, Any] | None,
    is_callable: bool,
) -> TpuJobHandle:
    topology = get_tpu_topology(tpu_type)
    try:
        payload_bytes = cloudpickle.dumps(payload)
    except Exception as err:
        raise InvalidRequestError.for_field(
            "entrypoint",
            payload.fn if payload.fn is not None else payload.command,
            f"must be picklable to run on the TPU hosts: {type(err).__name__}: {err}",
        ) from err
    if not ray.is_initialized():
        ray.init()
    if scheduling_timeout is not None and scheduling_timeout <= 0:
        raise InvalidRequestError.for_field(
            "scheduling_timeout", scheduling_timeout, "must be a positive number of seconds"
        )
    spec = GangSpec(
        job_id=job_id,
        tpu_type=topology.name,
        allowed_slices=allowed,
        payload=payload_bytes,
        payload_name=payload.name,
        env_vars=dict(env_vars),
        runtime_env=dict(runtime_env),
        num_cpus=num_cpus,
        memory=memory,
        resources=dict(resources),
        scheduling_timeout_s=scheduling_timeout,
        health_interval_s=health_interval
        or _env_float(ev.FRAY_TPU_HEALTH_INTERVAL_S, _DEFAULT_HEALTH_INTERVAL_S),
        megascale_port=DEFAULT_MEGASCALE_PORT,
    )
    replicas = max(allowed) * topology.vm_count
    # The job's state lives on the driver's node, which is alive as long as the driver is (it
    # needs no resources). Pinned hard: a soft pin lets Ray place it on any node, a TPU host
    # included, and then losing that host would lose the job's state with it.
    here = ray.get_runtime_context().get_node_id()
    state = JobState.options(
        name=f"fray-tpu-state:{job_id}",
        scheduling_strategy=NodeAffinitySchedulingStrategy(here, soft=False),
    ).remote(job_id, name, replicas, max_retries_preemption, max_retries_failure)
    options: dict[str, Any] = {
        "num_cpus": 0,
        "max_retries": -1,
        "retry_exceptions": False,
        "name": f"fray-tpu-supervisor:{job_id}",
    }
    options.update(supervisor_options or {})
    ref = ray.remote(supervise).options(**options).remote(spec, state)
    return TpuJobHandle(job_id, state, ref, replicas, is_callable)


def submit_tpu_job(
    request: JobRequest,
    *,
    job_id: str,
    scheduling_timeout: float | None = None,
    health_interval: float | None = None,
    supervisor_options: Mapping[str, Any] | None = None,
) -> TpuJobHandle:
    """Starts a TPU gang job for ``request`` on the Ray cluster this process is connected to.

    One replica runs per VM of each slice (``request.replicas`` = slices x VMs). The callable
    runs on every host (a command runs as a subprocess on every host). Env: the device
    defaults, then ``environment.env_vars``, plus ``MEGASCALE_*`` for multislice and
    ``FRAY_JOB_ID``/``FRAY_TASK_INDEX``/``FRAY_NUM_TASKS``. ``pip_packages`` become the
    Ray ``pip`` runtime env. Budgets: ``max_retries_preemption`` and
    ``max_retries_failure`` (N retries = N+1 attempts).

    Args:
        request: A job whose ``resources.device`` is a ``TpuConfig``.
        job_id: The id the client gave the job.
        scheduling_timeout: Seconds to wait for the slices (default
            ``$FRAY_TPU_SCHEDULING_TIMEOUT_S`` or 600).
        health_interval: Seconds between health checks of the running gang.
        supervisor_options: Extra Ray ``.options()`` for the supervisor task.

    Raises:
        InvalidRequestError: The request is not a TPU request.
    """
    device = request.resources.device
    if not isinstance(device, TpuConfig):
        raise InvalidRequestError.for_field(
            "JobRequest.resources.device", device, "submit_tpu_job needs a TpuConfig device"
        )
    entry = request.entrypoint
    vms = device.vm_count()
    slices = request.replica_count // vms
    runtime_env: dict[str, Any] = {}
    extra_resources: dict[str, float] = {}
    num_cpus = float(request.resources.cpu)
    memory = request.resources.ram_bytes or None
    env = dict(device.default_env_vars())
    if entry.callable is not None:
        fn, remote_options = _unwrap_remote_function(entry.callable)
        runtime_env.update(remote_options.get("runtime_env") or {})
        env.update(runtime_env.pop("env_vars", None) or {})
        payload = HostPayload(fn=fn, args=entry.args, kwargs=dict(entry.kwargs), name=request.name)
    else:
        assert entry.command is not None
        payload = HostPayload(fn=None, command=entry.command, name=request.name)
    env.update(request.env_vars)  # device defaults, overridden by the request's own
    if request.environment is not None and request.environment.pip_packages:
        runtime_env["pip"] = list(request.environment.pip_packages)
    timeout = scheduling_timeout
    if timeout is None:
        timeout = _env_float(ev.FRAY_TPU_SCHEDULING_TIMEOUT_S, _DEFAULT_SCHEDULING_TIMEOUT_S)
    return _start(
        job_id=job_id,
        name=request.name,
        tpu_type=device.variant,
        allowed=(slices,),
        payload=payload,
        env_vars=env,
        runtime_env=runtime_env,
        num_cpus=num_cpus,
        memory=memory,
        resources=extra_resources,
        max_retries_preemption=request.max_retries_preemption,
        max_retries_failure=request.max_retries_failure,
        scheduling_timeout=timeout,
        health_interval=health_interval,
        supervisor_options=supervisor_options,
        is_callable=entry.is_callable,
    )


def launch_on_pod(
    fn: Callable[..., Any],
    tpu_type: str,
    *,
    num_slices: int | Sequence[int] = 1,
    max_retries_preemption: int = 10000,
    max_retries_failure: int = 10,
    runtime_env: Mapping[str, Any] | None = None,
    args: Sequence[Any] = (),
    kwargs: Mapping[str, Any] | None = None,
    num_cpus: float | None = None,
    memory: int | None = None,
    scheduling_timeout: float | None = None,
    health_interval: float | None = None,
    supervisor_options: Mapping[str, Any] | None = None,
    name: str | None = None,
) -> TpuJobHandle:
    """Like :func:`run_on_pod` but returns a handle at once instead of blocking."""
    if not callable(fn):
        raise InvalidRequestError.for_field(
            "fn", fn, "must be a callable or a @ray.remote function"
        )
    topology = get_tpu_topology(tpu_type)
    allowed = _allowed_slices(num_slices)
    _check_budget("max_retries_preemption", max_retries_preemption)
    _check_budget("max_retries_failure", max_retries_failure)
    fn, remote_options = _unwrap_remote_function(fn)
    merged_env: dict[str, Any] = dict(remote_options.get("runtime_env") or {})
    merged_env.update(runtime_env or {})
    env_vars = dict(topology.default_env_vars())
    env_vars.update(merged_env.pop("env_vars", None) or {})
    resources = {
        k: float(v) for k, v in (remote_options.get("resources") or {}).items() if k != "TPU"
    }
    cpus = num_cpus if num_cpus is not None else float(remote_options.get("num_cpus") or 1)
    mem = memory if memory is not None else remote_options.get("memory")
    job_name = name or getattr(fn, "__name__", "tpu-job")
    job_id = f"tpu-{job_name}-{secrets.token_hex(4)}"
    timeout = scheduling_timeout
    if timeout is None:
        timeout = _env_float(ev.FRAY_TPU_SCHEDULING_TIMEOUT_S, _DEFAULT_SCHEDULING_TIMEOUT_S)
    return _start(
        job_id=job_id,
        name=job_name,
        tpu_type=topology.name,
        allowed=allowed,
        payload=HostPayload(fn=fn, args=tuple(args), kwargs=dict(kwargs or {}), name=job_name),
        env_vars=env_vars,
        runtime_env=merged_env,
        num_cpus=cpus,
        memory=int(mem) if mem else None,
        resources=resources,
        max_retries_preemption=max_retries_preemption,
        max_retries_failure=max_retries_failure,
        scheduling_timeout=timeout,
        health_interval=health_interval,
        supervisor_options=supervisor_options,
        is_callable=True,
    )


def run_on_pod(
    fn: Callable[..., Any],
    tpu_type: str,
    *,
    num_slices: int | Sequence[int] = 1,
    max_retries_preemption: int = 10000,
    max_retries_failure: int = 10,
    runtime_env: Mapping[str, Any] | None = None,
    **options: Any,
) -> list[Any]:
    """Runs ``fn()`` on every VM of ``num_slices`` slices of ``tpu_type``; returns the
    per-host results, slice by slice, then by worker id.

    Args:
        fn: A callable, or a ``@ray.remote`` function (its ``runtime_env``, ``num_cpus``,
            ``memory`` and custom resources are used).
        tpu_type: A TPU type, e.g. ``"v5p-64"``.
        num_slices: Slices to run on; a list means "the largest of these that the cluster
            can give" (e.g. ``[2, 4]``).
        max_retries_preemption: Re-runs after preemptions (N retries = N+1 attempts).
        max_retries_failure: Re-runs after the function's own failures.
        runtime_env: Ray runtime env of the host tasks (``env_vars``, ``pip``, ...).
        **options: ``args``, ``kwargs``, ``num_cpus``, ``memory``, ``scheduling_timeout``,
            ``health_interval``, ``supervisor_options``, ``name`` (see ``launch_on_pod``).

    Raises:
        TpuJobFailedError: A budget ran out; the first problem is chained as ``__cause__``.
        TpuSchedulingError: The slices could not be gathered within the scheduling timeout.
    """
    handle = launch_on_pod(
        fn,
        tpu_type,
        num_slices=num_slices,
        max_retries_preemption=max_retries_preemption,
        max_retries_failure=max_retries_failure,
        runtime_env=runtime_env,
        **options,
    )
    handle.wait()
    final = handle._outcome()
    return list(final.get("results") or [])


def run_on_pod_resumable(
    fn: Callable[..., Any],
    tpu_type: str,
    *,
    max_retries_preemption: int = 1_000_000,
    max_retries_failure: int = 10,
    **options: Any,
) -> list[Any]:
    """:func:`run_on_pod` on one slice, retrying preemptions (almost) without limit."""
    return run_on_pod(
        fn,
        tpu_type,
        num_slices=options.pop("num_slices", 1),
        max_retries_preemption=max_retries_preemption,
        max_retries_failure=max_retries_failure,
        **options,
    )


def run_on_pod_multislice(
    fn: Callable[..., Any], tpu_type: str, num_slices: int | Sequence[int], **options: Any
) -> list[Any]:
    """:func:`run_on_pod` on ``num_slices`` slices with no retries (both budgets 0)."""
    options.setdefault("max_retries_preemption", 0)
    options.setdefault("max_retries_failure", 0)
    return run_on_pod(fn, tpu_type, num_slices=num_slices, **options)


def run_on_pod_multislice_resumable(
    fn: Callable[..., Any],
    tpu_type: str,
    num_slices: int | Sequence[int],
    *,
    max_retries_preemption: int = 1_000_000,
    max_retries_failure: int = 10,
    **options: Any,
) -> list[Any]:
    """:func:`run_on_pod` on ``num_slices`` slices, retrying preemptions (almost) forever."""
    return run_on_pod(
        fn,
        tpu_type,
        num_slices=num_slices,
        max_retries_preemption=max_retries_preemption,
        max_retries_failure=max_retries_failure,
        **options,
    )
