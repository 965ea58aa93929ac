# pyright: standard
"""The marin-iris 0.2.20 line (the newest on Python 3.11) through its public ``IrisClient``,
but where nothing public does the same: ``IrisClient._cluster_client`` for many jobs' states
in one call (the watcher's one question a round; also on 0.2.227) and endpoints by prefix (a
group's members), and its ``_address`` (the controller of a wrapped client; also 0.2.227)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from iris.client import IrisClient
from iris.cluster.log_keys import build_log_source
from iris.cluster.types import EnvironmentSpec, JobName
from iris.rpc import job_pb2

from fray import EnvironmentConfig
from fray.errors import InvalidRequestError
from fray_iris._views import JobView, LogLine, TaskView, iris_error

VERSION = "0.2.20"
NEWER = "marin-iris 0.2.227 (Python >= 3.12)"
FAILURE_BUDGET = False  # submit() has no job-wide max_task_failures
CONTAINER_PROFILES: dict[str, int] = {}
CLUSTER_KEY: str | None = None  # no worker attribute names the cluster
ANYWHERE = None  # no ANY region on this line (its region constraints take EQ and IN only)
STATES_PER_CALL = 1000  # job ids per state call: a request of 10,000 ids is one 10,000-row query


def gpu_gang_level(variant: str, count: int, replicas: int) -> str:
    """The leaf group, the only coscheduling level here."""
    del variant, count, replicas
    return "leafgroup"


def environment(
    pip_packages: list[str] | None, env_vars: dict[str, str], extras: list[str] | None, config: Any
) -> EnvironmentSpec:
    """Refuses what this line cannot deliver (it forwards HF_TOKEN and WANDB_API_KEY itself)."""
    default = EnvironmentConfig()
    for field in ("secrets", "setup_scripts", "sync_packages", "secret_behavior"):
        if getattr(config, field) != getattr(default, field):
            value = "<hidden>" if field == "secrets" else getattr(config, field)
            allowed = f"{getattr(default, field)!r} with marin-iris {VERSION}: it needs {NEWER}"
            raise InvalidRequestError.for_field(f"EnvironmentConfig.{field}", value, allowed)
    return EnvironmentSpec(pip_packages=pip_packages, env_vars=env_vars, extras=extras)


def state_name(state: Any) -> str:
    """The lower-case name of a ``job_pb2.JobState`` number (``running``...)."""
    return job_pb2.JobState.Name(state).removeprefix("JOB_STATE_").lower()


def _seconds(ts: Any) -> float | None:
    """Seconds since the epoch of a protobuf timestamp (``None`` when unset)."""
    return ts.epoch_ms / 1000.0 if ts.epoch_ms else None


def _view(p: job_pb2.JobStatus) -> JobView:
    """The neutral view of a ``job_pb2.JobStatus``."""
    return job_view(p, p.job_id, state_name(p.state), p.error, _seconds)


def job_view(
    s: Any, job_id: str, state: str, error: str, seconds: Callable[[Any], float | None]
) -> JobView:
    """The neutral view of either line's ``JobStatus``, given what differs between them: its
    wire id, state name and error, and how to read a timestamp in ``seconds``."""
    return JobView(
        job_id,
        state,
        iris_error(error),
        s.exit_code,
        s.failure_count,
        s.preemption_count,
        seconds(s.submitted_at),
        seconds(s.started_at),
        seconds(s.finished_at),
        s.pending_reason,
        s.task_count,
    )


def states(raw: IrisClient, wires: list[JobName]) -> dict[str, str]:
    """Each job's state by wire id, in one ``GetJobState`` call per :data:`STATES_PER_CALL`
    ids (jobs the controller does not know are left out)."""
    found: dict[str, str] = {}
    for start in range(0, len(wires), STATES_PER_CALL):
        batch = raw._cluster_client.get_job_states(wires[start : start + STATES_PER_CALL])
        found.update((wire, state_name(state)) for wire, state in batch.items())
    return found


def status(raw: IrisClient, wire: JobName) -> JobView:
    """One job's status (``GetJobStatus``)."""
    return _view(raw.status(wire))


def tasks(raw: IrisClient, wire: JobName) -> list[TaskView]:
    """The job's tasks: state, attempts started, exit code and error of each."""
    return [
        task_view(
            t,
            int(t.task_id.rstrip("/").rsplit("/", 1)[-1]),
            job_pb2.TaskState.Name(t.state).removeprefix("TASK_STATE_").lower(),
            t.current_attempt_id,
            t.error,
        )
        for t in raw.list_tasks(wire)
    ]


def task_view(t: Any, index: int, state: str, current_attempt: int, error: str) -> TaskView:
    """The neutral view of either line's task, given what differs between them: its index,
    state name, current attempt and error."""
    started = state not in ("pending", "unspecified")
    attempts = max(len(t.attempts), current_attempt + 1 if started else 0)
    return TaskView(index, state, attempts, t.exit_code, iris_error(error))


def jobs(raw: IrisClient, prefix: str) -> list[JobView]:
    """Every job whose wire id starts with ``prefix`` (``ListJobs``, paged by Iris)."""
    return [_view(p) for p in raw.list_jobs(prefix=prefix)]


def terminate(raw: IrisClient, wire: JobName) -> None:
    """Stops the job (Iris stops its children too)."""
    raw.terminate(wire)


def logs(raw: IrisClient, wire: JobName, max_lines: int = 0, tail: bool = False) -> list[LogLine]:
    """The job's lines so far, its descendants' included (a prefix query), oldest first;
    with ``tail``, the last ``max_lines``.

    One ``FetchLogs`` call returns at most the log server's page (1,000 lines when
    ``max_lines`` is 0), so all lines are read page by page, each from the cursor the last
    page ended at, until a page comes back empty.
    """
    source, scope = build_log_source(wire)
    found: list[LogLine] = []
    cursor = 0
    while True:
        page = raw._cluster_client.fetch_logs(
            source, match_scope=scope, cursor=cursor, max_lines=max_lines, tail=tail
        )
        found += (
            LogLine(
                e.key.rpartition(":")[0] or e.key,
                e.source,
                e.timestamp.epoch_ms,
                e.data,
                e.attempt_id,
            )
            for e in page.entries
        )
        if tail or not page.entries or page.cursor <= cursor:
            return sorted(found, key=lambda entry: entry.at_ms)
        cursor = page.cursor


def endpoints(raw: IrisClient, prefix: str) -> list[str]:
    """The names of the registered endpoints under ``prefix``, in one ``ListEndpoints`` call."""
    return [e.name for e in raw._cluster_client.list_endpoints(prefix)]


def endpoint(raw: IrisClient, wire: JobName, name: str) -> list[Any]:
    """The registrations of the endpoint ``name`` of the job ``wire`` (also 0.2.227's): each
    has its address (``url``) and the id Iris gave that registration (``actor_id``)."""
    return raw.resolver_for_job(wire).resolve(name).endpoints


def controller_address(raw: Any) -> str | None:
    """The controller's address of a remote Iris client (``None`` for another kind)."""
    try:
        return str(raw._cluster_client._address)
    except AttributeError:  # not a remote client
        return None
