"""What LocalClient reads from the environment when it is made: how many finished jobs it
keeps (``FRAY_JOB_HISTORY``; the history on its own, and list_jobs/get_job with a small
limit) and the grace period of a terminate (``FRAY_TERMINATE_GRACE_S``)."""

from __future__ import annotations

import gc
import os
import threading
import weakref
from typing import Any

import pytest

from fray import (
    Entrypoint,
    InvalidRequestError,
    JobNotFoundError,
    JobRequest,
    JobStatus,
    LocalClient,
)
from fray.backend._client import DEFAULT_JOB_HISTORY, job_history_limit
from fray.environment_variables import FRAY_JOB_HISTORY


class Payload:
    """A return value the test can watch being freed."""


def make_payload() -> Payload:
    return Payload()


def hold(started: threading.Event, gate: threading.Event) -> None:
    started.set()
    gate.wait(60)


def req(fn: Any, *args: Any, name: str = "hist") -> JobRequest:
    return JobRequest(name=name, entrypoint=Entrypoint.from_callable(fn, args))


def test_limit_defaults_and_reads_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(FRAY_JOB_HISTORY, raising=False)
    assert job_history_limit() == DEFAULT_JOB_HISTORY == 10_000
    monkeypatch.setenv(FRAY_JOB_HISTORY, " 25 ")
    assert job_history_limit() == 25
    monkeypatch.setenv(FRAY_JOB_HISTORY, "0")
    assert job_history_limit() == 0
    monkeypatch.setenv(FRAY_JOB_HISTORY, "")
    assert job_history_limit() == DEFAULT_JOB_HISTORY


@pytest.mark.parametrize("text", ["-1", "ten", "1.5", "1e3"])
def test_a_bad_limit_names_the_variable(monkeypatch: pytest.MonkeyPatch, text: str) -> None:
    monkeypatch.setenv(FRAY_JOB_HISTORY, text)
    with pytest.raises(InvalidRequestError, match=f"{FRAY_JOB_HISTORY}.*whole number >= 0"):
        job_history_limit()
    with pytest.raises(InvalidRequestError, match=FRAY_JOB_HISTORY):
        LocalClient()


@pytest.mark.parametrize("grace", ["soon", "-1", "nan", "inf"])
def test_a_bad_grace_period_is_refused_when_the_client_is_made(
    monkeypatch: pytest.MonkeyPatch, grace: str
) -> None:
    monkeypatch.setenv("FRAY_TERMINATE_GRACE_S", grace)
    with pytest.raises(InvalidRequestError, match="FRAY_TERMINATE_GRACE_S.*seconds >= 0"):
        LocalClient()


def test_local_client_keeps_unfinished_jobs_and_the_last_finished(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(FRAY_JOB_HISTORY, "2")
    started, gate = threading.Event(), threading.Event()
    with LocalClient(echo_logs=False) as client:
        held = client.submit(req(hold, started, gate, name="held"))
        assert started.wait(30)  # RUNNING from here on
        first = client.submit(req(make_payload, name="first"))
        assert isinstance(first.result(timeout=30), Payload)
        # One after the other: the history keeps the last to *finish*.
        rest: list[Any] = []
        for i in range(3):
            rest.append(client.submit(req(make_payload, name=f"later{i}")))
            assert rest[-1].wait(timeout=30) is JobStatus.SUCCEEDED

        # The job that still runs stays; of four finished jobs, the last two.
        listed = [info.job_id for info in client.list_jobs()]
        assert listed == [held.job_id, rest[1].job_id, rest[2].job_id]
        assert client.get_job(held.job_id).status() is JobStatus.RUNNING
        with pytest.raises(JobNotFoundError, match=FRAY_JOB_HISTORY) as caught:
            client.get_job(first.job_id)
        assert caught.value.job_id == first.job_id
        # A handle keeps its own job.
        assert first.status() is JobStatus.SUCCEEDED
        assert isinstance(first.result(), Payload)

        # Once the handle is gone too, nothing keeps the dropped job's value: it is freed as
        # soon as the thread that ran the job has let go of it (it may still be finishing).
        freed = threading.Event()
        weakref.finalize(first.result(), freed.set)
        del first
        gc.collect()
        assert freed.wait(30)
        # A job the history still holds keeps its value without a handle.
        kept = weakref.ref(rest[2].result())
        rest_ids = [job.job_id for job in rest]
        del rest
        gc.collect()
        assert kept() is not None
        assert client.get_job(rest_ids[2]).result() is kept()

        gate.set()
        assert held.wait(timeout=30) is JobStatus.SUCCEEDED
        listed = [info.job_id for info in client.list_jobs()]
        assert listed == [held.job_id, rest_ids[2]]  # in submission order


def test_an_idle_job_thread_does_not_keep_its_last_job(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(FRAY_JOB_HISTORY, "0")
    with LocalClient(echo_logs=False) as client:
        job = client.submit(req(make_payload))
        freed = threading.Event()
        weakref.finalize(job.result(timeout=30), freed.set)
        del job
        gc.collect()
        # No later job takes the thread that ran it: it must have let go all the same.
        assert freed.wait(10)


def chatty(count: int) -> None:
    for index in range(count):
        print(f"line {index}\r ok")  # a carriage return inside a line stays inside it


def test_a_finished_job_keeps_its_last_lines_in_memory_and_every_line_for_logs() -> None:
    from fray.backend import LogBuffer

    keep = LogBuffer.KEEP_LINES
    with LocalClient(echo_logs=False) as client:
        handle = client.submit(req(chatty, keep * 2 + 500))
        handle.wait(timeout=60)
        buffer = handle._job.log  # pyright: ignore[reportPrivateUsage]
        assert len(buffer._lines) == keep  # pyright: ignore[reportPrivateUsage]
        assert len(buffer) == keep * 2 + 500
        lines = handle.logs()
        assert lines == tuple(f"line {i}\r ok" for i in range(keep * 2 + 500))
        assert handle.logs(max_lines=2) == lines[-2:]
        spilled = buffer._older[0]  # pyright: ignore[reportPrivateUsage]
        assert os.stat(spilled).st_mode & 0o077 == 0  # only its user may read it
    del handle, buffer
    client_jobs = client._jobs  # pyright: ignore[reportPrivateUsage]
    client_jobs.clear()
    gc.collect()
    assert not os.path.exists(spilled)  # removed with the buffer
