# pyright: standard
"""TPU gang jobs as a kind of job on fray-ray (:class:`fray_ray.JobKind`), for clients on
Ray (``RayClient``, and the small client of ``run_on_pod``): a gang job's record holds a
:class:`GangJob` (its ``data``), worked out once per request by :func:`prepare_gang`. The
engine runs the attempts and applies both budgets; each attempt (:mod:`fray_tpu.ray._gang`)
claims whole slices through placement groups on ``TPU-<type>-head``, runs one host actor per
VM with that attempt's ``MEGASCALE_*`` values, and reports how it ended, from the client's
event thread.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import cloudpickle
import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from fray import JobRequest, TpuConfig
from fray.backend import JobRecord, Outcome
from fray.errors import InvalidRequestError
from fray.topology import TpuTopology, get_tpu_topology
from fray_ray import JobKind, KindClient, environment_runtime_env
from fray_tpu._errors import TpuJobFailedError, TpuSchedulingError
from fray_tpu.ray._adapter import unwrap_remote_function
from fray_tpu.ray._gang import Attempt, LostNodes
from fray_tpu.ray._host import HostPayload
from fray_tpu.ray._hub import Hub

__all__ = ["GangJob", "GangSpec", "hub_name", "prepare_gang"]

logger = logging.getLogger("fray_tpu.ray")

_HUB_CALL_S = 30.0
_FOLLOW_S = 0.2  # how often a followed gang job's lines are read from its hub
_CANCEL_GRACE_S = 10.0
_SETTINGS = ("GCE_METADATA_HOST", "FRAY_TPU_LIBTPU_LOCKFILE")


@dataclass(frozen=True)
class GangSpec:
    """What every attempt of a gang job runs (see :func:`prepare_gang`): the slices' type
    and allowed counts, the pickled payload and its name, the hosts' env and metadata
    settings, Ray runtime env, CPUs, memory and custom resources per host, and how often
    a host asks the metadata server about preemption."""

    topology: TpuTopology
    allowed: tuple[int, ...]
    payload: bytes
    name: str
    env_vars: Mapping[str, str]
    settings: Mapping[str, str]
    runtime_env: Mapping[str, Any] = field(default_factory=dict)
    num_cpus: float = 1.0
    memory: int | None = None
    resources: Mapping[str, float] = field(default_factory=dict)
    health_s: float = 2.0


def prepare_gang(
    request: JobRequest,
    client: KindClient,
    *,
    allowed: tuple[int, ...] | None = None,
    runtime_env: Mapping[str, Any] | None = None,
    health_s: float = 2.0,
    resources: Mapping[str, float] | None = None,
) -> GangJob:
    """A TPU request as a gang job (a job record's ``data``), for ``client``'s hooks.

    One replica runs per VM of each slice (``replicas`` = slices x VMs): the callable in
    every host actor, a command as a subprocess of it. Env: the device defaults, then
    ``environment.env_vars`` (and a ``@ray.remote`` function's), plus ``MEGASCALE_*`` for
    multislice and ``FRAY_JOB_ID``/``FRAY_TASK_INDEX``/``FRAY_NUM_TASKS``. ``pip_packages``,
    ``workspace`` and ``docker_image`` become Ray's ``pip``, ``working_dir`` and
    ``image_uri``. ``allowed`` (slice counts) defaults to the request's; ``runtime_env``
    and ``resources`` (per host) add to the request's; ``health_s`` is the seconds between a
    host's questions to the metadata server.

    Raises:
        InvalidRequestError: The request asks for no TPU, or its entrypoint does not pickle.
    """
    device = request.resources.device
    if not isinstance(device, TpuConfig):
        raise InvalidRequestError.for_field(
            "JobRequest.resources.device", device, "a TPU gang job needs a TpuConfig device"
        )
    topology = get_tpu_topology(device.variant)
    env = dict(device.default_env_vars())
    ray_env = dict(runtime_env or {})
    entry = request.entrypoint
    if entry.callable is not None:
        fn, options = unwrap_remote_function(entry.callable)
        ray_env = {**(options.get("runtime_env") or {}), **ray_env}
        payload = HostPayload(fn, entry.args, dict(entry.kwargs), name=request.name)
    else:
        payload = HostPayload(None, command=entry.command, name=request.name)
    env.update(ray_env.pop("env_vars", None) or {})
    env.update(request.env_vars)  # device defaults, overridden by the job's own
    ray_env.update(environment_runtime_env(request.environment))
    try:
        pickled = cloudpickle.dumps(payload)
    except Exception as err:
        raise InvalidRequestError.for_field(
            "JobRequest.entrypoint",
            payload.fn if payload.fn is not None else payload.command,
            f"must be picklable to run on the TPU hosts: {type(err).__name__}: {err}",
        ) from err
    spec = GangSpec(
        topology,
        allowed or (request.replica_count // topology.vm_count,),
        pickled,
        payload.name,
        env,
        {k: env[k] for k in _SETTINGS if k in env},
        ray_env,
        float(request.resources.cpu),
        request.resources.ram_bytes or None,
        dict(resources or {}),
        health_s,
    )
    return GangJob(spec, client)


def hub_name(job_id: str) -> str:
    """The name of a gang job's hub actor (in the driver's namespace), while the job runs."""
    return f"fray-tpu-hub:{job_id}"


class GangJob(JobKind):
    """A gang job's ``data``: its spec, its hub, the current attempt and where it runs.
    Its methods are the bodies of the client's hooks (see :class:`fray_ray.JobKind`);
    each attempt's work runs on the client's event thread."""

    def __init__(self, spec: GangSpec, client: KindClient) -> None:
        super().__init__(client)
        self.spec = spec
        self.kind_client = client
        self.hub: Any = None
        self.attempt: Attempt | None = None
        self.launched_placement: list[dict[str, Any]] = []
        self.launched = 0  # the attempts whose hosts were placed (placement: the last one's)
        self.cond = threading.Condition()
        self._read_lock = threading.Lock()
        self._next_line = 0

    def start(self, job: JobRecord) -> None:
        """Queues the claim of the slices on the client's event thread (runs in the engine's
        attempt loop: the submitting thread, or the one that reported the attempt before)."""
        if self.hub is None:  # on the driver's node: it lives as long as the driver does
            here = ray.get_runtime_context().get_node_id()
            self.hub = Hub.options(
                name=hub_name(job.job_id),
                scheduling_strategy=NodeAffinitySchedulingStrategy(here, soft=False),
            ).remote()
        lost = self.kind_client.kind_state(LostNodes)
        attempt = self.attempt = Attempt(self, job, job.begun, lost)
        self.client._call_soon(attempt.run, attempt.claim)

    def cancel(self, job: JobRecord) -> float:
        """Tears the gang down, on the event thread (runs on the engine's timer thread);
        returns the grace. A gang stopped while it claims its slices (its scheduling
        timeout) ends as the engine recorded the stop: not placed."""

        def stop() -> None:
            attempt = self.attempt
            if attempt is None or attempt.number != job.begun or attempt.is_over:
                job.report(Outcome.stopped())
                return
            attempt.end(Outcome.stopped())

        self.client._call_soon(stop)
        return _CANCEL_GRACE_S

    def failure(self, job: JobRecord) -> TpuJobFailedError:
        """The error a failed gang job raises: its counts, why it ended and its first cause
        (``TpuSchedulingError`` where its last attempt was never placed: the engine ended
        it at the scheduling timeout)."""
        if job.begun > job.attempts:  # the last attempt began and was never placed
            cls, reason = TpuSchedulingError, "scheduling"
        elif (job.error or "").startswith("preempted "):
            cls, reason = TpuJobFailedError, "preemption"
        else:
            cls, reason = TpuJobFailedError, "failure"
        error = cls(
            job.job_id,
            job.status,
            job.error,
            attempts=job.attempts,
            preemptions=job.preemptions,
            failures=job.failures,
            reason=reason,
        )
        error.__cause__ = job.cause
        return error

    def placement(self) -> list[dict[str, Any]]:
        """Slice, worker, node id and IP of each host of the last attempt that launched."""
        return list(self.launched_placement)

    def wait_for_attempt(self, job: JobRecord, attempt: int, timeout: float) -> bool:
        """Blocks (the caller's thread) until attempt ``attempt``'s hosts are placed;
        ``False`` on timeout or job end."""
        with self.cond:
            self.cond.wait_for(lambda: self.launched >= attempt or job.is_done, timeout)
            return self.launched >= attempt

    def launched_on(self, placement: list[dict[str, Any]], attempts: int) -> None:
        """The current attempt's hosts are placed there (the event thread runs this)."""
        with self.cond:  # wakes wait_for_attempt
            self.launched_placement, self.launched = placement, attempts
            self.cond.notify_all()

    def read_lines(self, job: JobRecord) -> None:
        """Takes the hosts' new output lines from the hub into the job's log."""
        if self.hub is None:
            return
        with self._read_lock:
            try:
                ref = self.hub.read_logs.remote(self._next_line)
                batch, end = ray.get(ref, timeout=_HUB_CALL_S)
            except Exception as exc:
                logger.debug("reading the output of %s failed: %s", job.job_id, exc)
                return
            fresh = batch[max(len(batch) - (end - self._next_line), 0) :]
            self._next_line = end
            if fresh:
                job.log.write("".join(f"{line}\n" for line in fresh))

    def refresh(self, job: JobRecord) -> float | None:
        """New output lines while the job runs."""
        if job.is_done:
            return None
        self.read_lines(job)
        return _FOLLOW_S

    def pending_reason(self, job: JobRecord) -> str | None:
        """What the current attempt asked for while it claims slices, and what the cluster
        has (the caller's thread)."""
        attempt = self.attempt
        return None if attempt is None or job.is_done else attempt.waiting_for()

    def value(self, job: JobRecord) -> Any:
        """Every host's value, slice by slice (one value for a job of one replica)."""
        results = list(job.value or [])
        return results[0] if job.replicas == 1 and len(results) == 1 else results

    def close(self, job: JobRecord) -> None:
        """The job has ended: its hub goes (its lines are in the job's log)."""
        with self.cond:
            self.cond.notify_all()
        if self.hub is not None:
            with contextlib.suppress(Exception):
                ray.kill(self.hub, no_restart=True)
