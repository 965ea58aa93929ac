# pyright: standard
"""The marin-iris calls fray-iris makes, on either line of the Iris client.

fray-iris supports two lines of marin-iris: 0.2.20 (the newest that installs on Python
3.11) and 0.2.227 (Python 3.12 and 3.13, what Iris users run today). Between them the
high-level client renamed or dropped the calls fray-iris used (``status``, ``terminate``,
``fetch_task_logs``, ``list_endpoints(exact=)``), its listings became dataclasses instead of
protos, and ``submit`` gained a job-wide failure budget whose default (0) fails a job at its
first failed attempt. This module is the only place that knows which line is installed:
everything else calls Iris through the functions here, or through names that both lines
share (the low-level ``RemoteClusterClient`` still speaks the same protos on both).
"""

from __future__ import annotations

import importlib
import importlib.metadata
import inspect
from types import ModuleType
from typing import Any

from connectrpc.code import Code
from connectrpc.errors import ConnectError
from iris.client import IrisClient as RawIrisClient
from iris.client.client import get_iris_ctx
from iris.cluster import constraints as _constraints
from iris.cluster.types import JobName
from iris.rpc import controller_pb2, job_pb2

from fray.errors import BackendUnavailableError, FrayError

__all__ = [
    "ACTOR_NOT_FOUND",
    "CLUSTER_CONSTRAINT_KEY",
    "CONTAINER_PROFILES",
    "HAS_JOB_FAILURE_BUDGET",
    "IRIS_VERSION",
    "NEWER_IRIS",
    "PRIORITY_BANDS",
    "RawIrisClient",
    "any_region_constraint",
    "endpoints_named",
    "endpoints_under",
    "fetch_logs",
    "get_iris_ctx",
    "gpu_gang_level",
    "job_info",
    "job_status",
    "list_jobs",
    "list_tasks",
    "never_sent",
    "newer_module",
    "probe",
    "task_index",
    "task_states",
    "terminate",
    "unreachable_reason",
]

IRIS_VERSION = importlib.metadata.version("marin-iris")

# From 0.2.2xx on, ``submit(max_task_failures=)`` caps the failed attempts of the whole job,
# and its default, 0, overrides ``max_retries_failure``: fray-iris always passes it.
HAS_JOB_FAILURE_BUDGET = "max_task_failures" in inspect.signature(RawIrisClient.submit).parameters

# Iris's priority bands by number (``PRIORITY_BAND_BATCH`` is 3 on both lines; 0 is "the
# default": UNSPECIFIED on 0.2.20, INHERIT, the parent's band, on 0.2.227).
PRIORITY_BANDS: dict[int, str] = {
    number: name.removeprefix("PRIORITY_BAND_").lower()
    for name, number in job_pb2.PriorityBand.items()
}

# The actor server's ``error_type`` for an unknown method or actor: "NotFound" on 0.2.20,
# "not_found" on 0.2.227 (which answers "unavailable" for an actor not registered yet).
ACTOR_NOT_FOUND = frozenset({"NotFound", "not_found"})

# What to install for the pieces below that only the newer line has.
NEWER_IRIS = "marin-iris 0.2.227 (Python >= 3.12)"

# 0.2.227 only: the ANY region (a region EXISTS constraint: run anywhere, do not inherit the
# parent job's region; 0.2.20 allows only EQ and IN on regions), the worker attribute of a
# controller that fronts several clusters, and container profiles by name.
any_region_constraint: Any = getattr(_constraints, "any_region_constraint", None)
CLUSTER_CONSTRAINT_KEY: str | None = getattr(_constraints, "CLUSTER_CONSTRAINT_KEY", None)
_PROFILES: Any = getattr(job_pb2, "ContainerProfile", None)
CONTAINER_PROFILES: dict[str, int] = dict(_PROFILES.items()) if _PROFILES is not None else {}


def newer_module(name: str, what: str) -> ModuleType:
    """Imports the Iris module ``name``, which only the newer line ships.

    Raises:
        BackendUnavailableError: naming ``what`` needed it, the installed marin-iris and the
            release that has it.
    """
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as err:
        if err.name is None or not name.startswith(err.name):
            raise
        raise BackendUnavailableError(
            f"{what} needs {name}, which marin-iris {IRIS_VERSION} does not have: "
            f"install {NEWER_IRIS}"
        ) from err


def gpu_gang_level(variant: str, count: int, replicas: int) -> str:
    """The topology level a gang of ``replicas`` GPU nodes is coscheduled on: 0.2.227 picks
    it by GPU type (NVLink racks for GB200/GB300, the InfiniBand leaf group otherwise);
    0.2.20 knows only the leaf group."""
    name = "iris.cluster.platforms.k8s.coreweave_topology"
    try:
        topology = importlib.import_module(name)
    except ModuleNotFoundError as err:
        if err.name is None or not name.startswith(err.name):
            raise
        return "leafgroup"
    return topology.gpu_gang_coscheduling_level(variant, count, replicas)


def job_info() -> Any:
    """This task's ``JobInfo`` (``job_id``, ``attempt_id``, ``controller_address``,
    ``advertise_host``, both lines), or ``None`` outside an Iris task."""
    from iris.cluster.client.job_info import get_job_info

    return get_job_info()


def job_status(raw: RawIrisClient, wire: JobName) -> job_pb2.JobStatus:
    """The job's full status, as a proto."""
    return raw._cluster_client.get_job_status(wire)


def list_tasks(raw: RawIrisClient, wire: JobName) -> list[job_pb2.TaskStatus]:
    """The job's tasks, as protos."""
    return list(raw._cluster_client.list_tasks(wire))


def task_index(task: job_pb2.TaskStatus) -> int:
    """A task's index in its job (its id is ``<job id>/<index>``)."""
    return int(task.task_id.rstrip("/").rsplit("/", 1)[-1])


def task_states(raw: RawIrisClient, wire: JobName) -> dict[int, int]:
    """The state (``job_pb2.TaskState``) of each of the job's tasks, by task index."""
    return {task_index(task): task.state for task in list_tasks(raw, wire)}


def list_jobs(raw: RawIrisClient, prefix: str) -> list[job_pb2.JobStatus]:
    """Every job whose wire id starts with ``prefix``, as protos."""
    query = controller_pb2.Controller.JobQuery(job_id_prefix=prefix)
    return list(raw._cluster_client.list_jobs(query=query))


def terminate(raw: RawIrisClient, wire: JobName) -> None:
    """Stops the job (and Iris stops its children)."""
    raw._cluster_client.terminate_job(wire)


def fetch_logs(raw: RawIrisClient, wire: JobName, *, max_lines: int = 0, tail: bool = False) -> Any:
    """Log entries of the job and its descendants (``TaskLogEntry``: ``task_id``, ``key``,
    ``timestamp``, ``data``), oldest first; with ``tail``, only the last ``max_lines``."""
    client: Any = raw  # typed against whichever line is installed
    old = getattr(client, "fetch_task_logs", None)
    if old is not None:  # 0.2.20
        return old(wire, max_lines=max_lines, tail=tail)
    return client.job(wire).logs(max_lines=max_lines, tail=tail)


def endpoints_named(raw: RawIrisClient, name: str) -> list[Any]:
    """The endpoints registered under exactly ``name``."""
    cluster = raw._cluster_client
    exact = getattr(cluster, "list_endpoint_instances", None)
    if exact is not None:  # 0.2.227
        return list(exact(name))
    return list(cluster.list_endpoints(name, exact=True))


def endpoints_under(raw: RawIrisClient, prefix: str) -> list[Any]:
    """The endpoints whose names start with ``prefix``."""
    return list(raw._cluster_client.list_endpoints(prefix))


_PROBE_TIMEOUT_MS = 5_000


def probe(raw: RawIrisClient, address: str | None) -> None:
    """Asks the controller one question, without Iris's retries (which last up to 30
    minutes against a controller that is down).

    Raises:
        FrayError: ``cannot reach the Iris controller at ...: <why>``, when the controller
            refuses the connection, its name does not resolve, or it does not answer within
            5 s. Any answer at all, an error included, means it is there.
    """
    request = controller_pb2.Controller.GetJobStateRequest(job_ids=[])
    cluster: Any = raw._cluster_client  # the RemoteClusterClient of a remote client
    try:
        cluster._client.get_job_state(request, timeout_ms=_PROBE_TIMEOUT_MS)
    except ConnectError as err:
        if err.code not in (Code.UNAVAILABLE, Code.DEADLINE_EXCEEDED):
            return
        where = address or cluster._address
        why = unreachable_reason(err)
        raise FrayError(f"cannot reach the Iris controller at {where}: {why}") from err


def never_sent(err: ConnectError) -> bool:
    """Whether an RPC failed before its request left: no connection could be made (refused,
    unresolvable). Any other failure (the connection closed or was reset after the request
    was sent, as when the server's process is killed mid-call; both report UNAVAILABLE) may
    have reached the server."""
    if err.code is not Code.UNAVAILABLE:
        return False
    cause = err.__cause__
    if type(cause) is ConnectionError or isinstance(cause, ConnectionRefusedError):
        return True  # what the HTTP client raises when it cannot connect
    return "tcp connect error" in (err.message or "")


def unreachable_reason(err: ConnectError) -> str:
    """A few words for why a connection failed, from Connect's long error text."""
    text = err.message or ""
    lowered = text.lower()
    if err.code == Code.DEADLINE_EXCEEDED:
        return f"no answer within {_PROBE_TIMEOUT_MS / 1000:g} s"
    if "connection refused" in lowered:
        return "connection refused"
    if "dns error" in lowered or "name or service not known" in lowered:
        return "the host name does not resolve"
    if "connection reset" in lowered:
        return "connection reset"
    if "timed out" in lowered:
        return "connection timed out"
    return text.split("\n", 1)[0][:200] or "unavailable"
