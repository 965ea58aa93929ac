"""A real local Ray per test module: private temp root, dashboard on (command jobs use the
Jobs API), a ``head_node`` resource, and nothing left behind."""

# pyright: standard
# Ray is untyped: this module is an adapter over it.

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator

import psutil
import pytest


def _ray_processes() -> set[int]:
    found: set[int] = set()
    for proc in psutil.process_iter(["pid", "name", "cmdline"]):
        try:
            text = " ".join(proc.info["cmdline"] or []) + " " + (proc.info["name"] or "")
        except (psutil.Error, TypeError):
            continue
        if "raylet" in text or "gcs_server" in text or "ray::" in text:
            found.add(proc.info["pid"])
    return found


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[str]:
    """Starts Ray in this process for the module; yields the GCS address."""
    import ray

    before = _ray_processes()
    root = tempfile.mkdtemp(prefix="fr", dir="/tmp")
    os.makedirs(os.path.join(root, "ray"))
    saved = {k: os.environ.get(k) for k in ("RAY_TMPDIR", "RAY_ADDRESS")}
    os.environ["RAY_TMPDIR"] = root
    os.environ.pop("RAY_ADDRESS", None)
    tests_dir = os.path.dirname(__file__)
    pythonpath = os.environ.get("PYTHONPATH", "")
    if tests_dir not in pythonpath.split(os.pathsep):  # workers import test modules
        os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (tests_dir, pythonpath) if p)
    ray.init(
        address="local",
        num_cpus=8,
        resources={"head_node": 1},
        include_dashboard=True,
        log_to_driver=False,
        _temp_dir=root,
    )
    try:
        yield ray.get_runtime_context().gcs_address
    finally:
        ray.shutdown()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        left = _ray_processes() - before
        procs: list[psutil.Process] = []
        for pid in left:
            try:
                proc = psutil.Process(pid)
                if proc.status() != psutil.STATUS_ZOMBIE:
                    procs.append(proc)
            except psutil.NoSuchProcess:
                pass
        # On a loaded machine Ray's processes can take a while to exit; kill stragglers.
        _gone, alive = psutil.wait_procs(procs, timeout=30)
        for proc in alive:
            with contextlib.suppress(psutil.NoSuchProcess):
                proc.kill()
        _gone, alive = psutil.wait_procs(alive, timeout=10)
        alive = [p for p in alive if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
        shutil.rmtree(root, ignore_errors=True)
        assert not alive, f"Ray processes survived even SIGKILL: {[p.pid for p in alive]}"
