"""What runs inside an Iris task around a job's callable (the actor host is
``_actors.host_actor``).

A module-level function, so Iris pickles it by reference and the task imports this module
(fray-iris must be installed where tasks run: it is a dependency of every Fray program that
uses Iris). It imports neither Fray nor the Iris client, which would cost every task start
hundreds of milliseconds.
"""

from __future__ import annotations

import os
import sys
import traceback
from collections.abc import Callable
from typing import Any
from urllib.parse import urlparse

from fray_iris._results import ResultStore
from fray_iris._views import fray_job_id
from fray_iris.environment_variables import FRAY_IRIS_RESULTS_URL

__all__ = ["enter_task", "is_loopback", "run_callable", "serving_hosts"]


def enter_task(results_url: str | None) -> tuple[str, int]:
    """Sets Fray's env for this task; returns (job wire id, task index).

    Reads Iris's task env (``IRIS_TASK_ID`` is ``/<user>/<job...>/<index>[:<attempt>]``)
    directly: importing the Iris client costs seconds, on every task start.
    """
    raw = os.environ.get("IRIS_TASK_ID", "")
    task_wire = raw.split(":", 1)[0].rstrip("/")
    job_wire, _, index_text = task_wire.rpartition("/")
    if not job_wire or not index_text.isdigit():
        raise RuntimeError(
            f"fray_iris task code runs only inside an Iris task (IRIS_TASK_ID={raw!r})"
        )
    index = int(index_text)
    os.environ["FRAY_JOB_ID"] = fray_job_id(job_wire)
    os.environ["FRAY_TASK_INDEX"] = str(index)
    os.environ["FRAY_NUM_TASKS"] = os.environ.get("IRIS_NUM_TASKS", "1")
    if results_url:
        os.environ[FRAY_IRIS_RESULTS_URL] = results_url
    return job_wire, index


def run_callable(
    fn: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    results_url: str | None,
    tpu: tuple[str, int] | None = None,
) -> None:
    """Runs a job's callable and stores its return value or exception in the results store.

    The exception is re-raised after it is stored, so Iris sees the failure (and keeps its
    own error text) and the exit code is the one Python gives it. On a TPU job (``tpu`` is
    the slice type and its VM count) each replica gets the slice env a real TPU VM has,
    where the machine has not set it: ``TPU_WORKER_ID`` and ``TPU_ACCELERATOR_TYPE``.
    """
    job_wire, index = enter_task(results_url)
    if tpu is not None:
        variant, vms = tpu
        os.environ.setdefault("TPU_WORKER_ID", str(index % vms))
        os.environ.setdefault("TPU_ACCELERATOR_TYPE", variant)
    store = ResultStore(results_url) if results_url else None
    path = store.task_path(job_wire, index) if store else ""
    if store is not None:
        store.remove(path)  # a record left by an earlier job of the same name
    try:
        value = fn(*args, **kwargs)
    except BaseException as exc:
        if store is not None:
            # Imported only here: importing fray (pydantic, the request types) takes
            # hundreds of milliseconds, which every task start would pay for nothing.
            from fray.backend import Outcome

            error = f"{type(exc).__name__}: {exc}"
            store.write(
                path, ("error", Outcome("failed", None, exc, error, 1, 1, traceback.format_exc()))
            )
        sys.stdout.flush()
        raise
    if store is not None:
        try:
            store.write(path, ("ok", value))
        except Exception as exc:
            from fray.backend import Outcome

            message = f"the job's return value could not be stored: {type(exc).__name__}: {exc}"
            store.write(path, ("error", Outcome.failed(RuntimeError(message))))
            raise RuntimeError(message) from exc
    sys.stdout.flush()


def is_loopback(address: str | None) -> bool:
    """Whether the controller at ``address`` runs on this machine."""
    host = urlparse(address or "").hostname or ""
    return host in ("127.0.0.1", "localhost", "::1")


def serving_hosts(info: Any) -> tuple[str, str]:
    """Where a server in this task listens and the address it is reached at, from the
    task's Iris ``JobInfo``: loopback when the controller is on this machine (a one-machine
    cluster), else ``IRIS_BIND_HOST`` (default every interface) and the task's advertised
    host."""
    if is_loopback(info.controller_address):
        return "127.0.0.1", "127.0.0.1"
    return os.environ.get("IRIS_BIND_HOST", "0.0.0.0"), info.advertise_host
