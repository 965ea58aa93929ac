"""The environment of a Ray worker process as jobs see it: each job sets its identity
(``FRAY_JOB_ID``, ``FRAY_TASK_INDEX``, ``FRAY_NUM_TASKS``) and device defaults for as long as
it runs, and puts back what was there; :func:`current_job` reads the job's id."""

# pyright: standard
# Ray is untyped: this module is an adapter over it.

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from typing import Any, NamedTuple

from fray.environment_variables import FRAY_JOB_ID

__all__ = ["current_job", "job_env"]


def current_job() -> str | None:
    """The id of the job this code runs in (``None`` in a driver): the job wrapper sets
    ``FRAY_JOB_ID`` in the worker process for the duration of the job."""
    return job_env.get(FRAY_JOB_ID)


class _Slot:
    """A ``NAME=value`` string this process owns and the C environment points into: put in
    the environment once (the C library's ``putenv`` keeps the pointer, not a copy), then
    given each new value in place and hidden between uses by a NUL as its first byte (an
    empty string, which no lookup of a name matches and ``os.environ``, shells and ``execve``
    skip). A job's variables then cost no C library call: no search of the environment,
    no copy of the array, no allocation. Values that do not fit take the ordinary way."""

    __slots__ = ("buffer", "first", "start", "value", "view")

    CAPACITY = 256  # value bytes

    def __init__(self, key: bytes) -> None:
        import ctypes

        self.start = len(key) + 1
        self.buffer = bytearray(self.start + self.CAPACITY + 1)
        self.buffer[: self.start] = key + b"="
        self.first = key[0]
        # Holds the buffer's memory in place for as long as the slot lives (a bytearray
        # with a view cannot be resized).
        self.view = (ctypes.c_char * len(self.buffer)).from_buffer(self.buffer)
        self.value: bytes | None = None  # what ``os.environ`` holds while it is shown

    def show(self, raw: bytes) -> None:
        """Gives the variable ``raw`` (at most ``CAPACITY`` bytes, no NUL)."""
        buffer, start = self.buffer, self.start
        end = start + len(raw)
        buffer[start:end] = raw
        buffer[end] = 0
        buffer[0] = self.first  # last: a reader sees the old state or the whole new one
        self.value = raw

    def hide(self) -> None:
        self.buffer[0] = 0
        self.value = None

    def address(self) -> int:
        import ctypes

        return ctypes.addressof(self.view)


class _Environment:
    """Sets and restores variables of this process's environment, for the C library (what
    subprocesses inherit) and ``os.environ`` alike: a job sets its identity and device
    variables with :meth:`swap` and puts back what was there with :meth:`restore`.

    Where ``os.environ`` keeps its variables as a dict of encoded bytes (CPython on POSIX:
    ``os.environ._data``), they are read and written there directly (names encoded once,
    old values kept as bytes): ``os.environ``'s own layers of Python cost a Ray worker more
    than the variables do. A variable the process did not have is set in the C environment
    through a :class:`_Slot` of its own (shown for the job, hidden after it); one it had, or
    a value no slot takes, with ``os.putenv``/``os.unsetenv``. Elsewhere ``os.environ`` does
    it all.

    Why not ``os.putenv`` for all: each call searches the whole environment, adding a name
    grows its array and removing one shifts it, and in a worker that shares two cores with
    six other busy processes every one of those touches memory that is no longer cached
    (measured: ~10 us of a job's ~30 us in the wrapper for three variables). And glibc's
    ``setenv`` keeps a copy of every value it was ever given, in a search tree it walks on
    every call, so a new value per job grew a worker by ~80 bytes per job (200,000 jobs:
    +15 MiB). ``fresh`` names variables that get a new value every job (the job id): where
    no slot takes one, it is set with the C library's ``putenv`` and a ``NAME=value``
    string this object owns (dropped once the environment no longer points into it), as
    CPython itself did up to 3.8.

    Code in a job may set or remove these variables itself (through ``os.environ``):
    :meth:`restore` then finds the slot's value gone from ``os.environ``, knows that the
    environment no longer points into the slot, and puts back what was there before the
    job the ordinary way.
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
        # Slots in the environment (hidden or shown), by name; ``None``: none can be made.
        self._slots: dict[bytes, _Slot | None] = {}

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
            keys, slots = self._keys, self._slots
            encoding, errors = self._encoding
            for name, value in values:
                key = keys.get(name) or self._key(name)
                old = data.get(key)
                if value is None:
                    if old is not None:
                        self._release(key)
                        os.unsetenv(key)
                        del data[key]
                        self._owned.pop(key, None)
                        undo.append((key, old))
                    continue
                raw = value.encode(encoding, errors)
                if old is None:
                    slot = slots[key] if key in slots else self._attach(key)
                    if slot is not None and len(raw) <= slot.CAPACITY and b"\0" not in raw:
                        # slot.show(raw), written out: this runs for every variable of
                        # every job, where a method call costs as much as the rest
                        buffer, start = slot.buffer, slot.start
                        end = start + len(raw)
                        buffer[start:end] = raw
                        buffer[end] = 0
                        buffer[0] = slot.first
                        slot.value = data[key] = raw
                        undo.append((key, slot))
                        continue
                elif raw == old:
                    continue
                else:
                    self._release(key)
                if key in self._fresh:
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
            elif type(old) is _Slot:
                if data.get(key) is old.value:  # old.hide(), written out (see swap)
                    old.buffer[0] = 0
                    old.value = None
                    del data[key]
                    continue
                # The job set or removed the variable itself: the environment no longer
                # points into the slot (a new one is put in next time); unset what it set.
                old.hide()
                if self._slots.get(key) is old:
                    del self._slots[key]
                if key in data:
                    os.unsetenv(key)
                    del data[key]
                    self._owned.pop(key, None)
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

    def _release(self, key: bytes) -> None:
        """Before the C library sets or unsets ``key`` (a swap within a swap): a slot that
        shows it is replaced or removed there, so it is out of the environment."""
        shown = self._slots.get(key)
        if shown is not None and shown.value is not None:
            shown.value = None
            del self._slots[key]

    def _attach(self, key: bytes) -> _Slot | None:
        """A new slot for ``key`` (which the process does not have), put in the C
        environment hidden; ``None`` where none can be (remembered)."""
        putenv = self._putenv
        if putenv is None:
            putenv = self._putenv = _c_putenv()
        slot: _Slot | None = None
        if putenv is not _NO_PUTENV and key and b"=" not in key and b"\0" not in key:
            slot = _Slot(key)
            slot.show(b"")  # found by name: replaces an entry of the C library's, if any
            if putenv.raw(slot.address()):
                slot = None
            else:
                slot.hide()
                _IN_ENVIRONMENT.append(slot)
        self._slots[key] = slot
        return slot

    def _put(self, key: bytes, raw: bytes) -> None:
        """Sets a fresh variable from a string this object owns."""
        putenv = self._putenv
        if putenv is None:
            putenv = self._putenv = _c_putenv()
        entry = key + b"=" + raw
        if putenv is _NO_PUTENV or b"\0" in raw or putenv.owned(entry):
            os.putenv(key, raw)  # also for a value the C library cannot hold: it says why
            self._owned.pop(key, None)
        else:
            self._owned[key] = entry  # the environment points into it now; the old one is free


class _CPutenv(NamedTuple):
    """The C library's ``putenv`` (it keeps the string it is given, not a copy), called
    without releasing the GIL (it only writes one pointer)."""

    owned: Any  # putenv(bytes)
    raw: Any  # putenv(address)


_NO_PUTENV = object()

# Every slot ever put in the C environment: never freed while the environment may point
# into it (a slot found replaced or removed is no longer pointed to, but is kept all the
# same: a few hundred bytes per variable name).
_IN_ENVIRONMENT: list[_Slot] = []


def _c_putenv() -> Any:
    """:class:`_CPutenv`, or ``_NO_PUTENV`` where ctypes cannot reach it."""
    try:
        import ctypes

        library = ctypes.PyDLL(None)
        owned = library["putenv"]  # a function object of its own each time
        owned.argtypes = [ctypes.c_char_p]
        owned.restype = ctypes.c_int
        raw = library["putenv"]
        raw.argtypes = [ctypes.c_void_p]
        raw.restype = ctypes.c_int
    except (ImportError, OSError, AttributeError):
        return _NO_PUTENV
    return _CPutenv(owned, raw)


job_env = _Environment(fresh=(FRAY_JOB_ID,))
"""This process's environment, with the job id as its fresh variable."""
