# pyright: standard
"""The supervisor: one Ray task per TPU job that claims slices, runs the gang and retries.

Each attempt: claim the slices (largest allowed count; one host actor per VM, fresh for
the attempt), run the payload in every host actor with that attempt's ``MEGASCALE_*``
values, then watch: results as they come (a lost host actor shows up as its ``run`` call
failing), and every ``health_interval_s`` (at most 1 s) the job's state actor, which holds
the stop flag and the hosts' own preemption reports. The first problem tears the whole gang
down, then the attempt is classified as a preemption or a failure and counted by the job's
state actor, which says whether to go on.

The task is submitted with ``max_retries=-1``: if its node dies, Ray re-runs it, the new run
counts the lost attempt as a preemption and claims slices afresh.
"""

from __future__ import annotations

import contextlib
import time
import traceback
from dataclasses import dataclass, field
from typing import Any

import cloudpickle
import ray

from fray.topology import get_tpu_topology
from fray_tpu._multislice import multislice_env
from fray_tpu.ray._gang import (
    ClaimStopped,
    ClaimTimeout,
    Gang,
    HostOptions,
    HostSetupError,
    claim_gang,
)
from fray_tpu.ray._host import CommandFailedError, ExitCalledError
from fray_tpu.ray._util import rget
from fray_tpu.ray.errors import read_ray_error

__all__ = ["GangSpec", "supervise"]


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
    attempt_timeout_s: float | None = None  # JobRequest.timeout: a deadline per attempt
    health_interval_s: float = 2.0
    megascale_port: int = 8081


_FINISHED = ("failed", "succeeded", "stopped")


@dataclass
class _Outcome:
    kind: str  # ok | preemption | failure | timeout | stopped
    error: str = ""
    cause: BaseException | None = None
    results: list[Any] | None = None
    code: int | None = None  # a command's exit code, or the code the callable exited with


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
    # The state actor may still be starting (it is created with this task): the first claim
    # goes ahead meanwhile, and its answer is read before the claimed gang is used.
    started = state.supervisor_started.remote()
    snapshot: dict[str, Any] = {}  # the state actor's last answer (none yet)
    topology = get_tpu_topology(spec.tpu_type)
    settings = {
        k: spec.env_vars[k]
        for k in ("GCE_METADATA_HOST", "FRAY_TPU_LIBTPU_LOCKFILE")
        if k in spec.env_vars
    }
    resources = {"TPU": float(topology.chips_per_vm)}
    resources.update(spec.resources)
    host = HostOptions(
        settings=settings,
        state=state,
        health_interval_s=spec.health_interval_s,
        num_cpus=spec.num_cpus,
        memory=spec.memory,
        resources=resources,
        runtime_env=dict(spec.runtime_env) or None,
    )

    def should_stop() -> bool:
        if not snapshot and not ray.wait([started], timeout=0)[0]:
            return False  # the state actor is not up yet; asked again on the next look
        return bool(rget(state.stop_is_requested.remote()))

    try:
        while True:
            if snapshot:
                if snapshot["status"] in _FINISHED:
                    return {"status": snapshot["status"]}
                if snapshot["stop_requested"]:
                    break
            deadline = (
                None
                if spec.scheduling_timeout_s is None
                else time.monotonic() + spec.scheduling_timeout_s
            )
            gang: Gang | None = None
            problem: Exception | None = None
            try:
                gang = claim_gang(
                    topology,
                    spec.allowed_slices,
                    deadline=deadline,
                    host=host,
                    should_stop=should_stop,
                )
            except (ClaimStopped, ClaimTimeout, HostSetupError) as err:
                problem = err
            if not snapshot:
                snapshot = rget(started)
                if snapshot["status"] in _FINISHED or snapshot["stop_requested"]:
                    if gang is not None:
                        gang.teardown()
                    continue  # the loop's top says how this run ends
            if isinstance(problem, ClaimStopped):
                break
            if isinstance(problem, HostSetupError):
                # The attempt could not even start: the user's runtime env is broken.
                snapshot = rget(state.begin_attempt.remote(problem.placement))
                if not snapshot["go"]:
                    break
                snapshot = rget(state.end_attempt.remote("failure", str(problem), None))
                continue
            if isinstance(problem, ClaimTimeout):
                waited = spec.scheduling_timeout_s
                rget(
                    state.finish.remote(
                        "failed",
                        f"could not schedule the TPU gang within {waited:g}s: {problem}",
                        "scheduling",
                    )
                )
                return {"status": "failed"}
            assert gang is not None
            outcome: _Outcome | None = None
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
                outcome = _run_attempt(spec, state, gang, topology.vm_count)
            finally:
                gang.teardown()
            assert outcome is not None
            if outcome.kind == "ok":
                rget(state.finish.remote("succeeded"))
                return {"status": "succeeded", "results": outcome.results}
            if outcome.kind == "stopped":
                break
            snapshot = rget(
                state.end_attempt.remote(
                    outcome.kind, outcome.error, _dump(outcome.cause), outcome.code
                )
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


def _run_attempt(spec: GangSpec, state: Any, gang: Gang, vm_count: int) -> _Outcome:
    num_slices = len(gang.slices)
    coordinator_ip = gang.infos[0][0]["ip"]
    total = num_slices * vm_count
    refs = []
    for s_idx, worker, actor, _info in gang.all_hosts():
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
        label = f"{spec.payload_name}-{gang.slices[s_idx]}-w{worker}"
        refs.append(actor.run.remote(spec.payload, env=env, label=label))
    index_of = {ref: i for i, ref in enumerate(refs)}
    results: list[Any] = [None] * len(refs)
    finished: set[int] = set()
    pending = list(refs)
    interval = min(spec.health_interval_s, 1.0)
    next_check = time.monotonic() + interval
    deadline = None if spec.attempt_timeout_s is None else time.monotonic() + spec.attempt_timeout_s
    while pending:
        if deadline is not None and time.monotonic() >= deadline:
            return _Outcome("timeout")  # the state actor words it (JobRecord.on_timeout)
        wake = next_check if deadline is None else min(next_check, deadline)
        wait_s = max(wake - time.monotonic(), 0.01)
        ready, pending = ray.wait(pending, num_returns=1, timeout=wait_s)
        for ref in ready:
            index = index_of[ref]
            finished.add(index)
            try:
                results[index] = rget(ref)
            except Exception as exc:
                return _classify_error(exc, gang, state, index, finished)
        if not pending:
            break
        if time.monotonic() >= next_check:
            watch = rget(state.watch.remote(gang.token))
            if watch["stop_requested"]:
                return _Outcome("stopped")
            if watch["preempted"]:
                return _Outcome("preemption", _preempted_message(watch["preempted"]))
            next_check = time.monotonic() + interval
    return _Outcome("ok", results=results)


def _preempted_message(where: str) -> str:
    return f"{where}: the GCE metadata server says the VM is preempted"


def _preemption_seen(gang: Gang, state: Any, idle: set[int], timeout: float = 10.0) -> str | None:
    """A reason to call the gang preempted, or ``None`` while no host says so.

    Hosts whose ``run`` has ended (``idle`` indices) are asked directly (an actor that is
    gone counts); the others are busy running the user's code and speak through the
    reports their watcher threads sent to the state actor, read last.
    """
    hosts = gang.all_hosts()
    asked = [(i, hosts[i][2].health.remote()) for i in sorted(idle)]
    ready, _ = ray.wait([ref for _i, ref in asked], num_returns=len(asked), timeout=timeout)
    done = set(ready)
    for i, ref in asked:
        if ref not in done:
            continue  # slow to answer is not proof of loss
        s_idx, worker, _actor, _info = hosts[i]
        where = f"host {gang.slices[s_idx]}/{worker}"
        try:
            answer = rget(ref)
        except Exception as exc:
            return f"{where} is gone ({type(exc).__name__})"
        if answer.get("preempted"):
            return _preempted_message(where)
    with contextlib.suppress(Exception):
        reported = rget(state.watch.remote(gang.token), timeout=timeout)["preempted"]
        if reported:
            return _preempted_message(reported)
    return None


def _classify_error(
    exc: BaseException, gang: Gang, state: Any, index: int, idle: set[int]
) -> _Outcome:
    """How Ray reads the error (:mod:`fray_tpu.ray.errors`), and then: a failure on a VM
    that is being preempted is a preemption. A failure of the user's code (a user
    TimeoutError included) on a healthy gang stays a failure."""
    s_idx, worker, _a, _i = gang.all_hosts()[index]
    reading = read_ray_error(exc)
    error = f"host {gang.slices[s_idx]}/{worker}: {reading.error}"
    if reading.kind == "preemption":
        return _Outcome("preemption", error, reading.cause)
    problem = _preemption_seen(gang, state, idle)
    if problem is not None:
        return _Outcome("preemption", f"{error} ({problem})", reading.cause)
    cause = reading.cause
    code = cause.code if isinstance(cause, CommandFailedError | ExitCalledError) else None
    return _Outcome("failure", error, cause, code=code if isinstance(code, int) else None)
