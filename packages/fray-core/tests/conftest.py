from __future__ import annotations

import os
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
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is dead for our purposes.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False
