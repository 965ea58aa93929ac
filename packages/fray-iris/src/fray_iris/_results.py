# pyright: standard
"""The results store: Iris discards return values, so tasks write them here.

Layout under the store's URL: ``<job path>/task-<index>.pkl`` holds a job replica's
``("ok", value)`` or ``("error", exception, traceback text)``; ``<job path>/actor-<index>.pkl``
holds the error of an actor whose constructor failed. ``<job path>`` is the Iris job id
without its leading ``/``. Local paths are written 0600 in 0700 folders.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import tempfile
from typing import Any

__all__ = ["ResultStore", "default_local_results_url"]


def default_local_results_url() -> str:
    """A private folder under the system temp dir (for clusters running on this machine)."""
    getuid = getattr(os, "getuid", None)
    owner = str(getuid()) if getuid is not None else "user"
    return f"file://{os.path.join(tempfile.gettempdir(), f'fray-iris-results-{owner}')}"


def _local_path(url: str) -> str | None:
    if url.startswith("file://"):
        return url[len("file://") :]
    if "://" not in url:
        return url
    return None


def _filesystem(url: str) -> tuple[Any, str]:
    import fsspec

    found: tuple[Any, Any] = fsspec.core.url_to_fs(url)
    return found[0], str(found[1])


class ResultStore:
    """Reads and writes job records under one fsspec URL."""

    def __init__(self, url: str) -> None:
        self.url = url.rstrip("/")
        self._local = _local_path(self.url)

    def _path(self, job_wire: str, leaf: str) -> str:
        job_path = job_wire.strip("/")
        if self._local is not None:
            return os.path.join(self._local, job_path, leaf)
        return f"{self.url}/{job_path}/{leaf}"

    def task_path(self, job_wire: str, index: int) -> str:
        """Where replica ``index`` of the job stores its record."""
        return self._path(job_wire, f"task-{index}.pkl")

    def actor_path(self, job_wire: str, index: int) -> str:
        """Where actor ``index`` of a group stores its constructor's error."""
        return self._path(job_wire, f"actor-{index}.pkl")

    def write(self, path: str, record: Any) -> None:
        """Stores ``record`` (cloudpickled) at ``path``, atomically where the store allows."""
        import cloudpickle

        data = cloudpickle.dumps(record)
        if self._local is not None:
            folder = os.path.dirname(path)
            os.makedirs(folder, mode=0o700, exist_ok=True)
            tmp = f"{path}.{secrets.token_hex(4)}.tmp"
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "wb") as out:
                out.write(data)
            os.replace(tmp, path)
            return
        fs, inner = _filesystem(path)
        with fs.open(inner, "wb") as out:
            out.write(data)

    def read(self, path: str) -> Any | None:
        """The record at ``path``, or ``None`` if there is none."""
        import cloudpickle

        if self._local is not None:
            try:
                with open(path, "rb") as f:
                    data = f.read()
            except FileNotFoundError:
                return None
        else:
            fs, inner = _filesystem(path)
            try:
                with fs.open(inner, "rb") as f:
                    data: bytes = f.read()
            except FileNotFoundError:
                return None
        return cloudpickle.loads(data)

    def remove(self, path: str) -> None:
        """Deletes the record at ``path`` if there is one."""
        if self._local is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
            return
        fs, inner = _filesystem(path)
        with contextlib.suppress(FileNotFoundError):
            fs.rm(inner)
