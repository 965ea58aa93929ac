"""The environment of a Ray worker process as jobs see it: each job sets its identity
(``FRAY_JOB_ID``, ``FRAY_TASK_INDEX``, ``FRAY_NUM_TASKS``) and device defaults for as long as
it runs, and puts back what was there; :func:`current_job` reads the job's id."""

# pyright: standard
# Ray is untyped: this module is an adapter over it.

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from typing import Any

from fray.environment_variables import FRAY_JOB_ID

__all__ = ["current_job", "job_env"]


def current_job() -> str | None:
    """The id of the job this code runs in (``None`` in a driver): the job wrapper sets
    ``FRAY_JOB_ID`` in the worker process for the duration of the job."""
    return job_env.get(FRAY_JOB_ID)


class _Environment:
    """Sets and restores variables of this process's environment, for the C library (what
    subprocesses inherit) and ``os.environ`` alike: a job sets its identity and device
    variables with :meth:`swap` and puts back what was there with :meth:`restore`.

    Where ``os.environ`` keeps its variables as a dict of encoded bytes (CPython on POSIX:
    ``os.environ._data``), they are read and written there directly (names encoded once,
    old values kept as bytes) and in the C library with ``os.putenv``/``os.unsetenv``:
    ``os.environ``'s own layers of Python cost a Ray worker more than the variables do.
    Elsewhere ``os.environ`` does it.

    ``fresh`` names variables that get a new value every job (the job id). glibc's
    ``setenv`` (behind ``os.putenv``) keeps a copy of every value it was ever given, in a
    search tree it walks on every call, so a new value per job grew a worker by ~80 bytes
    per job and made every later call slower (measured: 200,000 jobs, +15 MiB). A fresh
    variable is set with the C library's ``putenv`` and a ``NAME=value`` string this
    object owns instead (one per variable, dropped once the environment no longer points
    into it), as CPython itself did up to 3.8.
    """

    def __init__(self, fresh: Iterable[str] = ()) -> None:
        self._encoding = (sys.getfilesystemencoding(), sys.getfilesystemencodeerrors())
        data = getattr(os.environ, "_data", None)
        probe = next(iter(data), b"") if isinstance(data, dict) else None
        self._data: dict[bytes, bytes] | None = (
            data if isinstance(probe, bytes) and os.name == "posix" else None
        )
        self._keys: dict[str, bytes] = {}  # names, encoded
        self._fresh = {self._key(name) for name in fresh}
        if any(not key or b"=" in key or b"\0" in key for key in self._fresh):
            raise ValueError(f"not environment variable names: {fresh!r}")
        self._putenv: Any = None  # the C library's putenv, found on first use
        self._owned: dict[bytes, bytes] = {}  # NAME=value strings the environment points into

    def get(self, name: str) -> str | None:
        data = self._data
        if data is None:
            return os.environ.get(name)
        value = data.get(self._keys.get(name) or self._key(name))
        return None if value is None else value.decode(*self._encoding)

    def swap(self, values: Iterable[tuple[str, str | None]]) -> list[tuple[Any, Any]]:
        """Sets each ``(name, value)`` (``None`` unsets it); returns what :meth:`restore`
        takes to put back what was there. A variable that already has its value is left
        alone."""
        undo: list[tuple[Any, Any]] = []
        data = self._data
        try:
            if data is None:
                for name, value in values:
                    old = os.environ.get(name)
                    if old != value:
                        if value is None:
                            os.environ.pop(name, None)
                        else:
                            os.environ[name] = value
                        undo.append((name, old))
                return undo
            keys, fresh = self._keys, self._fresh
            encoding, errors = self._encoding
            for name, value in values:
                key = keys.get(name) or self._key(name)
                old = data.get(key)
                if value is None:
                    if old is not None:
                        os.unsetenv(key)
                        del data[key]
                        self._owned.pop(key, None)
                        undo.append((key, old))
                    continue
                raw = value.encode(encoding, errors)
                if raw == old:
                    continue
                if key in fresh:
                    self._put(key, raw)
                else:
                    os.putenv(key, raw)
                data[key] = raw
                undo.append((key, old))
        except BaseException:  # a name or value the environment cannot hold: no half-set
            self.restore(undo)
            raise
        return undo

    def restore(self, undo: list[tuple[Any, Any]]) -> None:
        """Puts back what :meth:`swap` changed."""
        data = self._data
        for key, old in reversed(undo):
            if data is None:
                if old is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = old
            elif old is None:
                os.unsetenv(key)
                data.pop(key, None)
                self._owned.pop(key, None)  # nothing points into it any more
            else:
                if key in self._fresh:
                    self._put(key, old)
                else:
                    os.putenv(key, old)
                data[key] = old

    def _key(self, name: str) -> bytes:
        key = self._keys[name] = name.encode(*self._encoding)
        return key

    def _put(self, key: bytes, raw: bytes) -> None:
        """Sets a fresh variable from a string this object owns."""
        putenv = self._putenv
        if putenv is None:
            putenv = self._putenv = _c_putenv()
        entry = key + b"=" + raw
        if putenv is _NO_PUTENV or b"\0" in raw or putenv(entry):
            os.putenv(key, raw)  # also for a value the C library cannot hold: it says why
            self._owned.pop(key, None)
        else:
            self._owned[key] = entry  # the environment points into it now; the old one is free


_NO_PUTENV = object()


def _c_putenv() -> Any:
    """The C library's ``putenv`` (it keeps the string it is given, not a copy), or
    ``_NO_PUTENV`` where ctypes cannot reach it."""
    try:
        import ctypes

        putenv = ctypes.CDLL(None).putenv
        putenv.argtypes = [ctypes.c_char_p]
        putenv.restype = ctypes.c_int
    except (ImportError, OSError, AttributeError):
        return _NO_PUTENV
    return putenv


job_env = _Environment(fresh=(FRAY_JOB_ID,))
"""This process's environment, with the job id as its fresh variable."""
