# pyright: standard, reportMissingImports=false, reportAttributeAccessIssue=false, reportCallIssue=false
# (pyright runs in the Python 3.11 environment, where marin-iris is 0.2.20.)
"""The marin-iris 0.2.227 line (Python 3.12 and 3.13, what Iris users run today) through its
public ``IrisClient`` and ``Job``; ``states``, ``controller_address``, ``endpoint``, the
builders of the neutral views (``job_view``, ``task_view``) and ``logs`` are 0.2.20's."""

from __future__ import annotations

from typing import Any

from iris.client import IrisClient
from iris.cluster.constraints import CLUSTER_CONSTRAINT_KEY, any_region_constraint
from iris.cluster.platforms.k8s.coreweave_topology import gpu_gang_coscheduling_level
from iris.cluster.types import EnvironmentSpec, JobName
from iris.rpc import job_pb2
from rigging.secrets import SecretBehavior

from fray_iris._iris_0_2_20 import controller_address as controller_address
from fray_iris._iris_0_2_20 import endpoint as endpoint
from fray_iris._iris_0_2_20 import job_view, task_view
from fray_iris._iris_0_2_20 import logs as logs
from fray_iris._iris_0_2_20 import state_name as state_number_name
from fray_iris._iris_0_2_20 import states as states
from fray_iris._views import JobView, TaskView

FAILURE_BUDGET = True  # submit(max_task_failures=): failed attempts of the whole job
CONTAINER_PROFILES: dict[str, int] = dict(job_pb2.ContainerProfile.items())
CLUSTER_KEY: str | None = CLUSTER_CONSTRAINT_KEY
ANYWHERE = any_region_constraint()  # any region, not the parent job's
gpu_gang_level = gpu_gang_coscheduling_level  # NVLink racks for GB200/GB300, else leaf group


def environment(
    pip_packages: list[str] | None, env_vars: dict[str, str], extras: list[str] | None, config: Any
) -> EnvironmentSpec:
    """With secrets (files), ``inherit``/``isolate``, setup scripts (``None``: uv sync), scope."""
    scripts = config.setup_scripts
    return EnvironmentSpec(
        pip_packages=pip_packages,
        env_vars=env_vars,
        secrets=dict(config.secrets),
        secret_behavior=SecretBehavior(config.secret_behavior),
        extras=extras,
        setup_scripts=list(scripts) if scripts is not None else None,
        sync_packages=list(config.sync_packages),
    )


def state_name(state: Any) -> str:
    """Of a ``JobState`` or a ``job_pb2.JobState`` number."""
    return state_number_name(state) if isinstance(state, int) else str(state.value)


def _seconds(ts: Any) -> float | None:
    """Seconds since the epoch of a ``Timestamp`` (``None`` when unset)."""
    return ts.epoch_ms() / 1000.0 if ts is not None and ts.epoch_ms() else None


def _view(s: Any) -> JobView:
    """The neutral view of a 0.2.227 ``JobStatus``."""
    return job_view(s, s.job_id.to_wire(), s.state.value, s.error_message, _seconds)


def status(raw: IrisClient, wire: JobName) -> JobView:
    """One job's status (``GetJobStatus``)."""
    return _view(raw.job(wire).status())


def tasks(raw: IrisClient, wire: JobName) -> list[TaskView]:
    """The job's tasks: state, attempts started, exit code and error of each."""
    return [
        task_view(t, t.task_id.task_index, t.state.value, t.current_attempt_number, t.error_message)
        for t in raw.list_tasks(wire)
    ]


def jobs(raw: IrisClient, prefix: str) -> list[JobView]:
    """Every job whose wire id starts with ``prefix`` (``ListJobs``, paged by Iris)."""
    return [_view(s) for s in raw.list_jobs(prefix=prefix)]


def terminate(raw: IrisClient, wire: JobName) -> None:
    """Stops the job (Iris stops its children too)."""
    raw.job(wire).cancel()


def endpoints(raw: IrisClient, prefix: str) -> list[str]:
    """The names of the registered endpoints under ``prefix``, in one ``ListEndpoints`` call."""
    return [e.name for e in raw.list_endpoints(prefix)]
