# pyright: standard
"""Starting TPU gang jobs: ``submit_tpu_job`` (the RayClient route) and ``launch_on_pod``.

Both turn what they are given into the same three things: a :class:`GangSpec` for the
supervisor (what every host runs, with which env and resources), the job as a
:class:`~fray.JobRequest` (its name, size and budgets, for the job's records), and then the
job's state actor, its supervisor task and the handle over them.
"""

from __future__ import annotations

import os
import re
import secrets
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import cloudpickle
import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from fray import Entrypoint, JobRequest, ResourceConfig, TpuConfig
from fray.backend import capabilities_of
from fray.errors import InvalidRequestError
from fray.topology import get_tpu_topology
from fray_tpu import environment_variables as ev
from fray_tpu._multislice import DEFAULT_MEGASCALE_PORT
from fray_tpu.ray._handle import TpuJobHandle, TpuJobRecord
from fray_tpu.ray._host import HostPayload
from fray_tpu.ray._state import JobState
from fray_tpu.ray._supervisor import GangSpec, supervise
from fray_tpu.ray.runtime_env import environment_runtime_env

__all__ = ["launch_on_pod", "submit_tpu_job"]

_DEFAULT_SCHEDULING_TIMEOUT_S = 600.0
_DEFAULT_HEALTH_INTERVAL_S = 2.0
_RAY = capabilities_of("ray")  # what Ray refuses, for every Ray job

# What a job runs travels to its hosts only (in the GangSpec); the state actor's record of
# the job needs its name, size and budgets, so it gets the request with this in its place.
_RUN_ON_THE_HOSTS = Entrypoint.from_command("fray-tpu-gang")


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


def _job_name(text: str) -> str:
    """``text`` as a job name (letters, digits, ``-``, ``_``, ``.``): ``<lambda>`` → ``lambda``."""
    name = re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-_.")[:100]
    return name or "tpu-job"


def _start(
    request: JobRequest,
    *,
    job_id: str,
    tpu_type: str,
    allowed: tuple[int, ...],
    payload: HostPayload,
    env_vars: Mapping[str, str],
    runtime_env: Mapping[str, Any],
    num_cpus: float,
    memory: int | None,
    resources: Mapping[str, float],
    scheduling_timeout: float | None,
    health_interval: float | None,
    supervisor_options: Mapping[str, Any] | None,
) -> TpuJobHandle:
    topology = get_tpu_topology(tpu_type)
    if scheduling_timeout is None:
        scheduling_timeout = _env_float(
            ev.FRAY_TPU_SCHEDULING_TIMEOUT_S, _DEFAULT_SCHEDULING_TIMEOUT_S
        )
    elif scheduling_timeout <= 0:
        raise InvalidRequestError.for_field(
            "scheduling_timeout", scheduling_timeout, "must be a positive number of seconds"
        )
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
        attempt_timeout_s=request.timeout,
        health_interval_s=health_interval
        or _env_float(ev.FRAY_TPU_HEALTH_INTERVAL_S, _DEFAULT_HEALTH_INTERVAL_S),
        megascale_port=DEFAULT_MEGASCALE_PORT,
    )
    record = TpuJobRecord(job_id, request)
    # The job's state lives on the driver's node, which is alive as long as the driver is (it
    # needs no resources). Pinned hard: a soft pin lets Ray place it on any node, a TPU host
    # included, and then losing that host would lose the job's state with it.
    here = ray.get_runtime_context().get_node_id()
    state = JobState.options(
        name=f"fray-tpu-state:{job_id}",
        scheduling_strategy=NodeAffinitySchedulingStrategy(here, soft=False),
    ).remote(
        job_id, request.model_copy(update={"entrypoint": _RUN_ON_THE_HOSTS, "environment": None})
    )
    options: dict[str, Any] = {
        "num_cpus": 0,
        "max_retries": -1,
        "retry_exceptions": False,
        "name": f"fray-tpu-supervisor:{job_id}",
    }
    options.update(supervisor_options or {})
    ref = ray.remote(supervise).options(**options).remote(spec, state)
    return TpuJobHandle(record, state, ref)


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
    ``FRAY_JOB_ID``/``FRAY_TASK_INDEX``/``FRAY_NUM_TASKS``. ``pip_packages``,
    ``workspace`` and ``docker_image`` become Ray's ``pip``, ``working_dir`` and
    ``image_uri`` runtime env, as for every Ray job; what Ray's capability table
    (``fray.backend.capabilities_of("ray")``: extras, disk, regions, ...) refuses is
    refused here too. Budgets: ``max_retries_preemption`` and
    ``max_retries_failure`` (N retries = N+1 attempts).

    Args:
        request: A job whose ``resources.device`` is a ``TpuConfig``.
        job_id: The id the client gave the job.
        scheduling_timeout: Seconds to wait for the slices (default
            ``request.scheduling_timeout``, else ``$FRAY_TPU_SCHEDULING_TIMEOUT_S`` or 600).
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
    _RAY.check(request)
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
    runtime_env.update(environment_runtime_env(request.environment))
    return _start(
        request,
        job_id=job_id,
        tpu_type=device.variant,
        allowed=(slices,),
        payload=payload,
        env_vars=env,
        runtime_env=runtime_env,
        num_cpus=num_cpus,
        memory=memory,
        resources=extra_resources,
        scheduling_timeout=scheduling_timeout
        if scheduling_timeout is not None
        else request.scheduling_timeout,
        health_interval=health_interval,
        supervisor_options=supervisor_options,
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
    job_name = _job_name(name or getattr(fn, "__name__", "tpu-job"))
    job_id = f"tpu-{job_name}-{secrets.token_hex(4)}"
    request = JobRequest(
        name=job_name,
        entrypoint=Entrypoint.from_callable(fn, tuple(args), kwargs),
        resources=ResourceConfig.with_tpu(topology.name, slice_count=max(allowed)),
        max_retries_preemption=max_retries_preemption,
        max_retries_failure=max_retries_failure,
    )
    return _start(
        request,
        job_id=job_id,
        tpu_type=topology.name,
        allowed=allowed,
        payload=HostPayload(fn=fn, args=tuple(args), kwargs=dict(kwargs or {}), name=job_name),
        env_vars=env_vars,
        runtime_env=merged_env,
        num_cpus=cpus,
        memory=int(mem) if mem else None,
        resources=resources,
        scheduling_timeout=scheduling_timeout,
        health_interval=health_interval,
        supervisor_options=supervisor_options,
    )
