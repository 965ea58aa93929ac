"""The dashboard's seeded scenario (shared by its API and browser tests): what real local runs
cannot produce (preemptions, a dead actor, a failed TPU slice) held by a fake source, beside a
fake source of 10,000 jobs; and the checks that the seed says what the tests rely on."""

from __future__ import annotations

import time
from typing import Any

from fray import JobInfo, JobStatus
from fray._types import AttemptInfo
from fray.dashboard import (
    GangAttemptView,
    GangView,
    GroupView,
    HostState,
    HostView,
    MemberState,
    MemberView,
    MemorySource,
    SliceView,
)

NOW = time.time()
FAILED_ERROR = "RuntimeError: checkpoint shard 3 missing at gs://bucket/ckpt/step-1200"
PENDING_REASON = "no v5litepod-256 slice free in us-central2 (need 1, 0 available)"
IDS = {
    "succeeded": "train-ok-00000001",
    "failed": "eval-crash-00000002",
    "running": "serve-live-00000003",
    "pending": "big-tpu-wait-00000004",
    "preempted": "pretrain-v4-00000005",
    "flaky": "tokenize-flaky-00000006",
    "stopped": "sweep-cancelled-00000007",
    "parent": "rl-controller-00000008",
    "gang": "multislice-v4-32-00000009",
}


def _attempt(
    n: int,
    outcome: Any,
    start: float,
    end: float,
    error: str | None = None,
    exit_code: int | None = None,
) -> AttemptInfo:
    return AttemptInfo(
        attempt=n,
        outcome=outcome,
        started_at=NOW - start,
        finished_at=NOW - end,
        error=error,
        exit_code=exit_code,
    )


def _job(key: str, status: JobStatus, age: float, **kw: object) -> JobInfo:
    job_id = IDS.get(key, key)
    name = job_id.rsplit("-", 1)[0].rsplit("/", 1)[-1]
    fields: dict[str, object] = {"submitted_at": NOW - age, "started_at": NOW - age + 2}
    if status.is_finished:
        fields["finished_at"] = NOW - age + 600
    if status is JobStatus.PENDING:
        fields["started_at"] = None
    return JobInfo(job_id=job_id, name=name, status=status, **{**fields, **kw})  # pyright: ignore[reportArgumentType]


def scenario_jobs() -> list[JobInfo]:
    """The jobs: one of each kind the issue names, and a parent with three children."""
    parent = IDS["parent"]
    kids = [
        f"{parent}/trainer-0000000a",
        f"{parent}/rollout-0000000b",
        f"{parent}/rollout-0000000c",
    ]
    return [
        _job("succeeded", JobStatus.SUCCEEDED, 86400, attempts=1, exit_code=0,
             attempt_history=(_attempt(1, "succeeded", 86398, 85800, exit_code=0),)),
        _job("failed", JobStatus.FAILED, 7200, attempts=1, failures=1, exit_code=1,
             error=f"{FAILED_ERROR}\nTraceback (most recent call last): ...",
             attempt_history=(_attempt(1, "failed", 7198, 6600, exit_code=1, error=FAILED_ERROR),)),
        _job("running", JobStatus.RUNNING, 900, attempts=1, replicas=4),
        _job("pending", JobStatus.PENDING, 300, pending_reason=PENDING_REASON),
        _job("preempted", JobStatus.SUCCEEDED, 40000, attempts=4, preemptions=3, replicas=8,
             exit_code=0, attempt_history=tuple(
                 [_attempt(n, "preempted", 40000 - 3000 * n, 39000 - 3000 * n,
                           error="TPU slice preempted (GCE maintenance event)") for n in (1, 2, 3)]
                 + [_attempt(4, "succeeded", 29000, 20000, exit_code=0)])),
        _job("flaky", JobStatus.SUCCEEDED, 20000, attempts=2, failures=1, exit_code=0,
             attempt_history=(
                 _attempt(1, "failed", 19998, 19900, exit_code=2,
                          error="OSError: [Errno 5] Input/output error: '/mnt/shard-17'"),
                 _attempt(2, "succeeded", 19890, 19400, exit_code=0))),
        _job("stopped", JobStatus.STOPPED, 5000, attempts=1, error="stopped by terminate()",
             attempt_history=(_attempt(1, "stopped", 4998, 4400),)),
        _job("parent", JobStatus.RUNNING, 3600, attempts=1, children=tuple(kids)),
        _job(kids[0], JobStatus.RUNNING, 3500, attempts=1, parent=parent),
        _job(kids[1], JobStatus.SUCCEEDED, 3400, attempts=1, parent=parent, exit_code=0),
        _job(kids[2], JobStatus.RUNNING, 3300, attempts=1, parent=parent),
        _job("gang", JobStatus.FAILED, 10000, attempts=2, failures=1, preemptions=1, replicas=8,
             exit_code=1, error="slice 1 host 2: jax.errors.JaxRuntimeError: DEADLINE_EXCEEDED",
             attempt_history=(
                 _attempt(1, "preempted", 9998, 9000, error="slice 0 preempted"),
                 _attempt(2, "failed", 8990, 8000, exit_code=1,
                          error="slice 1 host 2: jax.errors.JaxRuntimeError: DEADLINE_EXCEEDED"))),
    ]  # fmt: skip


def scenario_group() -> GroupView:
    """A 4-member actor group, hosted by the parent job, with one dead member."""
    states = [MemberState.READY, MemberState.READY, MemberState.DEAD, MemberState.READY]
    members = [
        MemberView(
            f"rollout-workers-{i}",
            state,
            restarts=2 if state is MemberState.DEAD else 0,
            error="ActorDiedError: node 10.0.3.7 lost" if state is MemberState.DEAD else None,
        )
        for i, state in enumerate(states)
    ]
    return GroupView("rollout-workers", tuple(members), IDS["parent"])


def scenario_gang() -> GangView:
    """A 2-slice v4-32 gang (4 hosts a slice) in which slice 1 failed first (host 2)."""
    failed_at = NOW - 8000

    def host(slice_: int, worker: int) -> HostView:
        if (slice_, worker) == (1, 2):
            error = "jax.errors.JaxRuntimeError: DEADLINE_EXCEEDED"
            return HostView(worker, HostState.FAILED, failed_at, error)
        if slice_ == 0 and worker == 0:  # torn down after slice 1's failure
            return HostView(worker, HostState.FAILED, failed_at + 4, "gang torn down")
        return HostView(worker, HostState.STOPPED)

    slices = [
        SliceView(i, f"tpu-v4-32-{name}", tuple(host(i, w) for w in range(4)))
        for i, name in enumerate(("a1", "b7"))
    ]
    attempts = [
        GangAttemptView(
            n,
            outcome,
            {
                "MEGASCALE_COORDINATOR_ADDRESS": f"10.0.0.{10 + n}",
                "MEGASCALE_NUM_SLICES": "2",
                "MEGASCALE_PORT": "8081",
            },
        )
        for n, outcome in ((1, "preempted"), (2, "failed"))
    ]
    return GangView(IDS["gang"], "v4-32", tuple(slices), tuple(attempts))


def scenario_logs() -> dict[str, list[str]]:
    """Some output per job: replica prefixes on the multi-replica ones."""
    logs = {job_id: [f"starting {job_id}", "step 100 loss 2.31"] for job_id in IDS.values()}
    logs[IDS["failed"]] += [FAILED_ERROR]
    logs[IDS["gang"]] = [f"[{r}] host {r} up" for r in range(8)] + [
        "[6] jax.errors.JaxRuntimeError: DEADLINE_EXCEEDED",
        "[0] gang torn down",
    ]
    logs[IDS["running"]] = [f"[{r % 4}] step {r} loss {3 - r / 100:.2f}" for r in range(40)]
    return logs


def scenario_source(name: str = "seeded") -> MemorySource:
    """The seeded scenario as one source."""
    return MemorySource(
        name,
        scenario_jobs(),
        logs=scenario_logs(),
        groups=[scenario_group()],
        gangs=[scenario_gang()],
    )


def big_source(count: int = 10_000, name: str = "big") -> MemorySource:
    """A source of ``count`` finished jobs (every tenth failed, with a long error)."""
    jobs = [
        JobInfo(
            job_id=f"job-{i:05d}-{i:08x}",
            name=f"job-{i:05d}",
            status=JobStatus.FAILED if i % 10 == 0 else JobStatus.SUCCEEDED,
            attempts=2 if i % 10 == 0 else 1,
            failures=1 if i % 10 == 0 else 0,
            error="RuntimeError: " + "x" * 1000 if i % 10 == 0 else None,
            submitted_at=NOW - 10_000 + i,
            started_at=NOW - 10_000 + i + 1,
            finished_at=NOW - 10_000 + i + 5,
        )
        for i in range(count)
    ]
    return MemorySource(name, jobs)


def test_the_seed_holds_what_the_tests_rely_on() -> None:
    jobs = {info.job_id: info for info in scenario_jobs()}
    assert jobs[IDS["preempted"]].preemptions == 3
    assert jobs[IDS["flaky"]].failures == 1
    assert sum(1 for info in jobs.values() if info.parent == IDS["parent"]) == 3
    group = scenario_group()
    assert len(group.members) == 4
    assert [m.state for m in group.members].count(MemberState.DEAD) == 1
    first = scenario_gang().first_failed_slice
    assert first is not None and first.index == 1
