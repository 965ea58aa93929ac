"""Marin's ``StepRunner`` (``marin.execution.step_runner``, marin-core 0.2.227) on Fray's local,
Ray and Iris backends, unchanged: the step runner behind every Marin experiment.

Run by ``nox -s compat-3.12``, which installs marin-core 0.2.227 beside fray-core with its
pinned ``marin-fray`` left out; sessions without marin-core skip this module. A graph of three
steps takes each of the runner's three ways to run a step:

* ``numbers``: a plain callable, run in the runner's own thread pool and followed through
  ``LocalJobHandle(job_id, future)`` over that pool's future;
* ``squares``: a step with ``resources`` that size its disk (``disk="1g"``, as Marin's steps
  do), submitted as a Fray job (``JobRequest`` with ``create_environment(...)``, whose
  workspace is the current directory) and waited on with ``wait(raise_on_failure=True)``;
* ``total``: a ``marin.execution.remote`` callable (``RemoteCallable``) with ``env_vars``,
  submitted as a Fray job with them.

Each step reads its dependency's output, so the order is checked by the values; each records
where it ran, and the runner saves what it returns next to its output. On Ray the disk is
not reserved (no node advertises it) and the client says so once; the workspace is the
driver's own directory, so no task asks Ray to ship it.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import sys
import threading
from collections.abc import Iterator
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import pytest

try:
    MARIN_CORE = version("marin-core")
except PackageNotFoundError:
    pytest.skip(
        "needs marin-core 0.2.227 (installed by `nox -s compat-3.12`)", allow_module_level=True
    )

# Imported for real once marin-core is there: an import that fails is a failure, not a skip.
import cloudpickle
from marin.execution.artifact import read_record
from marin.execution.remote import RemoteCallable, remote
from marin.execution.step_runner import StepRunner
from marin.execution.step_spec import StepSpec
from marin.execution.step_status import STATUS_FAILED, STATUS_SUCCESS, StatusFile

import fray
from fray.backend import client_from_spec
from fray.current_client import set_current_client
from fray.local_backend import LocalClient
from fray.types import JobStatus, ResourceConfig

# The fixtures (examples/tests/conftest.py): `backend` is each backend in turn.
Backend = Any

pytestmark = [pytest.mark.integration, pytest.mark.slow]

N = 12
STEP_VAR = "MARIN_COMPAT_STEP"
# What create_environment() adds to every Marin job's env_vars. A driver that has the same
# values keeps a local job in a thread of its own process (a job whose variables differ runs
# in a process of its own, to set them): as a Marin driver that exports them.
MARIN_JOB_DEFAULTS = {"HF_DATASETS_TRUST_REMOTE_CODE": "1", "TOKENIZERS_PARALLELISM": "false"}


def where() -> dict[str, Any]:
    return {
        "pid": os.getpid(),
        "thread": threading.current_thread().name,
        "job": fray.current_job_id(),
    }


def _read(path: str, name: str) -> Any:
    with open(os.path.join(path, name)) as f:
        return json.load(f)


def _write(path: str, name: str, value: Any) -> None:
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, name), "w") as f:
        json.dump(value, f)


def make_numbers(output_path: str) -> dict[str, Any]:
    _write(output_path, "numbers.json", list(range(N)))
    return where()


def make_squares(numbers_path: str, output_path: str) -> dict[str, Any]:
    _write(output_path, "squares.json", [n * n for n in _read(numbers_path, "numbers.json")])
    return where()


def make_total(squares_path: str, output_path: str) -> dict[str, Any]:
    _write(output_path, "total.json", sum(_read(squares_path, "squares.json")))
    return {**where(), "env": os.environ.get(STEP_VAR)}


def fail(output_path: str) -> None:
    raise ValueError(f"no input for {os.path.basename(output_path)}")


class Squares:
    """``squares``'s callable: the output path of ``numbers`` is known once it is built."""

    def __init__(self, numbers: StepSpec) -> None:
        self.numbers_path = numbers.output_path

    def __call__(self, output_path: str) -> dict[str, Any]:
        return make_squares(self.numbers_path, output_path)


class Total:
    def __init__(self, squares: StepSpec) -> None:
        self.squares_path = squares.output_path

    def __call__(self, output_path: str) -> dict[str, Any]:
        return make_total(self.squares_path, output_path)


@pytest.fixture
def client(backend: Backend, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """A client of ``backend`` set as the current one (the runner captures it for its
    threads), as a Marin driver gets it."""
    for name, value in MARIN_JOB_DEFAULTS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv(STEP_VAR, raising=False)
    # A job in a process of its own unpickles its callable there, where this module is not
    # importable: ship it by value.
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    if backend.name == "local":
        made: Any = LocalClient()
    elif backend.name == "ray":
        from fray_ray import RayClient

        monkeypatch.setenv("RAY_ADDRESS", backend.env["RAY_ADDRESS"])
        made = RayClient(namespace=f"steps-{secrets.token_hex(4)}", echo_logs=False)
    else:
        made = client_from_spec(backend.spec)
    try:
        with set_current_client(made):
            yield made
    finally:
        made.shutdown()  # a RayClient that connected this process disconnects it
        cloudpickle.unregister_pickle_by_value(sys.modules[__name__])


def graph(prefix: Path) -> tuple[StepSpec, StepSpec, StepSpec]:
    numbers = StepSpec(name="numbers", output_path_prefix=str(prefix), fn=make_numbers)
    squares = StepSpec(
        name="squares",
        output_path_prefix=str(prefix),
        deps=[numbers],
        fn=Squares(numbers),
        resources=ResourceConfig.with_cpu(cpu=1, ram="256m", disk="1g"),
    )
    total = StepSpec(
        name="total",
        output_path_prefix=str(prefix),
        deps=[squares],
        fn=remote(Total(squares), name="total", env_vars={STEP_VAR: "total"}),
    )
    return numbers, squares, total


def result(step: StepSpec) -> dict[str, Any]:
    record = read_record(step.output_path)
    assert record is not None, f"no record next to {step.output_path}"
    assert isinstance(record.result, dict)
    return record.result


def _step_jobs(client: Any) -> dict[str, Any]:
    """The client's jobs that ran steps (by id)."""
    return {i.job_id: i for i in client.list_jobs() if i.name.startswith(("squares", "total"))}


def test_step_runner_runs_a_three_step_graph(backend: Backend, client: Any, tmp_path: Path) -> None:
    numbers, squares, total = graph(tmp_path)
    assert isinstance(total.fn, RemoteCallable)

    notes: list[str] = []
    listener = logging.Handler(logging.WARNING)
    listener.emit = lambda record: notes.append(record.getMessage())  # type: ignore[method-assign]
    logging.getLogger("fray").addHandler(listener)  # on the logger: Marin may reset the root's
    try:
        StepRunner().run([total])  # its dependencies are scheduled first
    finally:
        logging.getLogger("fray").removeHandler(listener)

    for step in (numbers, squares, total):
        assert StatusFile(step.output_path, worker_id="test").status == STATUS_SUCCESS
    assert _read(total.output_path, "total.json") == sum(n * n for n in range(N))

    # numbers: in the runner's thread pool, in this process, not a Fray job.
    ran = result(numbers)
    assert ran["pid"] == os.getpid()
    assert ran["thread"].startswith("marin-step-runner")
    assert ran["job"] is None
    # squares and total: Fray jobs of the client set above, which succeeded.
    jobs = _step_jobs(client)
    ran = result(squares)
    assert ran["job"] in jobs and jobs[ran["job"]].name.startswith("squares_")
    if backend.name == "local":
        assert ran["pid"] == os.getpid()  # the driver has create_environment's variables
    else:
        assert ran["pid"] != os.getpid()  # a worker (Ray) or task process (Iris)
    ran = result(total)
    assert ran["job"] in jobs and jobs[ran["job"]].name.startswith("total")
    assert ran["env"] == "total"  # the RemoteCallable's env_vars reached its job
    assert ran["pid"] != os.getpid()  # ... which ran in a process of its own to set them
    assert len(jobs) == 2
    assert all(info.status is JobStatus.SUCCEEDED for info in jobs.values())
    disk_notes = [m for m in notes if "resources.disk='1g'" in m]
    assert len(disk_notes) == (1 if backend.name == "ray" else 0)  # Ray only notes it, once

    # A second run finds every output built: nothing runs, no job is submitted.
    before = {p: os.stat(os.path.join(p, ".artifact.json")).st_mtime_ns for p in _paths(total)}
    StepRunner().run(graph(tmp_path)[2:])
    assert len(_step_jobs(client)) == 2
    after = {p: os.stat(os.path.join(p, ".artifact.json")).st_mtime_ns for p in _paths(total)}
    assert after == before


def _paths(step: StepSpec) -> list[str]:
    return [step.output_path, *(p for dep in step.deps for p in _paths(dep))]


def test_a_failed_step_fails_the_run_and_its_dependents_never_run(
    client: Any, tmp_path: Path
) -> None:
    broken = StepSpec(
        name="broken",
        output_path_prefix=str(tmp_path),
        fn=fail,
        resources=ResourceConfig.with_cpu(cpu=1, ram="256m"),
    )
    after = StepSpec(name="after", output_path_prefix=str(tmp_path), deps=[broken], fn=make_numbers)

    with pytest.raises(RuntimeError, match=r"1 step\(s\) failed") as caught:
        StepRunner().run([after])

    chain: list[BaseException] = []
    error: BaseException | None = caught.value
    while error is not None and len(chain) < 10:
        chain.append(error)
        error = error.__cause__ or error.__context__
    assert any(isinstance(e, fray.JobFailedError) for e in chain), chain
    assert any("no input for broken" in str(e) for e in chain), chain
    assert StatusFile(broken.output_path, worker_id="test").status == STATUS_FAILED
    assert not os.path.exists(os.path.join(after.output_path, "numbers.json"))
    (job,) = [i for i in client.list_jobs() if i.name.startswith("broken_")]
    assert job.status is JobStatus.FAILED
