# pyright: standard, reportMissingImports=false, reportAttributeAccessIssue=false, reportCallIssue=false
# (pyright runs in the Python 3.11 environment, where marin-iris is 0.2.20.)
"""The marin-iris 0.2.227 line (Python 3.12 and 3.13, what Iris users run today), through
its public ``IrisClient`` and ``Job`` objects; the functions ``_views`` lists.

Private names (nothing public does the same): ``IrisClient._cluster_client``, for many jobs'
states in one call (``get_job_states``: the watcher's one question a round; the public
``job_state`` asks about one job), and its ``_address`` (the controller of a wrapped client).
"""

from __future__ import annotations

from typing import Any

from iris.client import IrisClient
from iris.cluster.constraints import CLUSTER_CONSTRAINT_KEY, any_region_constraint
from iris.cluster.platforms.k8s.coreweave_topology import gpu_gang_coscheduling_level
from iris.cluster.types import EnvironmentSpec, JobName
from iris.rpc import job_pb2
from rigging.secrets import SecretBehavior

from fray.errors import InvalidRequestError
from fray_iris._views import JobView, LogLine, TaskView

FAILURE_BUDGET = True  # submit(max_task_failures=): failed attempts of the whole job
CONTAINER_PROFILES: dict[str, int] = dict(job_pb2.ContainerProfile.items())
CLUSTER_KEY: str | None = CLUSTER_CONSTRAINT_KEY
# The actor server's error_type for an unknown method or actor ("unavailable" means an actor
# not registered yet, which a retry may find).
ACTOR_NOT_FOUND = frozenset({"not_found"})
any_region = any_region_constraint  # anywhere, not in the parent job's region
gpu_gang_level = gpu_gang_coscheduling_level  # NVLink racks for GB200/GB300, else leaf group


def environment(
    pip_packages: list[str] | None, env_vars: dict[str, str], extras: list[str] | None, config: Any
) -> EnvironmentSpec:
    """With the secrets (delivered as files), how they combine with the submitter's
    (``inherit`` or ``isolate``), the setup scripts (``None``: Iris's default uv sync, ``[]``:
    none) and the packages that sync covers."""
    behavior = getattr(config, "secret_behavior", None) or SecretBehavior.INHERIT
    try:
        behavior = SecretBehavior(str(getattr(behavior, "value", behavior)))
    except ValueError:
        raise InvalidRequestError.for_field(
            "EnvironmentConfig.secret_behavior", behavior, "'inherit' or 'isolate'"
        ) from None
    scripts = getattr(config, "setup_scripts", None)
    return EnvironmentSpec(
        pip_packages=pip_packages,
        env_vars=env_vars,
        secrets=dict(getattr(config, "secrets", None) or {}),
        secret_behavior=behavior,
        extras=extras,
        setup_scripts=list(scripts) if scripts is not None else None,
        sync_packages=list(getattr(config, "sync_packages", None) or []),
    )


def state_name(state: Any) -> str:
    """Of a ``JobState`` or a ``job_pb2.JobState`` number."""
    if isinstance(state, int):
        return job_pb2.JobState.Name(state).removeprefix("JOB_STATE_").lower()
    return str(state.value)


def _seconds(ts: Any) -> float | None:
    return ts.epoch_ms() / 1000.0 if ts is not None and ts.epoch_ms() else None


def _view(s: Any) -> JobView:
    return JobView(
        s.job_id.to_wire(),
        s.state.value,
        s.error_message,
        s.exit_code,
        s.failure_count,
        s.preemption_count,
        _seconds(s.submitted_at),
        _seconds(s.started_at),
        _seconds(s.finished_at),
        s.pending_reason,
        s.task_count,
    )


def states(raw: IrisClient, wires: list[JobName]) -> dict[str, str]:
    return {k: state_name(v) for k, v in raw._cluster_client.get_job_states(wires).items()}


def status(raw: IrisClient, wire: JobName) -> JobView:
    return _view(raw.job(wire).status())


def tasks(raw: IrisClient, wire: JobName) -> list[TaskView]:
    found: list[TaskView] = []
    for t in raw.list_tasks(wire):
        state = t.state.value
        started = state not in ("pending", "unspecified")
        attempts = max(len(t.attempts), t.current_attempt_number + 1 if started else 0)
        found.append(TaskView(t.task_id.task_index, state, attempts, t.exit_code, t.error_message))
    return found


def jobs(raw: IrisClient, prefix: str) -> list[JobView]:
    return [_view(s) for s in raw.list_jobs(prefix=prefix)]


def terminate(raw: IrisClient, wire: JobName) -> None:
    raw.job(wire).cancel()


def logs(raw: IrisClient, wire: JobName, max_lines: int = 0, tail: bool = False) -> list[LogLine]:
    entries = raw.job(wire).logs(max_lines=max_lines, tail=tail)
    return [LogLine(e.task_id.to_wire(), e.source, e.timestamp.epoch_ms(), e.data) for e in entries]


def endpoints(raw: IrisClient, prefix: str) -> list[str]:
    return [e.name for e in raw.list_endpoints(prefix)]


def endpoint(raw: IrisClient, wire: JobName, name: str) -> str | None:
    del wire
    found = raw.list_endpoint_instances(name)
    return found[0].address if found else None


def controller_address(raw: Any) -> str | None:
    try:
        return str(raw._cluster_client._address)
    except AttributeError:  # not a remote client
        return None
