# pyright: standard
"""What runs in an Iris task around a job's callable, and the results store for what Iris
discards (return values, errors, how actors ended). Every task imports this module, so it
imports neither Fray nor the Iris client: each would cost a task start 100s of milliseconds.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
import traceback
from collections.abc import Callable
from typing import Any
from urllib.parse import urlparse

from fray_iris._views import END_OF_OUTPUT, fray_job_id
from fray_iris.environment_variables import FRAY_IRIS_RESULTS_URL


def enter_task(results_url: str | None) -> tuple[str, int, ResultStore | None]:
    """Sets Fray's env for this task from Iris's; returns (job wire id, task index, the
    results store or ``None``)."""
    raw = os.environ.get("IRIS_TASK_ID", "")
    job_wire, _, index = raw.split(":", 1)[0].rstrip("/").rpartition("/")
    if not job_wire or not index.isdigit():
        raise RuntimeError(
            f"fray_iris task code runs only inside an Iris task (IRIS_TASK_ID={raw!r})"
        )
    os.environ.update(
        FRAY_JOB_ID=fray_job_id(job_wire),
        FRAY_TASK_INDEX=index,
        FRAY_NUM_TASKS=os.environ.get("IRIS_NUM_TASKS", "1"),
    )
    store = None
    if results_url:
        os.environ[FRAY_IRIS_RESULTS_URL] = results_url
        store = ResultStore(results_url)
    return job_wire, int(index), store


def run_callable(
    fn: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    results_url: str | None,
    tpu: tuple[str, int] | None = None,
) -> None:
    """Runs a job's callable, stores its value or exception, and ends the task's output (a
    failure prints its traceback first and exits 1, or as its ``SystemExit`` says). A TPU
    job's replicas (``tpu``: type, VMs) get ``TPU_WORKER_ID``, ``TPU_ACCELERATOR_TYPE`` if unset."""
    job_wire, index, store = enter_task(results_url)
    if tpu is not None:
        os.environ.setdefault("TPU_WORKER_ID", str(index % tpu[1]))
        os.environ.setdefault("TPU_ACCELERATOR_TYPE", tpu[0])
    path = store.task_path(job_wire, index) if store else ""
    if store is not None:
        store.remove(path)  # a record left by an earlier job of the same name
    try:
        value = fn(*args, **kwargs)
        if store is not None:
            try:
                store.write(path, ("ok", value))
            except Exception as exc:
                raise RuntimeError(
                    f"the job's return value could not be stored: {type(exc).__name__}: {exc}"
                ) from exc
    except BaseException as exc:
        error = f"{type(exc).__name__}: {exc}"
        if store is not None:
            from fray.backend import Outcome  # only on failure: importing Fray takes a while

            trace = traceback.format_exc()
            store.write(path, ("error", Outcome("failed", None, exc, error, 1, 1, trace)))
        code = exc.code if isinstance(exc, SystemExit) else 1
        if not isinstance(exc, SystemExit):  # what Iris's runner would print, after the end
            traceback.print_exc()
        end_output(error)
        raise SystemExit(code if isinstance(code, int | None) else 1) from exc
    end_output()


def end_output(why: str = "") -> None:
    """Writes :data:`END_OF_OUTPUT` as the task's last line on stdout and on stderr, after
    what was written before; on stderr ``why`` follows it on the same line (Iris's error for
    a failed task quotes that stream's last line)."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):  # a stream the user's code closed
            stream.flush()
    summary = " ".join(why.split())  # one line
    for fd, text in ((1, END_OF_OUTPUT), (2, f"{END_OF_OUTPUT} {summary}".rstrip())):
        with contextlib.suppress(OSError):
            os.write(fd, f"{text}\n".encode())


def is_loopback(address: str | None) -> bool:
    """Whether the controller at ``address`` runs on this machine."""
    host = urlparse(address or "").hostname or ""
    return host in ("127.0.0.1", "localhost", "::1")


def serving_hosts(info: Any) -> tuple[str, str]:
    """Where a server here listens and is reached: loopback for a local controller, else
    ``IRIS_BIND_HOST`` (default every interface) and the advertised host."""
    if is_loopback(info.controller_address):
        return "127.0.0.1", "127.0.0.1"
    return os.environ.get("IRIS_BIND_HOST", "0.0.0.0"), info.advertise_host


def default_local_results_url() -> str:
    """A private folder under the system temp dir (for clusters running on this machine)."""
    folder = f"fray-iris-results-{os.getuid()}"
    return f"file://{os.path.join(tempfile.gettempdir(), folder)}"


class ResultStore:
    """Records under one fsspec URL (``<job wire id>/task-<i>.pkl``: ``("ok", value)`` or
    ``("error", Outcome)``; ``actor-<i>.pkl``: an ``Outcome``); local files 0600 in 0700 folders."""

    def __init__(self, url: str) -> None:
        self.url = url.rstrip("/")
        local = self.url.removeprefix("file://")
        self._local = local if "://" not in local else None

    def task_path(self, job_wire: str, index: int, leaf: str = "task") -> str:
        """Where replica ``index`` (``"actor"``: actor ``index`` of a group) stores its record."""
        tail = f"{job_wire.strip('/')}/{leaf}-{index}.pkl"
        return f"{self._local or self.url}/{tail}"

    def write(self, path: str, record: Any) -> None:
        """Stores ``record`` (cloudpickled) at ``path``, atomically where the store allows."""
        import cloudpickle

        data = cloudpickle.dumps(record)
        if self._local is None:
            with _fsspec().open(path, "wb") as out:
                out.write(data)
            return
        folder = os.path.dirname(path)
        os.makedirs(folder, mode=0o700, exist_ok=True)
        fd, tmp = tempfile.mkstemp(".tmp", dir=folder)  # 0600
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.replace(tmp, path)

    def read(self, path: str) -> Any | None:
        """The record at ``path``, or ``None`` if there is none."""
        import cloudpickle

        try:
            with open(path, "rb") if self._local is not None else _fsspec().open(path, "rb") as f:
                return cloudpickle.loads(f.read())
        except FileNotFoundError:
            return None

    def remove(self, path: str) -> None:
        """Deletes the record at ``path`` if there is one."""
        with contextlib.suppress(FileNotFoundError):
            if self._local is not None:
                os.unlink(path)
            else:
                fs, inner = _fsspec().core.url_to_fs(path)
                fs.rm(inner)


def _fsspec() -> Any:
    """The fsspec module, imported only for a store that is not a local folder."""
    import fsspec  # only for a store that is not a local folder: it takes a while to import

    return fsspec
