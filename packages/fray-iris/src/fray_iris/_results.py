# pyright: standard
"""The results store: Iris discards return values, so tasks write them here. Under the
store's URL, ``<job wire id>/task-<index>.pkl`` holds a replica's ``("ok", value)`` or
``("error", Outcome)``, and ``<job wire id>/actor-<index>.pkl`` how an actor ended (an
``Outcome``). Local files are written 0600 in 0700 folders.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import tempfile
from typing import Any


def default_local_results_url() -> str:
    """A private folder under the system temp dir (for clusters running on this machine)."""
    owner = os.getuid() if hasattr(os, "getuid") else "user"
    return f"file://{os.path.join(tempfile.gettempdir(), f'fray-iris-results-{owner}')}"


class ResultStore:
    """Reads and writes records under one fsspec URL."""

    def __init__(self, url: str) -> None:
        self.url = url.rstrip("/")
        local = self.url.removeprefix("file://")
        self._local = local if "://" not in local else None

    def task_path(self, job_wire: str, index: int, leaf: str = "task") -> str:
        """Where replica ``index`` of the job stores its record."""
        tail = f"{job_wire.strip('/')}/{leaf}-{index}.pkl"
        return f"{self.url}/{tail}" if self._local is None else os.path.join(self._local, tail)

    def actor_path(self, job_wire: str, index: int) -> str:
        """Where actor ``index`` of a group stores how it ended."""
        return self.task_path(job_wire, index, "actor")

    def write(self, path: str, record: Any) -> None:
        """Stores ``record`` (cloudpickled) at ``path``, atomically where the store allows."""
        import cloudpickle

        data = cloudpickle.dumps(record)
        if self._local is None:
            with _fsspec().open(path, "wb") as out:
                out.write(data)
            return
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        tmp = f"{path}.{secrets.token_hex(4)}.tmp"
        with os.fdopen(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb") as out:
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
    import fsspec  # only for a store that is not a local folder: it takes a while to import

    return fsspec
