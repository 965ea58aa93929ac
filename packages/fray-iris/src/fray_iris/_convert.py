# pyright: standard
"""Fray requests to Iris requests, Iris states to Fray statuses, Iris errors to Fray errors."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shlex
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from connectrpc.code import Code
from connectrpc.errors import ConnectError
from iris.client import JobAlreadyExists as IrisJobAlreadyExists
from iris.client import JobFailedError as IrisJobFailedError
from iris.cluster.constraints import (
    Constraint,
    ConstraintOp,
    device_variant_constraint,
    preemptible_constraint,
    region_constraint,
    zone_constraint,
)
from iris.cluster.types import (
    CoschedulingConfig,
    EnvironmentSpec,
    ResourceSpec,
    gpu_device,
    tpu_device,
)
from iris.cluster.types import Entrypoint as IrisEntrypoint
from iris.rpc import job_pb2
from rigging.timing import Duration

from fray import (
    ANY_REGION,
    CpuConfig,
    EnvironmentConfig,
    GpuConfig,
    JobRequest,
    JobStatus,
    ResourceConfig,
    TpuConfig,
)
from fray.backend import capabilities_of
from fray.errors import (
    FrayError,
    InvalidRequestError,
    JobAlreadyExistsError,
    JobFailedError,
    JobNotFoundError,
    JobTimeoutError,
)
from fray_iris import _iris
from fray_iris._task import run_callable

__all__ = [
    "IRIS",
    "IrisRequest",
    "job_status",
    "ship_code_by_value",
    "to_iris_entrypoint",
    "to_iris_request",
    "to_resource_spec",
    "translate_errors",
]

IRIS = capabilities_of("iris")
"""What Iris refuses in a request (fray-core declares each backend's table once)."""

_STATES: dict[int, JobStatus] = {
    job_pb2.JOB_STATE_PENDING: JobStatus.PENDING,
    job_pb2.JOB_STATE_BUILDING: JobStatus.PENDING,
    job_pb2.JOB_STATE_RUNNING: JobStatus.RUNNING,
    job_pb2.JOB_STATE_SUCCEEDED: JobStatus.SUCCEEDED,
    job_pb2.JOB_STATE_FAILED: JobStatus.FAILED,
    job_pb2.JOB_STATE_KILLED: JobStatus.STOPPED,
    job_pb2.JOB_STATE_WORKER_FAILED: JobStatus.FAILED,
    job_pb2.JOB_STATE_UNSCHEDULABLE: JobStatus.FAILED,
}


def job_status(state: int) -> JobStatus:
    """Fray's status for an Iris ``JobState`` (unknown states count as PENDING)."""
    return _STATES.get(state, JobStatus.PENDING)


def to_resource_spec(resources: ResourceConfig) -> ResourceSpec:
    """cpu, ram, disk and the device of one replica."""
    device = resources.device
    config: job_pb2.DeviceConfig | None
    if isinstance(device, TpuConfig):
        config = tpu_device(device.variant, device.chip_count())
    elif isinstance(device, GpuConfig):
        # "auto" takes whatever GPU the cluster has: the variant is left open.
        config = gpu_device("" if device.variant == "auto" else device.variant, device.count)
    else:
        assert isinstance(device, CpuConfig)
        config = None
    return ResourceSpec(
        cpu=resources.cpu,
        memory=resources.ram_bytes,
        disk=resources.disk_bytes,
        device=config,
    )


def to_constraints(resources: ResourceConfig) -> list[Constraint]:
    """Placement constraints: non-preemptible capacity, regions (``[ANY_REGION]``: any, not
    the parent's), zone, target cluster, device variants."""
    constraints: list[Constraint] = []
    if not resources.preemptible:
        constraints.append(preemptible_constraint(False))
    if resources.regions == (ANY_REGION,):
        constraints.append(_any_region())
    elif resources.regions:
        constraints.append(region_constraint(list(resources.regions)))
    if resources.zone:
        constraints.append(zone_constraint(resources.zone))
    if resources.target_cluster:
        constraints.append(_cluster(resources.target_cluster))
    device = resources.device
    if resources.device_alternatives and isinstance(device, TpuConfig | GpuConfig):
        constraints.append(
            device_variant_constraint([device.variant, *resources.device_alternatives])
        )
    return constraints


def _any_region() -> Constraint:
    if _iris.any_region_constraint is None:
        raise InvalidRequestError.for_field(
            "ResourceConfig.regions",
            [ANY_REGION],
            f"a list of region names with marin-iris {_iris.IRIS_VERSION}: ANY_REGION (any "
            f"region, not the parent job's) needs {_iris.NEWER_IRIS}",
        )
    return _iris.any_region_constraint()


def _cluster(name: str) -> Constraint:
    if _iris.CLUSTER_CONSTRAINT_KEY is None:
        raise InvalidRequestError.for_field(
            "ResourceConfig.target_cluster",
            name,
            f"only None with marin-iris {_iris.IRIS_VERSION}: choosing a cluster needs "
            f"{_iris.NEWER_IRIS}",
        )
    return Constraint.create(key=_iris.CLUSTER_CONSTRAINT_KEY, op=ConstraintOp.EQ, value=name)


def to_coscheduling(resources: ResourceConfig) -> CoschedulingConfig | None:
    """Gang placement by slice, only for TPU types that span several VMs."""
    device = resources.device
    if isinstance(device, TpuConfig) and device.vm_count() > 1:
        return CoschedulingConfig(group_by="tpu-name")
    return None


def to_environment(request: JobRequest, extra_env: dict[str, str]) -> EnvironmentSpec:
    """Env vars (device defaults overridden by the request's own), pip packages, extras."""
    env = request.env_vars
    env.update(extra_env)
    return environment_spec(request.environment, env)


def environment_spec(environment: EnvironmentConfig | None, env: dict[str, str]) -> EnvironmentSpec:
    """Iris's environment: ``env`` as the env vars, the pip packages and extras of
    ``environment`` (none when it is ``None``)."""
    environment = environment or EnvironmentConfig()
    return EnvironmentSpec(
        pip_packages=list(environment.pip_packages) or None,
        env_vars=env,
        extras=list(environment.extras) or None,
    )


@dataclasses.dataclass(frozen=True)
class IrisRequest:
    """The keyword arguments of ``iris.client.IrisClient.submit`` for one Fray request."""

    resources: ResourceSpec
    environment: EnvironmentSpec
    constraints: list[Constraint]
    coscheduling: CoschedulingConfig | None
    replicas: int
    max_retries_failure: int
    max_retries_preemption: int
    task_image: str | None
    max_task_failures: int | None = None
    priority_band: int = 0
    timeout: Duration | None = None
    scheduling_timeout: Duration | None = None
    container_profile: int = 0

    def kwargs(self) -> dict[str, Any]:
        """As keyword arguments for ``submit`` (only what this Iris line accepts)."""
        kwargs: dict[str, Any] = {
            "resources": self.resources,
            "environment": self.environment,
            "constraints": self.constraints,
            "coscheduling": self.coscheduling,
            "replicas": self.replicas,
            "max_retries_failure": self.max_retries_failure,
            "max_retries_preemption": self.max_retries_preemption,
            "task_image": self.task_image,
        }
        if self.max_task_failures is not None:
            kwargs["max_task_failures"] = self.max_task_failures
        if self.priority_band:
            kwargs["priority_band"] = self.priority_band
        if self.timeout is not None:
            kwargs["timeout"] = self.timeout
        if self.scheduling_timeout is not None:
            kwargs["scheduling_timeout"] = self.scheduling_timeout
        if self.container_profile:
            kwargs["container_profile"] = self.container_profile
        return kwargs


def to_task_failure_budget(request: JobRequest) -> int | None:
    """Iris's job-wide ``max_task_failures`` for a request, where the installed line takes it.

    From 0.2.2xx on, Iris fails a job once its failed attempts, summed over every task,
    exceed ``max_task_failures`` (default 0: the first failure), whatever each task's own
    ``max_retries_failure``. Fray's ``max_task_failures`` is that budget; where it is 0 (no
    job-wide limit), Fray asks for ``replicas × max_retries_failure``, which lets every
    replica use all its own retries, as on 0.2.20.
    """
    if not _iris.HAS_JOB_FAILURE_BUDGET:
        if request.max_task_failures:
            raise InvalidRequestError.for_field(
                "max_task_failures",
                request.max_task_failures,
                f"only 0 with marin-iris {_iris.IRIS_VERSION}: the job-wide failure budget "
                "needs marin-iris 0.2.227 (Python >= 3.12)",
            )
        return None
    if request.max_task_failures:
        return request.max_task_failures
    return request.replica_count * request.max_retries_failure


def to_priority_band(priority: int, field: str = "priority") -> int:
    """Iris's priority band for Fray's ``priority`` (0: Iris's default)."""
    if priority and priority not in _iris.PRIORITY_BANDS:
        allowed = ", ".join(f"{n} ({name})" for n, name in sorted(_iris.PRIORITY_BANDS.items()))
        raise InvalidRequestError.for_field(field, priority, f"one of Iris's bands: {allowed}")
    return priority


def to_iris_request(request: JobRequest, *, extra_env: dict[str, str] | None = None) -> IrisRequest:
    """Everything but the entrypoint and the name. What :data:`IRIS` (Iris's capability
    table) refuses is refused first; what depends on the installed marin-iris line is
    refused where it is converted."""
    IRIS.check(request)
    from fray_iris._predecessor_api import convert_container_profile  # it imports this module

    environment = request.environment
    image = request.resources.image
    docker_image = environment.docker_image if environment is not None else None
    return IrisRequest(
        resources=to_resource_spec(request.resources),
        environment=to_environment(request, extra_env or {}),
        constraints=to_constraints(request.resources),
        coscheduling=to_coscheduling(request.resources),
        replicas=request.replica_count,
        max_retries_failure=request.max_retries_failure,
        max_retries_preemption=request.max_retries_preemption,
        task_image=docker_image or image,
        max_task_failures=to_task_failure_budget(request),
        priority_band=to_priority_band(request.priority),
        timeout=_duration(request.timeout),
        scheduling_timeout=_duration(request.scheduling_timeout),
        container_profile=convert_container_profile(request.resources),
    )


def _duration(seconds: float | None) -> Duration | None:
    return Duration.from_seconds(seconds) if seconds is not None else None


def ship_code_by_value(obj: Any) -> None:
    """Pickles the module defining ``obj`` by value when tasks could not import it: the same
    rule raw Iris applies to the callable it is given (``__main__``, modules outside a
    package, and test folders), so Fray runs the same code raw Iris would."""
    import cloudpickle

    module = sys.modules.get(getattr(obj, "__module__", "") or "")
    if module is None or module.__name__ in ("builtins",):
        return
    file = getattr(module, "__file__", None)
    path = Path(file).parts if file else ()
    if module.__package__ is None or module.__spec__ is None or "tests" in path:
        cloudpickle.register_pickle_by_value(module)


def to_iris_entrypoint(request: JobRequest, results_url: str | None) -> IrisEntrypoint:
    """A callable runs through Fray's task wrapper (``_task.run_callable``), which stores
    its value at ``results_url``; a command runs as it is."""
    entry = request.entrypoint
    if entry.callable is None:
        assert entry.command is not None
        return IrisEntrypoint.from_command(*_protect_host_paths(entry.command))
    ship_code_by_value(entry.callable)
    device = request.resources.device
    tpu = (device.variant, device.vm_count()) if isinstance(device, TpuConfig) else None
    return IrisEntrypoint.from_callable(
        run_callable,
        entry.callable,
        tuple(entry.args),
        dict(entry.kwargs),
        results_url,
        tpu,
    )


def _protect_host_paths(argv: tuple[str, ...] | list[str]) -> list[str]:
    """A local Iris worker rewrites every argument that starts with a container mount path
    (``/tmp`` becomes the task's private temp dir). An interpreter or script that really
    lives under ``/tmp`` on this machine (a checkout or venv there) would then vanish, so
    such a command runs through ``/bin/sh -c "exec ..."``, whose one argument starts with
    ``exec`` and is left alone. Commands that only name ``/tmp`` paths that do not exist
    here keep Iris's remapping."""
    argv = list(argv)
    if any(arg.startswith("/tmp/") and os.path.exists(arg) for arg in argv):
        return ["/bin/sh", "-c", "exec " + shlex.join(argv)]
    return argv


_INVALID = {Code.INVALID_ARGUMENT, Code.FAILED_PRECONDITION, Code.OUT_OF_RANGE}


@contextlib.contextmanager
def translate_errors(
    what: str, *, job_id: str | None = None, address: str | None = None
) -> Iterator[None]:
    """Turns Iris and Connect exceptions raised inside the block into Fray's errors."""
    try:
        yield
    except FrayError:
        raise
    except ConnectError as err:
        code = err.code
        text = f"{what}: Iris said {code.name if code else 'UNKNOWN'}: {err.message}"
        if code == Code.NOT_FOUND and job_id is not None:
            raise JobNotFoundError(
                job_id, f"no Iris job with id {job_id!r} ({err.message})"
            ) from err
        if code == Code.ALREADY_EXISTS:
            raise JobAlreadyExistsError(job_id or what) from err
        if code in _INVALID:
            if "client is too old" in (err.message or ""):
                text += (
                    f" (fray-iris runs marin-iris {_iris.IRIS_VERSION}: install the marin-iris "
                    "release this controller runs, or a newer one, and submit again; on Python "
                    "3.11 fray-iris can only use 0.2.20, so use Python 3.12 or 3.13)"
                )
            raise InvalidRequestError(text, field=what, value=job_id, allowed=err.message) from err
        if code in (Code.UNAVAILABLE, Code.DEADLINE_EXCEEDED):
            where = f" at {address}" if address else ""
            raise FrayError(
                f"{what}: the Iris controller{where} is unreachable: {err.message}"
            ) from err
        raise FrayError(text) from err
    except IrisJobAlreadyExists as err:
        raise JobAlreadyExistsError(job_id or what) from err
    except IrisJobFailedError as err:
        raise JobFailedError(str(err.job_id), JobStatus.FAILED, str(err)) from err
    except TimeoutError as err:
        raise JobTimeoutError(f"{what}: {err}") from err
    except ValueError as err:
        raise InvalidRequestError(f"{what}: {err}", field=what, allowed=str(err)) from err
