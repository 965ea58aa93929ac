"""Helpers for the CLI tests: run ``python -m fray.cli`` with a private state directory."""

from __future__ import annotations

import importlib
import json
import os
import selectors
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import psutil

FRAY = [sys.executable, "-m", "fray.cli"]


def import_quietly(name: str) -> ModuleType:
    """Imports a submodule of fray without leaving it as an attribute of the ``fray`` package
    (another test compares ``dir(fray)`` with ``fray.__all__``)."""
    import fray

    attr = name.split(".")[1]
    had = attr in vars(fray)
    module = importlib.import_module(name)
    if not had:
        vars(fray).pop(attr, None)
    return module


def cli_env(tmp_path: Path) -> dict[str, str]:
    env = dict(os.environ)
    for name in (
        "FRAY_CLIENT_SPEC",
        "RAY_ADDRESS",
        "IRIS_CONTROLLER_ADDRESS",
        "IRIS_TASK_ID",
        "FRAY_JOB_ID",
    ):
        env.pop(name, None)
    env["FRAY_STATE_DIR"] = str(tmp_path / "state")
    env["FRAY_TERMINATE_GRACE_S"] = "2"
    env["PYTHONUNBUFFERED"] = "1"
    return env


def fray(env: dict[str, str], *args: str, timeout: float = 90) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*FRAY, *args], capture_output=True, text=True, env=env, timeout=timeout, check=False
    )


def fray_json(env: dict[str, str], *args: str) -> Any:
    done = fray(env, *args, "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def start(env: dict[str, str], *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*FRAY, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def read_line(proc: subprocess.Popen[str], timeout: float = 60) -> str:
    """The next stdout line of ``proc``, waiting at most ``timeout`` seconds."""
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        while time.monotonic() < deadline:
            if sel.select(timeout=max(deadline - time.monotonic(), 0)):
                line = proc.stdout.readline()
                if not line:
                    raise AssertionError(
                        f"process ended; stderr: {proc.stderr.read() if proc.stderr else ''}"
                    )
                return line.rstrip("\n")
    raise AssertionError(f"no output line within {timeout}s")


def wait_gone(pids: list[int], timeout: float = 30) -> list[int]:
    """Waits until none of ``pids`` is a live process; returns those still alive."""
    deadline = time.monotonic() + timeout
    alive = pids
    while time.monotonic() < deadline:
        alive = [p for p in pids if _alive(p)]
        if not alive:
            return []
        time.sleep(0.05)  # polling other processes' exit: there is nothing to wait on
    return alive


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def stop(proc: subprocess.Popen[str]) -> None:
    """Test cleanup: make sure a started CLI process is gone."""
    if proc.poll() is None:
        proc.kill()
    proc.communicate(timeout=30)
