"""Load on LocalClient: 1,000 jobs and 10,000 actor calls from 16 threads at once; every result
arrives exactly once, none lost, none duplicated, none crossed."""

from __future__ import annotations

import collections
import subprocess
import sys
import textwrap
import threading
from concurrent.futures import Future
from typing import Any

import psutil
import pytest

from fray import ActorConfig, Entrypoint, JobRequest, JobStatus, LocalClient, wait_all

pytestmark = pytest.mark.integration

THREADS = 16
DEADLINE_S = 120.0


class Ledger:
    """Counts how many times each token ran."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.runs: collections.Counter[int] = collections.Counter()

    def record(self, token: int) -> int:
        with self.lock:
            self.runs[token] += 1
        return token


def in_threads(work: Any, count: int = THREADS) -> None:
    """Runs ``work(i)`` in ``count`` threads released together; re-raises the first error."""
    barrier = threading.Barrier(count)
    errors: list[BaseException] = []

    def body(i: int) -> None:
        try:
            barrier.wait(timeout=DEADLINE_S)
            work(i)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=body, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=DEADLINE_S)
    assert not any(t.is_alive() for t in threads), "a submitting thread hung"
    if errors:
        raise errors[0]


def test_1000_jobs_from_16_threads(client: LocalClient) -> None:
    total = 1_000
    ledger = Ledger()
    handles: dict[int, Any] = {}
    commands: dict[int, Any] = {}
    lock = threading.Lock()

    def submit_share(worker: int) -> None:
        for token in range(worker, total, THREADS):
            entry = Entrypoint.from_callable(ledger.record, [token])
            handle = client.submit(JobRequest(name=f"load-{token}", entrypoint=entry))
            with lock:
                handles[token] = handle
        # One real process per thread too, so the process path is under the same load.
        entry = Entrypoint.from_command("echo", f"command-{worker}")
        handle = client.submit(JobRequest(name=f"cmd-{worker}", entrypoint=entry))
        with lock:
            commands[worker] = handle

    in_threads(submit_share)
    assert sorted(handles) == list(range(total))
    jobs = [handles[t] for t in range(total)] + [commands[w] for w in range(THREADS)]
    assert wait_all(jobs, timeout=DEADLINE_S) == [JobStatus.SUCCEEDED] * len(jobs)
    # Every job ran exactly once and returned its own token.
    assert [handles[t].result(timeout=0) for t in range(total)] == list(range(total))
    assert ledger.runs == collections.Counter(range(total))
    for worker, job in commands.items():
        assert list(job.logs()) == [f"command-{worker}"]
    ids = [job.job_id for job in jobs]
    assert len(set(ids)) == len(ids)
    listed = client.list_jobs()
    assert sorted(info.job_id for info in listed) == sorted(ids)
    assert all(info.attempts == 1 and info.failures == 0 for info in listed)
    assert psutil.Process().children(recursive=True) == []


class Journal:
    """An actor that writes down every call it gets."""

    def __init__(self) -> None:
        self.seen: list[tuple[int, int]] = []
        self.lock = threading.Lock()

    def note(self, caller: int, seq: int) -> tuple[int, int]:
        with self.lock:  # needed only when max_concurrency > 1
            self.seen.append((caller, seq))
        return (caller, seq)

    def entries(self) -> list[tuple[int, int]]:
        with self.lock:
            return list(self.seen)


@pytest.mark.parametrize("concurrency", [1, 4])
def test_10000_actor_calls_from_16_threads(client: LocalClient, concurrency: int) -> None:
    total = 10_000
    per_caller = total // THREADS
    actor = client.create_actor(
        Journal, name=f"journal{concurrency}", actor_config=ActorConfig(max_concurrency=concurrency)
    )
    results: dict[int, list[tuple[int, int]]] = {}

    def caller(i: int) -> None:
        mine: list[tuple[int, int]] = []
        futures: list[Future[Any]] = []
        for seq in range(per_caller):
            if seq % 3 == 0:  # blocking calls interleaved with futures
                mine.extend(f.result(timeout=DEADLINE_S) for f in futures)
                futures.clear()
                mine.append(actor.note(i, seq))
            else:
                futures.append(actor.note.remote(i, seq))
        mine.extend(f.result(timeout=DEADLINE_S) for f in futures)
        results[i] = mine

    in_threads(caller)
    expected = [(i, seq) for i in range(THREADS) for seq in range(per_caller)]
    # Each caller got its own answers, in its own order, once each.
    for i in range(THREADS):
        assert results[i] == [(i, seq) for seq in range(per_caller)]
    seen = actor.entries()
    assert sorted(seen) == expected  # every call ran exactly once
    if concurrency == 1:
        # Calls run one at a time in arrival order: each caller's calls ran in its order.
        for i in range(THREADS):
            assert [seq for c, seq in seen if c == i] == list(range(per_caller))


def test_models_first_used_from_16_threads_at_once() -> None:
    """The request models build their validators on first use: 16 threads racing to be the
    first must all get correct objects and correct errors."""
    code = textwrap.dedent(
        """
        import threading
        from fray import (Entrypoint, EnvironmentConfig, InvalidRequestError, JobRequest,
                          ResourceConfig)

        barrier = threading.Barrier(16)
        failures = []

        def work(i):
            barrier.wait()
            try:
                request = JobRequest(
                    name=f"job{i}",
                    entrypoint=Entrypoint.from_callable(print, [i]),
                    resources=ResourceConfig.with_tpu("v4-16", slice_count=2),
                    environment=EnvironmentConfig(env_vars={"N": str(i)}),
                )
                assert request.replica_count == 4 and request.env_vars["N"] == str(i)
                try:
                    ResourceConfig(ram="lots")
                except InvalidRequestError as err:
                    assert err.field == "ResourceConfig.ram", err.field
                else:
                    raise AssertionError("ram='lots' was accepted")
            except BaseException as exc:
                failures.append(repr(exc))

        threads = [threading.Thread(target=work, args=(i,)) for i in range(16)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        print(failures)
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=DEADLINE_S
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
