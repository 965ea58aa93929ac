# pyright: standard
"""Conversions between Fray's types and Iris's: requests to ``IrisClient.submit``'s
arguments, Iris jobs to Fray statuses and infos, Iris errors to Fray errors. ``line`` is the
adapter of the installed marin-iris line (``_iris_0_2_20`` on Python 3.11, else 0.2.227's)."""

from __future__ import annotations

import contextlib
import importlib.metadata
import os
import re
import shlex
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from connectrpc.code import Code
from connectrpc.errors import ConnectError
from iris.client import JobAlreadyExists as IrisJobAlreadyExists
from iris.cluster import constraints as ic
from iris.cluster.types import CoschedulingConfig, ResourceSpec, gpu_device, tpu_device
from iris.cluster.types import Entrypoint as IrisEntrypoint
from iris.rpc import controller_pb2, job_pb2
from iris.rpc.controller_connect import ControllerServiceClientSync
from rigging.timing import Duration

from fray import (
    ANY_REGION,
    EnvironmentConfig,
    GpuConfig,
    JobInfo,
    JobRequest,
    JobStatus,
    ResourceConfig,
    TpuConfig,
)
from fray.backend import capabilities_of
from fray.errors import FrayError, InvalidRequestError, JobAlreadyExistsError, JobNotFoundError
from fray_iris._iris_0_2_20 import NEWER
from fray_iris._task import run_callable
from fray_iris._views import JobView, fray_job_id

IRIS_VERSION = importlib.metadata.version("marin-iris")
if IRIS_VERSION.startswith("0.2.20."):  # fray-iris pins one release of each line
    from fray_iris import _iris_0_2_20 as line
else:
    from fray_iris import _iris_0_2_227 as line


IRIS = capabilities_of("iris")  # what Iris refuses in a request

_STATES = {
    "running": JobStatus.RUNNING,
    "succeeded": JobStatus.SUCCEEDED,
    "killed": JobStatus.STOPPED,
    "failed": JobStatus.FAILED,
    "worker_failed": JobStatus.FAILED,
    "unschedulable": JobStatus.FAILED,
}
_NO_FEEDBACK_YET = "Pending scheduler feedback"  # before Iris's scheduler has looked
_PROBE_TIMEOUT_MS = 5_000
_REASONS = {  # a few words for Connect's long text of a failed connection
    "connection refused": "connection refused",
    "dns error": "the host name does not resolve",
    "name or service not known": "the host name does not resolve",
    "connection reset": "connection reset",
    "timed out": "connection timed out",
}
PRIORITY_BANDS = {
    n: name.removeprefix("PRIORITY_BAND_").lower() for name, n in job_pb2.PriorityBand.items()
}


def job_status(iris_state: Any) -> JobStatus:
    """Fray's status for an Iris state (its name, number or 0.2.227 ``JobState``), or PENDING.
    The parameter keeps the name of the predecessor's ``map_iris_job_state``, which this is."""
    name = iris_state if isinstance(iris_state, str) else line.state_name(iris_state)
    return _STATES.get(name.lower(), JobStatus.PENDING)


def attempts(view: JobView) -> int:
    """Attempts that started, from the job's counts (its tasks say it more exactly)."""
    started = view.started_at is not None
    ended = view.failures + view.preemptions
    return max(ended + (started and job_status(view.state) is not JobStatus.FAILED), started)


def pending_reason(view: JobView) -> str | None:
    """Iris's reason for not placing the job, on one line."""
    reason = " ".join(view.pending_reason.split())
    return reason if reason and reason != _NO_FEEDBACK_YET else None


def job_info(view: JobView, children: tuple[str, ...]) -> JobInfo:
    """The ``JobInfo`` of a job listed by the controller (not submitted by this client)."""
    status = job_status(view.state)
    return JobInfo(
        job_id=fray_job_id(view.job_id),
        name=view.job_id.rsplit("/", 1)[-1],
        status=status,
        attempts=attempts(view),
        preemptions=view.preemptions,
        failures=view.failures,
        error=view.error or None,
        exit_code=view.exit_code if status.is_finished else None,
        parent=fray_job_id(view.parent) if view.parent else None,
        children=children,
        replicas=max(view.tasks, 1),
        submitted_at=view.submitted_at,
        started_at=view.started_at,
        finished_at=view.finished_at,
        pending_reason=pending_reason(view) if status is JobStatus.PENDING else None,
    )


def to_resource_spec(resources: ResourceConfig) -> ResourceSpec:
    """cpu, ram, disk and the device of one replica (``GpuConfig("auto")``: any GPU)."""
    device = resources.device
    config = None
    if isinstance(device, TpuConfig):
        config = tpu_device(device.variant, device.chip_count())
    elif isinstance(device, GpuConfig):
        config = gpu_device("" if device.variant == "auto" else device.variant, device.count)
    return ResourceSpec(
        cpu=resources.cpu, memory=resources.ram_bytes, disk=resources.disk_bytes, device=config
    )


def to_constraints(resources: ResourceConfig) -> list[ic.Constraint]:
    """Placement: preemptible, regions (``[ANY_REGION]``: not the parent's), zone, cluster..."""
    constraints: list[ic.Constraint] = []
    if not resources.preemptible:
        constraints.append(ic.preemptible_constraint(False))
    if resources.regions == (ANY_REGION,):
        constraints.append(_newer("ResourceConfig.regions", [ANY_REGION], line.ANYWHERE))
    elif resources.regions:
        constraints.append(ic.region_constraint(list(resources.regions)))
    if resources.zone:
        constraints.append(ic.zone_constraint(resources.zone))
    if resources.target_cluster:
        key = _newer("ResourceConfig.target_cluster", resources.target_cluster, line.CLUSTER_KEY)
        constraints.append(
            ic.Constraint.create(key=key, op=ic.ConstraintOp.EQ, value=resources.target_cluster)
        )
    device = resources.device
    if resources.device_alternatives and isinstance(device, TpuConfig | GpuConfig):
        variants = [device.variant, *resources.device_alternatives]
        constraints.append(ic.device_variant_constraint(variants))
    return constraints


# Iris's reason for refusing a job too big for every VM (0.2.227), per scaling group, in
# millicores and bytes.
_NEED = re.compile(r"\b(cpu|memory|disk): need (\d+), available (\d+)")
_FIELDS = {"cpu": ("cpu", "cores", 1000), "memory": ("ram", "GiB", 1024**3)}


def explain_unplaceable(message: str, resources: ResourceConfig) -> str:
    """Iris's refusal of a job too big for every VM, in Fray's words: each resource's field
    and sizes in cores and GiB, not Iris's raw counts (a default disk says it is one)."""

    def told(found: re.Match[str]) -> str:
        field, unit, scale = _FIELDS.get(found[1], ("disk", "GiB", 1024**3))
        need = int(found[2]) / scale
        have = int(found[3]) / scale
        why = f"ResourceConfig.{field}"
        if field == "disk" and "disk" not in resources.model_fields_set:
            why = f"{why} defaults to {resources.disk}"
        return f"{field}: {need:.4g} {unit} requested — {why} — its VMs have {have:.4g} {unit}"

    return _NEED.sub(told, message)


def _newer(field: str, value: Any, found: Any, allowed: str = "its default") -> Any:
    """``found``, where the installed line has it; else refuses ``value`` of ``field``."""
    if not found:
        raise InvalidRequestError.for_field(
            field, value, f"{allowed} with marin-iris {IRIS_VERSION}: this needs {NEWER}"
        )
    return found


def to_coscheduling(resources: ResourceConfig, replicas: int = 1) -> CoschedulingConfig | None:
    """Gang placement: a multi-VM TPU by slice; ``replicas`` > 1 GPU nodes on Iris's level."""
    device = resources.device
    if isinstance(device, TpuConfig) and device.vm_count() > 1:
        return CoschedulingConfig(group_by="tpu-name")
    if isinstance(device, GpuConfig) and replicas > 1:
        variants = [device.variant, *(resources.device_alternatives or ())]
        levels = {v: line.gpu_gang_level(v, device.count, replicas) for v in variants}
        if len(set(levels.values())) > 1:
            got = ", ".join(f"{variant}={level}" for variant, level in levels.items())
            raise InvalidRequestError.for_field(
                "ResourceConfig.device_alternatives",
                list(resources.device_alternatives or ()),
                f"GPU types that share one coscheduling topology level; got {got}",
            )
        return CoschedulingConfig(group_by=levels[device.variant])
    return None


def to_environment(environment: EnvironmentConfig | None, env: dict[str, str]) -> Any:
    """Iris's environment: ``env`` as the env vars, the rest from ``environment``."""
    config = environment or EnvironmentConfig()
    pip = list(config.pip_packages) or None
    extras = list(config.extras) or None
    return line.environment(pip, env, extras, config)


def to_container_profile(resources: ResourceConfig) -> int:
    """The Iris ``ContainerProfile`` number for ``resources.container_profile`` (0: none)."""
    profile = resources.container_profile
    field = "ResourceConfig.container_profile"
    if profile is None:
        return 0
    profiles = _newer(field, profile, line.CONTAINER_PROFILES, "only None")
    if profile not in profiles:
        allowed = f"one of Iris's profiles: {', '.join(sorted(profiles))}"
        raise InvalidRequestError.for_field(field, profile, allowed)
    return profiles[profile]


def to_iris_request(request: JobRequest) -> dict[str, Any]:
    """``IrisClient.submit``'s keyword arguments but the entrypoint and the name."""
    IRIS.check(request)
    resources = request.resources
    environment = request.environment
    if request.priority and request.priority not in PRIORITY_BANDS:
        bands = ", ".join(f"{n} ({name})" for n, name in sorted(PRIORITY_BANDS.items()))
        raise InvalidRequestError.for_field(
            "priority", request.priority, f"one of Iris's bands: {bands}"
        )
    kwargs = dict(
        resources=to_resource_spec(resources),
        environment=to_environment(environment, request.env_vars),
        constraints=to_constraints(resources),
        coscheduling=to_coscheduling(resources),
        replicas=request.replica_count,
        max_retries_failure=request.max_retries_failure,
        max_retries_preemption=request.max_retries_preemption,
        task_image=(environment.docker_image if environment else None) or resources.image,
        max_task_failures=to_task_failure_budget(request),
        priority_band=request.priority or None,
        timeout=_duration(request.timeout),
        scheduling_timeout=_duration(request.scheduling_timeout),
        container_profile=to_container_profile(resources) or None,
    )
    return {name: value for name, value in kwargs.items() if value is not None}


def to_task_failure_budget(request: JobRequest) -> int | None:
    """Iris's job-wide ``max_task_failures``; Fray's 0: ``replicas × max_retries_failure``."""
    if not line.FAILURE_BUDGET:
        _newer(
            "max_task_failures", request.max_task_failures, not request.max_task_failures, "only 0"
        )
        return None
    return request.max_task_failures or request.replica_count * request.max_retries_failure


def _duration(seconds: float | None) -> Duration | None:
    """Iris's ``Duration`` of ``seconds`` (``None`` stays ``None``)."""
    return Duration.from_seconds(seconds) if seconds is not None else None


def ship_code_by_value(obj: Any) -> None:
    """Pickles ``obj``'s module by value where raw Iris would: ``__main__``, no package, tests."""
    import cloudpickle

    module = sys.modules.get(getattr(obj, "__module__", "") or "")
    if module is None:  # builtins has a package and a spec: never shipped
        return
    file = getattr(module, "__file__", None)
    path = Path(file).parts if file else ()
    if module.__package__ is None or module.__spec__ is None or "tests" in path:
        cloudpickle.register_pickle_by_value(module)


def to_iris_entrypoint(request: JobRequest, results_url: str | None) -> IrisEntrypoint:
    """A callable runs in ``_task.run_callable`` (which stores its value), a command as it is."""
    entry = request.entrypoint
    if entry.callable is None:
        assert entry.command is not None
        return IrisEntrypoint.from_command(*_protect_host_paths(entry.command))
    ship_code_by_value(entry.callable)
    device = request.resources.device
    tpu = (device.variant, device.vm_count()) if isinstance(device, TpuConfig) else None
    return IrisEntrypoint.from_callable(
        run_callable, entry.callable, tuple(entry.args), dict(entry.kwargs), results_url, tpu
    )


def _protect_host_paths(argv: tuple[str, ...]) -> tuple[str, ...]:
    """A local Iris worker rewrites arguments under a mount path (``/tmp``): a program really
    under ``/tmp`` here runs through ``/bin/sh -c "exec ..."``, whose argument is left alone."""
    if any(arg.startswith("/tmp/") and os.path.exists(arg) for arg in argv):
        return ("/bin/sh", "-c", "exec " + shlex.join(argv))
    return argv


def never_sent(err: ConnectError) -> bool:
    """Whether an RPC failed before its request left; any other (a reset) may have reached it."""
    if err.code is not Code.UNAVAILABLE:
        return False
    cause = err.__cause__
    if type(cause) is ConnectionError or isinstance(cause, ConnectionRefusedError):
        return True  # what the HTTP client raises when it cannot connect
    return "tcp connect error" in err.message


def unreachable_reason(err: ConnectError) -> str:
    """A few words for why a connection to the controller failed, from Connect's long
    error text."""
    if err.code == Code.DEADLINE_EXCEEDED:
        return f"no answer within {_PROBE_TIMEOUT_MS / 1000:g} s"
    lowered = err.message.lower()
    for needle, reason in _REASONS.items():
        if needle in lowered:
            return reason
    return err.message.split("\n", 1)[0][:200] or "unavailable"


def probe(address: str) -> None:
    """Asks the controller one question within 5 s (not Iris's 30 minutes of retries)."""
    with ControllerServiceClientSync(address=address, timeout_ms=_PROBE_TIMEOUT_MS) as stub:
        try:
            stub.get_job_state(controller_pb2.Controller.GetJobStateRequest(job_ids=[]))
        except ConnectError as err:
            if err.code in (Code.UNAVAILABLE, Code.DEADLINE_EXCEEDED):
                raise FrayError(
                    f"cannot reach the Iris controller at {address}: {unreachable_reason(err)}"
                ) from err


@contextlib.contextmanager
def translate_errors(
    what: str, *, job_id: str | None = None, address: str | None = None
) -> Iterator[None]:
    """Turns Iris's and Connect's exceptions raised inside the block into Fray's errors."""
    try:
        yield
    except FrayError:
        raise
    except ConnectError as err:
        code = err.code
        text = f"{what}: Iris said {code.name}: {err.message}"
        if code == Code.NOT_FOUND and job_id is not None:
            raise JobNotFoundError(
                job_id, f"no Iris job with id {job_id!r} ({err.message})"
            ) from err
        if code == Code.ALREADY_EXISTS:
            raise JobAlreadyExistsError(job_id or what) from err
        if code in (Code.INVALID_ARGUMENT, Code.FAILED_PRECONDITION, Code.OUT_OF_RANGE):
            if "client is too old" in err.message:
                text += (
                    f" (fray-iris runs marin-iris {IRIS_VERSION}: install the marin-iris "
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
    except ValueError as err:
        raise InvalidRequestError(f"{what}: {err}", field=what, allowed=str(err)) from err
