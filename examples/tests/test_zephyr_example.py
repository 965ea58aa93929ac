"""Marin's Zephyr 0.2.20 on Fray: ``examples/zephyr_pipeline.py`` on local, Ray and Iris.

Run by ``nox -s compat``, which installs ``marin-zephyr`` beside fray-core with its pinned
``marin-fray`` left out (the other example sessions do not have Zephyr, and skip this module).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("zephyr", reason="marin-zephyr is installed by `nox -s compat` only")

# The fixtures (examples/tests/conftest.py): `backend` is each backend in turn.
Backend = Any
Example = Any

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_zephyr_pipelines(backend: Backend, example: Example, tmp_path: Path) -> None:
    run = example(
        "zephyr_pipeline.py",
        "--workers",
        "2",
        "--work-dir",
        str(tmp_path / "work"),
        spec=backend.spec,
        env=backend.env,
    )
    assert run.returncode == 0, run.output
    assert run.report["checks"] == {
        "group_by": True,
        "worker_killed": True,
        "written_files": True,
        "written_rows": True,
    }
    backend.after_run()


def test_zephyr_pipeline_survives_a_killed_worker(
    backend: Backend, example: Example, tmp_path: Path
) -> None:
    if backend.name == "local":
        pytest.skip("local Zephyr workers are threads of the driver: there is no process to kill")
    work = tmp_path / "work"
    run = example(
        "zephyr_pipeline.py",
        "--workers",
        "2",
        "--kill-worker",
        "--work-dir",
        str(work),
        spec=backend.spec,
        env=backend.env,
    )
    assert run.returncode == 0, run.output
    assert (work / "killed.pid").exists()  # a worker's process really was killed
    assert all(run.report["checks"].values()), run.report
    backend.after_run()
