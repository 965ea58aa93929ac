# pyright: standard
"""The supervisor: one Ray task per TPU job that claims slices, runs the gang and retries.

Each attempt: claim the slices (largest allowed count), launch the payload on every host
with that attempt's ``MEGASCALE_*`` values, then watch: results as they come, the hosts'
health (alive, metadata server not saying preempted) every ``health_interval_s`` and the
stop flag. The first problem tears the whole gang down, then the attempt is classified as a
preemption or a failure and counted by the job's state actor, which says whether to go on.

The task is submitted with ``max_retries=-1``: if its node dies, Ray re-runs it, the new run
counts the lost attempt as a preemption and claims slices afresh.
"""

from __future__ import annotations

import time
import traceback
from dataclasses import dataclass, field
from typing import Any

import cloudpickle
import ray
from ray import exceptions as rx

from fray._tpu import get_tpu_topology
from fray_tpu._multislice import multislice_env
from fray_tpu.ray._gang import ClaimStopped, ClaimTimeout, Gang, claim_gang
from fray_tpu.ray._util import rget

__all__ = ["GangSpec", "supervise"]

# Ray errors that mean a member of the gang (or what owned it) was lost, not that the
# user's code failed.
_PREEMPTION_ERRORS: tuple[type[BaseException], ...] = tuple(
    t
    for t in (
        getattr(rx, "NodeDiedError", None),
        getattr(rx, "OwnerDiedError", None),
        getattr(rx, "ObjectLostError", None),
        getattr(rx, "WorkerCrashedError", None),
        getattr(rx, "RayActorError", None),  # ActorDiedError, ActorUnavailableError
        getattr(rx, "TaskUnschedulableError", None),
        getattr(rx, "ActorUnschedulableError", None),
        getattr(rx, "LocalRayletDiedError", None),
        getattr(rx, "TaskCancelledError", None),  # not cancelled by us: something killed it
    )
    if isinstance(t, type)
)


@dataclass(frozen=True)
class GangSpec:
    """Everything the supervisor needs, picklable."""

    job_id: str
    tpu_type: str
    allowed_slices: tuple[int, ...]
    payload: bytes  # a cloudpickled HostPayload
    payload_name: str
    env_vars: dict[str, str]
    runtime_env: dict[str, Any] = field(default_factory=dict)
    num_cpus: float = 1.0
    memory: int | None = None
    resources: dict[str, float] = field(default_factory=dict)
    scheduling_timeout_s: float | None = 600.0
    health_interval_s: float = 2.0
    megascale_port: int = 8081


@dataclass
class _Outcome:
    kind: str  # ok | preemption | failure | stopped
    error: str = ""
    cause: BaseException | None = None
    results: list[Any] | None = None


def _dump(exc: BaseException | None) -> bytes | None:
    if exc is None:
        return None
    try:
        return cloudpickle.dumps(exc)
    except Exception:
        try:
            return cloudpickle.dumps(RuntimeError(f"{type(exc).__name__}: {exc}"))
        except Exception:
            return None


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def supervise(spec: GangSpec, state: Any) -> dict[str, Any]:
    """Runs the job to its end; returns ``{"status", "results"}`` (results on success)."""
    snapshot = rget(state.supervisor_started.remote())
    topology = get_tpu_topology(spec.tpu_type)
    settings = {
        k: spec.env_vars[k]
        for k in ("GCE_METADATA_HOST", "FRAY_TPU_LIBTPU_LOCKFILE")
        if k in spec.env_vars
    }

    def should_stop() -> bool:
        return bool(rget(state.stop_is_requested.remote()))

    try:
        while True:
            if snapshot["status"] in ("failed", "succeeded", "stopped"):
                return {"status": snapshot["status"]}
            if snapshot["stop_requested"]:
                break
            deadline = (
                None
                if spec.scheduling_timeout_s is None
                else time.monotonic() + spec.scheduling_timeout_s
            )
            try:
                gang = claim_gang(
                    topology,
                    spec.allowed_slices,
                    deadline=deadline,
                    settings=settings,
                    should_stop=should_stop,
                )
            except ClaimStopped:
                break
            except ClaimTimeout as err:
                waited = spec.scheduling_timeout_s
                rget(
                    state.finish.remote(
                        "failed",
                        f"could not schedule the TPU gang within {waited:g}s: {err}",
                        "scheduling",
                    )
                )
                return {"status": "failed"}
            try:
                placement = [
                    {"slice": s, "worker": w, "node_id": info["node_id"], "ip": info["ip"]}
                    for s_idx, row in enumerate(gang.infos)
                    for w, info in enumerate(row)
                    for s in [gang.slices[s_idx]]
                ]
                snapshot = rget(state.begin_attempt.remote(placement))
                if not snapshot["go"]:
                    break
                outcome = _run_attempt(spec, state, gang, topology.vm_count, should_stop)
            finally:
                gang.teardown()
            if outcome.kind == "ok":
                rget(state.finish.remote("succeeded"))
                return {"status": "succeeded", "results": outcome.results}
            if outcome.kind == "stopped":
                break
            snapshot = rget(
                state.end_attempt.remote(outcome.kind, outcome.error, _dump(outcome.cause))
            )
    except Exception as exc:
        # A bug here must not leave the job hanging.
        error = f"internal error in the TPU supervisor: {_describe(exc)}\n" + "".join(
            traceback.format_exception(exc)
        )
        rget(state.finish.remote("failed", error, "internal"))
        return {"status": "failed"}
    rget(state.finish.remote("stopped"))
    return {"status": "stopped"}


def _run_attempt(
    spec: GangSpec, state: Any, gang: Gang, vm_count: int, should_stop: Any
) -> _Outcome:
    num_slices = len(gang.slices)
    coordinator_ip = gang.infos[0][0]["ip"]
    total = num_slices * vm_count
    launches = []
    hosts = gang.all_hosts()
    for s_idx, worker, actor, _info in hosts:
        index = s_idx * vm_count + worker
        env = dict(spec.env_vars)
        env.update(multislice_env(coordinator_ip, num_slices, s_idx, spec.megascale_port))
        env.update(
            {
                "FRAY_JOB_ID": spec.job_id,
                "FRAY_TASK_INDEX": str(index),
                "FRAY_NUM_TASKS": str(total),
            }
        )
        resources = {"TPU": float(get_tpu_topology(spec.tpu_type).chips_per_vm)}
        resources.update(spec.resources)
        launches.append(
            actor.launch.remote(
                spec.payload,
                state,
                env=env,
                runtime_env=spec.runtime_env,
                num_cpus=spec.num_cpus,
                memory=spec.memory,
                resources=resources,
                label=f"{spec.payload_name}-{gang.slices[s_idx]}-w{worker}",
            )
        )
    try:
        refs = [wrapped[0] for wrapped in rget(launches, timeout=120)]
    except Exception as exc:
        return _classify_error(exc, gang, None)
    index_of = {ref: i for i, ref in enumerate(refs)}
    results: list[Any] = [None] * len(refs)
    pending = list(refs)
    next_health = time.monotonic() + spec.health_interval_s
    while pending:
        wait_s = max(min(next_health - time.monotonic(), 1.0), 0.05)
        ready, pending = ray.wait(pending, num_returns=1, timeout=wait_s)
        for ref in ready:
            try:
                results[index_of[ref]] = rget(ref)
            except Exception as exc:
                return _classify_error(exc, gang, index_of[ref])
        if not pending:
            break
        if should_stop():
            return _Outcome("stopped")
        if time.monotonic() >= next_health:
            problem = _health_problem(gang)
            if problem is not None:
                return _Outcome("preemption", problem)
            next_health = time.monotonic() + spec.health_interval_s
    return _Outcome("ok", results=results)


def _health_problem(gang: Gang, timeout: float = 10.0) -> str | None:
    """A reason to call the gang preempted, or ``None`` while every host looks fine."""
    hosts = gang.all_hosts()
    refs = [actor.health.remote() for _s, _w, actor, _i in hosts]
    ready, _ = ray.wait(refs, num_returns=len(refs), timeout=timeout)
    done = set(ready)
    for ref, (s_idx, worker, _actor, _info) in zip(refs, hosts, strict=True):
        if ref not in done:
            continue  # slow to answer is not proof of loss; look again next round
        where = f"host {gang.slices[s_idx]}/{worker}"
        try:
            answer = rget(ref)
        except Exception as exc:
            return f"{where} is gone ({type(exc).__name__})"
        if answer.get("preempted"):
            return f"{where}: the GCE metadata server says the VM is preempted"
    return None


def _classify_error(exc: BaseException, gang: Gang, index: int | None) -> _Outcome:
    """Preemption when a member was lost or its VM is being preempted; failure when the
    user's code raised (a user TimeoutError included) on a healthy gang."""
    if isinstance(exc, rx.RayTaskError):
        cause = exc.cause if isinstance(exc.cause, BaseException) else None
        user = cause if cause is not None else exc
        error = _describe(user)
        if isinstance(cause, _PREEMPTION_ERRORS):
            return _Outcome("preemption", error, cause)
        where = ""
        if index is not None:
            s_idx, worker, _a, _i = gang.all_hosts()[index]
            where = f"host {gang.slices[s_idx]}/{worker}: "
        problem = _health_problem(gang)
        if problem is not None:
            return _Outcome("preemption", f"{where}{error} ({problem})", cause)
        return _Outcome("failure", f"{where}{error}", cause if cause is not None else None)
    if isinstance(exc, rx.RuntimeEnvSetupError):
        return _Outcome("failure", f"runtime environment setup failed: {exc}", None)
    if isinstance(exc, _PREEMPTION_ERRORS):
        return _Outcome("preemption", _describe(exc), None)
    return _Outcome("failure", _describe(exc), exc)
