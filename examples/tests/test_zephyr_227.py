"""Marin's Zephyr 0.2.227 (the line Marin runs today, Python 3.12) on Fray: the pipelines of
``examples/zephyr_pipeline.py --more`` on local, Ray and Iris, and on Ray a pipeline whose
workers size their disk (``disk="10g"``, as ``marin/datakit/download/*.py`` does).

Run by ``nox -s compat-3.12``, which installs ``marin-zephyr`` 0.2.227 beside fray-core with
its pinned ``marin-fray`` left out; other sessions (no Zephyr, or 0.2.20) skip this module.
Besides the program's own checks, the test reads what the pipelines wrote itself, and on the
local backend (Zephyr's workers and coordinator are threads of the program) it checks that
tearing the worker pools down logged nothing at WARNING or above.
"""

from __future__ import annotations

import gzip
import json
import secrets
import sys
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import pytest
from packaging.version import Version


def _zephyr_version() -> Version | None:
    try:
        return Version(version("marin-zephyr"))
    except PackageNotFoundError:
        return None


ZEPHYR = _zephyr_version()
if ZEPHYR is None or ZEPHYR.release < (0, 2, 227):
    pytest.skip(
        f"needs marin-zephyr 0.2.227 (installed by `nox -s compat-3.12`), found {ZEPHYR}",
        allow_module_level=True,
    )

# The fixtures (examples/tests/conftest.py): `backend` is each backend in turn.
Backend = Any
Example = Any

pytestmark = [pytest.mark.integration, pytest.mark.slow]

# What examples/zephyr_pipeline.py --more writes (its DOCS, DISTINCT_TEXTS, SHARDS, RESHARD_TO).
DOCS = [{"id": i, "text": f"text-{i % 7}"} for i in range(30)]
SHARDS = 3
RESHARD_TO = 5
# Zephyr's coordinator says this when a stage starts before any worker has registered (each
# worker registers from a thread of its own once it is up): a start-up race of Zephyr's, not
# a teardown. Fray's local client constructs a group's actors in threads of their own, so it
# comes more often than on the predecessor, which constructs them before create_actor_group
# returns.
STAGE_START_WAIT = "_wait_for_stage"


def _rows(paths: list[Path]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for path in paths:
        text = gzip.decompress(path.read_bytes()).decode() if path.suffix == ".gz" else None
        text = path.read_text() if text is None else text
        rows.extend(json.loads(line) for line in text.splitlines() if line.strip())
    return sorted(rows, key=lambda r: r["id"])


def test_zephyr_227_pipelines(backend: Backend, example: Example, tmp_path: Path) -> None:
    work = tmp_path / "work"
    # On local, a pool per pipeline, as Marin's code runs them (five teardowns to watch). On
    # Ray and Iris, where a pool is a coordinator and two workers in processes of their own
    # (and each shard a subprocess of a worker), one pool serves the five.
    pool = [] if backend.name == "local" else ["--shared-pool"]
    run = example(
        "zephyr_pipeline.py",
        "--workers",
        "2",
        "--more",
        *pool,
        "--work-dir",
        str(work),
        spec=backend.spec,
        env=backend.env,
    )
    assert run.returncode == 0, run.output
    assert run.report["checks"] == {
        "deduplicate": True,
        "group_by": True,
        "jsonl_gz": True,
        "reshard": True,
        "worker_killed": True,
        "written_files": True,
        "written_rows": True,
    }
    # What the pipelines wrote, read here: one gzip file per input shard holding every
    # document; after reshard, one file per new shard, every document once, tagged.
    gz = sorted((work / "gz").glob("*.jsonl.gz"))
    assert len(gz) == SHARDS
    assert all(p.read_bytes()[:2] == b"\x1f\x8b" for p in gz)
    assert _rows(gz) == DOCS
    resharded = sorted((work / "resharded").glob("*.jsonl"))
    assert len(resharded) == RESHARD_TO
    assert _rows(resharded) == [{**d, "tag": f"t{d['id']}"} for d in DOCS]
    if backend.name == "local":
        logged = [w for w in run.report["warnings"] if w["function"] != STAGE_START_WAIT]
        assert logged == [], "\n".join(
            f"{w['logger']}.{w['function']}: {w['message']}" for w in logged
        )
    backend.after_run()


def double(x: int) -> int:
    return 2 * x


def each(chunk: list[int]) -> list[int]:
    return chunk


@pytest.mark.parametrize("backend", ["ray"], indirect=True)
def test_zephyr_227_workers_that_size_their_disk_run_on_ray(
    backend: Backend, tmp_path: Path, monkeypatch: Any
) -> None:
    # Zephyr's workers ask for disk="10g"; no node of the test's Ray advertises a 'disk'
    # resource: the pipeline runs all the same (Fray refused such a request before). The
    # workers are created by Zephyr's coordinator, an actor: its client, in the
    # coordinator's process, is the one that notes the disk once.
    import cloudpickle
    from zephyr.context import ZephyrContext
    from zephyr.dataset import Dataset

    from fray.current_client import set_current_client
    from fray.types import ResourceConfig
    from fray_ray import RayClient

    monkeypatch.setenv("RAY_ADDRESS", backend.env["RAY_ADDRESS"])
    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # not importable on workers
    client = RayClient(namespace=f"disk-{secrets.token_hex(4)}", echo_logs=False)
    try:
        with set_current_client(client):
            ctx = ZephyrContext(
                client=client,
                max_workers=2,
                resources=ResourceConfig(cpu=1, ram="512m", disk="10g"),
                chunk_storage_prefix=str(tmp_path / "chunks"),
                name="sized",
                max_execution_retries=1,
            )
            with ctx:
                pipeline = Dataset.from_list([[1, 2], [3, 4], [5]]).flat_map(each).map(double)
                results = sorted(ctx.execute(pipeline).results)
    finally:
        client.shutdown()  # it connected this process to the module's Ray: disconnects it
        cloudpickle.unregister_pickle_by_value(sys.modules[__name__])
    assert results == [2, 4, 6, 8, 10]
    backend.after_run()
