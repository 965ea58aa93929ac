# pyright: standard
"""Starting TPU gang jobs without a RayClient: ``run_on_pod`` and friends (the predecessor's
call shapes), ``launch_on_pod`` and ``submit_tpu_job``, on a small client of the engine that
runs nothing but gangs (one per process)."""

from __future__ import annotations

import contextlib
import os
import re
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import ray

from fray import Entrypoint, JobRequest, ResourceConfig
from fray.backend import capabilities_of
from fray.errors import InvalidRequestError
from fray.topology import get_tpu_topology
from fray_ray import KindClient
from fray_ray import RayJobHandle as TpuJobHandle
from fray_tpu import environment_variables as ev
from fray_tpu.ray._adapter import unwrap_remote_function
from fray_tpu.ray.gang import GangJob, prepare_gang

__all__ = [
    "GangClient",
    "launch_on_pod",
    "run_on_pod",
    "run_on_pod_multislice",
    "run_on_pod_multislice_resumable",
    "run_on_pod_resumable",
    "submit_tpu_job",
]

_DEFAULT_SCHEDULING_TIMEOUT_S = 600.0
_DEFAULT_HEALTH_INTERVAL_S = 2.0


class GangClient(KindClient):
    """Runs TPU gang jobs (and nothing else) on the Ray this process is connected to."""

    scheme = "tpu-gang"
    capabilities = capabilities_of("ray")  # what Ray refuses, for every Ray job
    handle_type = TpuJobHandle

    def _prepare(self, request: JobRequest) -> GangJob:
        """A gang for a request submitted without one (``run_on_pod`` builds its own)."""
        return prepare_gang(request, self, health_s=_health_s(None))


_client: list[GangClient] = []
_client_lock = threading.Lock()


def _gang_client() -> GangClient:
    with _client_lock:
        if not _client or _client[0].is_shutdown:
            _client[:] = [GangClient()]
        return _client[0]


def _submit(request: JobRequest, gang: GangJob | None, job_id: str | None) -> TpuJobHandle:
    if not ray.is_initialized():
        ray.init()
    """Submits ``request`` on the gang client, with the gang ``run_on_pod`` built (if any)
    and the job id the caller chose (if any)."""
    client = _gang_client()
    if gang is None:
        return client._submit(request, job_id=job_id)
    return client._submit(request, prepared=gang, job_id=job_id)


def _seconds(name: str, value: Any, default: float) -> float:
    """``value``, else ``$name``, else ``default``: a positive number of seconds."""
    if value is None:
        value = os.environ.get(name) or default
        with contextlib.suppress(ValueError):
            value = float(value)
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise InvalidRequestError.for_field(name, value, "must be a positive number of seconds")
    return float(value)


def _health_s(value: float | None) -> float:
    return _seconds(ev.FRAY_TPU_HEALTH_INTERVAL_S, value, _DEFAULT_HEALTH_INTERVAL_S)


def submit_tpu_job(
    request: JobRequest,
    *,
    job_id: str | None = None,
    scheduling_timeout: float | None = None,
    health_interval: float | None = None,
) -> TpuJobHandle:
    """Starts a TPU gang job for ``request`` on the Ray cluster this process is connected to.

    One replica runs per VM of each slice (``request.replicas`` = slices x VMs); see
    :func:`fray_tpu.ray.gang.prepare_gang` for its env and runtime env. What Ray's
    capability table (``fray.backend.capabilities_of("ray")``) refuses is refused here too.
    Budgets: ``max_retries_preemption`` and ``max_retries_failure`` (N retries = N+1
    attempts).

    Args:
        request: A job whose ``resources.device`` is a ``TpuConfig``.
        job_id: The job's id (default: made from its name).
        scheduling_timeout: Seconds to wait for the slices (default
            ``request.scheduling_timeout``, else ``$FRAY_TPU_SCHEDULING_TIMEOUT_S`` or 600).
        health_interval: Seconds between the hosts' looks at the metadata server.

    Raises:
        InvalidRequestError: The request is not a TPU request, or an argument is bad.
    """
    timeout = _seconds(
        ev.FRAY_TPU_SCHEDULING_TIMEOUT_S,
        scheduling_timeout if scheduling_timeout is not None else request.scheduling_timeout,
        _DEFAULT_SCHEDULING_TIMEOUT_S,
    )
    gang = prepare_gang(request, _gang_client(), health_s=_health_s(health_interval))
    return _submit(request.model_copy(update={"scheduling_timeout": timeout}), gang, job_id)


def _allowed_slices(num_slices: int | Sequence[int]) -> tuple[int, ...]:
    bad = "must be a positive int or a non-empty list of them"
    if isinstance(num_slices, bool):
        raise InvalidRequestError.for_field("num_slices", num_slices, bad)
    if isinstance(num_slices, int):
        values: tuple[Any, ...] = (num_slices,)
    else:
        try:
            values = tuple(num_slices)
        except TypeError:
            raise InvalidRequestError.for_field("num_slices", num_slices, bad) from None
    if not values or any(isinstance(v, bool) or not isinstance(v, int) or v < 1 for v in values):
        raise InvalidRequestError.for_field("num_slices", num_slices, bad)
    return tuple(sorted(set(values)))


def _job_name(text: str) -> str:
    """``text`` as a job name (letters, digits, ``-``, ``_``, ``.``): ``<lambda>`` → ``lambda``."""
    name = re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-_.")[:100]
    return name or "tpu-job"


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
    name: str | None = None,
) -> TpuJobHandle:
    """Like :func:`fray_tpu.ray.run_on_pod` but returns a handle at once instead of blocking."""
    if not callable(fn):
        raise InvalidRequestError.for_field(
            "fn", fn, "must be a callable or a @ray.remote function"
        )
    topology = get_tpu_topology(tpu_type)
    allowed = _allowed_slices(num_slices)
    fn, options = unwrap_remote_function(fn)
    ray_env: dict[str, Any] = {**(options.get("runtime_env") or {}), **(runtime_env or {})}
    cpus = num_cpus if num_cpus is not None else float(options.get("num_cpus") or 1)
    mem = memory if memory is not None else options.get("memory")
    job_name = _job_name(name or getattr(fn, "__name__", "tpu-job"))
    request = JobRequest(
        name=job_name,
        entrypoint=Entrypoint.from_callable(fn, tuple(args), kwargs),
        resources=ResourceConfig.with_tpu(
            topology.name, slice_count=max(allowed), cpu=cpus, ram=str(int(mem or 0))
        ),
        max_retries_preemption=max_retries_preemption,
        max_retries_failure=max_retries_failure,
        scheduling_timeout=_seconds(
            ev.FRAY_TPU_SCHEDULING_TIMEOUT_S, scheduling_timeout, _DEFAULT_SCHEDULING_TIMEOUT_S
        ),
    )
    gang = prepare_gang(
        request,
        _gang_client(),
        allowed=allowed,
        runtime_env=ray_env,
        health_s=_health_s(health_interval),
        resources={k: float(v) for k, v in (options.get("resources") or {}).items() if k != "TPU"},
    )
    return _submit(request, gang, None)


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
            ``health_interval``, ``name`` (see ``launch_on_pod``).

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
    return handle.host_results()


def run_on_pod_resumable(
    fn: Callable[..., Any],
    tpu_type: str,
    *,
    max_retries_preemption: int = 1_000_000,
    max_retries_failure: int = 10,
    **options: Any,
) -> list[Any]:
    """:func:`run_on_pod` on one slice, retrying preemptions (almost) without limit."""
    return run_on_pod_multislice_resumable(
        fn,
        tpu_type,
        options.pop("num_slices", 1),
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
