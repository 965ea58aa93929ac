from __future__ import annotations

import os
import select
import time
from collections.abc import Iterator

import pytest

import fray


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (
        "FRAY_CLIENT_SPEC",
        "RAY_ADDRESS",
        "IRIS_CONTROLLER_ADDRESS",
        "IRIS_TASK_ID",
        "FRAY_JOB_ID",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("FRAY_TERMINATE_GRACE_S", "2")


@pytest.fixture
def client() -> Iterator[fray.LocalClient]:
    c = fray.LocalClient(echo_logs=False)
    try:
        yield c
    finally:
        c.shutdown()


def pid_alive(pid: int) -> bool:
    """Whether ``pid`` is a running process. One that has exited is not, even while its
    parent has not reaped it yet (a zombie, which ``os.kill(pid, 0)`` still finds)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except (FileNotFoundError, ProcessLookupError):  # gone, or reaped between open and read
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def wait_dead(pids: list[int], timeout: float = 30.0) -> list[int]:
    """Waits until each of ``pids`` has exited, at most ``timeout`` seconds in all; returns
    those still running.

    A process sent SIGKILL (or SIGTERM) is gone only once the kernel has run its exit: on a
    busy machine that can be after the call that sent the signal has returned, so a test
    waits for it. A pidfd becomes readable when its process exits: no polling.
    """
    deadline = time.monotonic() + timeout
    for pid in pids:
        try:
            fd = os.pidfd_open(pid)
        except ProcessLookupError:
            continue
        try:
            select.select([fd], [], [], max(deadline - time.monotonic(), 0.0))
        finally:
            os.close(fd)
    return [p for p in pids if pid_alive(p)]
