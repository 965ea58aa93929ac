# pyright: standard
"""The marin-iris 0.2.20 line (the newest that installs on Python 3.11), through its
public ``IrisClient``; kept in this one module for Python 3.11 users.

Private names used (nothing public does the same): ``IrisClient._cluster_client``, for the
state of many jobs in one call (``get_job_states``: the done-watcher's one question a
round) and for endpoints by name prefix (``list_endpoints``: an actor group's members in
one call).
"""

from __future__ import annotations

from typing import Any

from iris.client import IrisClient
from iris.cluster.types import EnvironmentSpec, JobName
from iris.rpc import job_pb2

from fray.errors import BackendUnavailableError, InvalidRequestError
from fray_iris._views import JobView, LogLine, TaskView, parent_of

VERSION = "0.2.20"
NEWER = "marin-iris 0.2.227 (Python >= 3.12)"
FAILURE_BUDGET = False  # submit() has no job-wide max_task_failures
CONTAINER_PROFILES: dict[str, int] = {}
CLUSTER_KEY: str | None = None  # no worker attribute names the cluster
ACTOR_NOT_FOUND = frozenset({"NotFound"})  # the actor server's error_type for an unknown name


def any_region() -> Any:
    """No ANY region on this line (its region constraints take EQ and IN only)."""
    return None


def newer_module(name: str, what: str) -> Any:
    """Raises: what needs ``name`` needs the newer line."""
    raise BackendUnavailableError(
        f"{what} needs {name}, which marin-iris {VERSION} does not have: install {NEWER}"
    )


def gpu_gang_level(variant: str, count: int, replicas: int) -> str:
    """The topology level a GPU gang is coscheduled on: the leaf group, the only one here."""
    del variant, count, replicas
    return "leafgroup"


def environment(
    pip_packages: list[str] | None, env_vars: dict[str, str], extras: list[str] | None, config: Any
) -> EnvironmentSpec:
    """Iris's environment; refuses what this line cannot deliver: explicit secrets, setup
    scripts, a package sync scope, and ``isolate`` (it forwards ``HF_TOKEN`` and
    ``WANDB_API_KEY`` from the submitter's environment)."""
    behavior = getattr(config, "secret_behavior", None)
    for field, allowed in (
        ("secrets", "an empty map"),
        ("setup_scripts", "None"),
        ("sync_packages", "None"),
        ("secret_behavior", "'inherit'"),
    ):
        value = getattr(config, field, None)
        if field == "secret_behavior":
            value = str(getattr(behavior, "value", behavior) or "inherit")
            value = None if value == "inherit" else value
        if value or (value is not None and field == "setup_scripts"):
            raise InvalidRequestError.for_field(
                f"EnvironmentConfig.{field}",
                "<hidden>" if field == "secrets" else value,
                f"{allowed} with marin-iris {VERSION}: it needs {NEWER}",
            )
    return EnvironmentSpec(pip_packages=pip_packages, env_vars=env_vars, extras=extras)


def state_name(state: Any) -> str:
    """Iris's name of a job state (a ``job_pb2.JobState`` number), in lower case."""
    return job_pb2.JobState.Name(state).removeprefix("JOB_STATE_").lower()


def _seconds(ts: Any) -> float | None:
    return ts.epoch_ms / 1000.0 if ts.epoch_ms else None


def _view(p: job_pb2.JobStatus) -> JobView:
    return JobView(
        p.job_id,
        state_name(p.state),
        p.error,
        p.exit_code,
        p.failure_count,
        p.preemption_count,
        _seconds(p.submitted_at),
        _seconds(p.started_at),
        _seconds(p.finished_at),
        p.pending_reason,
        p.task_count,
        parent_of(p.job_id),
    )


def states(raw: IrisClient, wires: list[JobName]) -> dict[str, str]:
    """The state of each job, by wire id, in one call (unknown jobs are left out)."""
    return {k: state_name(v) for k, v in raw._cluster_client.get_job_states(wires).items()}


def status(raw: IrisClient, wire: JobName) -> JobView:
    """The job's status."""
    return _view(raw.status(wire))


def tasks(raw: IrisClient, wire: JobName) -> list[TaskView]:
    """The job's tasks."""
    found: list[TaskView] = []
    for t in raw.list_tasks(wire):
        state = job_pb2.TaskState.Name(t.state).removeprefix("TASK_STATE_").lower()
        started = state not in ("pending", "unspecified")
        attempts = max(len(t.attempts), t.current_attempt_id + 1 if started else 0)
        index = int(t.task_id.rstrip("/").rsplit("/", 1)[-1])
        found.append(TaskView(index, state, attempts, t.exit_code, t.error))
    return found


def jobs(raw: IrisClient, prefix: str) -> list[JobView]:
    """Every job whose wire id starts with ``prefix``."""
    return [_view(p) for p in raw.list_jobs(prefix=prefix)]


def terminate(raw: IrisClient, wire: JobName) -> None:
    """Stops the job (Iris stops its children)."""
    raw.terminate(wire)


def logs(raw: IrisClient, wire: JobName, max_lines: int = 0, tail: bool = False) -> list[LogLine]:
    """The output of the job and its descendants, oldest first; with ``tail``, the last
    ``max_lines`` lines."""
    entries = raw.fetch_task_logs(wire, max_lines=max_lines, tail=tail)
    return [LogLine(e.task_id.to_wire(), e.source, e.timestamp.epoch_ms(), e.data) for e in entries]


def endpoints(raw: IrisClient, prefix: str) -> list[str]:
    """Names of the endpoints that start with ``prefix``."""
    return [e.name for e in raw._cluster_client.list_endpoints(prefix)]


def endpoint(raw: IrisClient, wire: JobName, name: str) -> str | None:
    """The address of the endpoint named ``name`` (absolute) of job ``wire``, if any."""
    found = raw.resolver_for_job(wire).resolve(name).endpoints
    return found[0].url if found else None
