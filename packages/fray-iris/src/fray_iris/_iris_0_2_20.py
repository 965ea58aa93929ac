# pyright: standard
"""The marin-iris 0.2.20 line (the newest on Python 3.11), through its public ``IrisClient``;
the functions ``_views`` lists.

Private names (nothing public does the same): ``IrisClient._cluster_client``, for many jobs'
states in one call (``get_job_states``: the watcher's one question a round) and endpoints by
name prefix (``list_endpoints``: an actor group's members in one call), and its ``_address``
(the controller of a wrapped client).
"""

from __future__ import annotations

from typing import Any

from iris.client import IrisClient
from iris.cluster.types import EnvironmentSpec, JobName
from iris.rpc import job_pb2

from fray.errors import InvalidRequestError
from fray_iris._views import JobView, LogLine, TaskView

VERSION = "0.2.20"
NEWER = "marin-iris 0.2.227 (Python >= 3.12)"
FAILURE_BUDGET = False  # submit() has no job-wide max_task_failures
CONTAINER_PROFILES: dict[str, int] = {}
CLUSTER_KEY: str | None = None  # no worker attribute names the cluster
ACTOR_NOT_FOUND = frozenset({"NotFound"})  # the actor server's error_type for an unknown name


def any_region() -> Any:
    """None: no ANY region on this line (its region constraints take EQ and IN only)."""
    return None


def gpu_gang_level(variant: str, count: int, replicas: int) -> str:
    """The leaf group, the only coscheduling level here."""
    del variant, count, replicas
    return "leafgroup"


def environment(
    pip_packages: list[str] | None, env_vars: dict[str, str], extras: list[str] | None, config: Any
) -> EnvironmentSpec:
    """Refuses what this line cannot deliver: explicit secrets, setup scripts, a package sync
    scope, and ``isolate`` (it forwards ``HF_TOKEN`` and ``WANDB_API_KEY`` itself)."""
    behavior = getattr(config, "secret_behavior", None)
    behavior = str(getattr(behavior, "value", behavior) or "inherit")
    for field, value, allowed in (
        ("secrets", getattr(config, "secrets", None), "an empty map"),
        ("setup_scripts", getattr(config, "setup_scripts", None), "None"),
        ("sync_packages", getattr(config, "sync_packages", None), "None"),
        ("secret_behavior", None if behavior == "inherit" else behavior, "'inherit'"),
    ):
        if value or (value is not None and field == "setup_scripts"):
            raise InvalidRequestError.for_field(
                f"EnvironmentConfig.{field}",
                "<hidden>" if field == "secrets" else value,
                f"{allowed} with marin-iris {VERSION}: it needs {NEWER}",
            )
    return EnvironmentSpec(pip_packages=pip_packages, env_vars=env_vars, extras=extras)


def state_name(state: Any) -> str:
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
    )


def states(raw: IrisClient, wires: list[JobName]) -> dict[str, str]:
    return {k: state_name(v) for k, v in raw._cluster_client.get_job_states(wires).items()}


def status(raw: IrisClient, wire: JobName) -> JobView:
    return _view(raw.status(wire))


def tasks(raw: IrisClient, wire: JobName) -> list[TaskView]:
    found: list[TaskView] = []
    for t in raw.list_tasks(wire):
        state = job_pb2.TaskState.Name(t.state).removeprefix("TASK_STATE_").lower()
        started = state not in ("pending", "unspecified")
        attempts = max(len(t.attempts), t.current_attempt_id + 1 if started else 0)
        index = int(t.task_id.rstrip("/").rsplit("/", 1)[-1])
        found.append(TaskView(index, state, attempts, t.exit_code, t.error))
    return found


def jobs(raw: IrisClient, prefix: str) -> list[JobView]:
    return [_view(p) for p in raw.list_jobs(prefix=prefix)]


def terminate(raw: IrisClient, wire: JobName) -> None:
    raw.terminate(wire)


def logs(raw: IrisClient, wire: JobName, max_lines: int = 0, tail: bool = False) -> list[LogLine]:
    entries = raw.fetch_task_logs(wire, max_lines=max_lines, tail=tail)
    return [LogLine(e.task_id.to_wire(), e.source, e.timestamp.epoch_ms(), e.data) for e in entries]


def endpoints(raw: IrisClient, prefix: str) -> list[str]:
    return [e.name for e in raw._cluster_client.list_endpoints(prefix)]


def endpoint(raw: IrisClient, wire: JobName, name: str) -> str | None:
    found = raw.resolver_for_job(wire).resolve(name).endpoints
    return found[0].url if found else None


def controller_address(raw: Any) -> str | None:
    try:
        return str(raw._cluster_client._address)
    except AttributeError:  # not a remote client
        return None
