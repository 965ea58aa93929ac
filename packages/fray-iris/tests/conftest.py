"""The in-process Iris cluster every fray-iris test runs against.

One real ``LocalCluster`` (controller, autoscaler, fake GCP "VMs" as worker threads, tasks as
child processes) is started per test session from ``iris_cluster.yaml``: a CPU group, fake
TPU groups (single-VM v5litepod-4, 4-VM v5litepod-16, 2-VM v4-16) and a fake H100 group.

Two settings apply to this in-process cluster only, for the session, and are undone at
teardown; no fray_iris code does either:

* the controller's 14-day client-freshness check is turned off (every published marin-iris
  wheel is rejected 14 days after its build date, even by a cluster in the same process);
* the controller reconciles every 0.1 s instead of every second, so a job round trip takes
  a fraction of a second and the suite stays within its CI budget.

HOME (Iris keeps its token store in ``~/.iris``) and TMPDIR (the cluster's state and the
workers' folders) point into the session's temporary folder, which is removed afterwards;
teardown checks that no process started by the tests is left.
"""

from __future__ import annotations

import datetime
import functools
import logging
import os
import tempfile
import time
import warnings
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

CLUSTER_CONFIG = Path(__file__).with_name("iris_cluster.yaml")


class IrisCluster:
    """A running in-process Iris cluster."""

    def __init__(self, url: str, root: Path) -> None:
        self.url = url
        self.root = root
        self.results_url = f"file://{root / 'results'}"

    @property
    def address(self) -> str:
        """``host:port`` of the controller (the form ``iris://`` specs take)."""
        return self.url.split("://", 1)[1]


def _import_cluster_modules() -> None:
    with warnings.catch_warnings():
        # The wheel imports starlette.middleware.wsgi, which warns on import.
        warnings.simplefilter("ignore")
        import iris.cluster.backends.local.cluster
        import iris.cluster.config
        import iris.cluster.controller.service  # noqa: F401


@pytest.fixture(scope="session")
def iris_cluster() -> Iterator[IrisCluster]:
    """Starts the cluster once per session; stops it and checks nothing is left behind."""
    _import_cluster_modules()
    import iris.cluster.backends.local.cluster as local_cluster
    import iris.cluster.controller.service as controller_service
    from iris.cluster.config import load_config, make_local_config
    from rigging.timing import Duration

    root = Path(tempfile.mkdtemp(prefix="fray-iris-test-"))
    (root / "home").mkdir()
    (root / "tmp").mkdir()
    (root / "results").mkdir(mode=0o700)
    for name in ("iris", "finelog", "uvicorn"):
        logging.getLogger(name).setLevel(logging.WARNING)
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    patch = pytest.MonkeyPatch()
    patch.setenv("HOME", str(root / "home"))
    patch.setenv("TMPDIR", str(root / "tmp"))
    patch.setenv("JAX_PLATFORMS", "cpu")
    patch.delenv("FRAY_CLIENT_SPEC", raising=False)
    patch.delenv("FRAY_JOB_ID", raising=False)
    patch.setattr(tempfile, "tempdir", str(root / "tmp"))
    patch.setattr(controller_service, "FRESHNESS_WINDOW", datetime.timedelta(days=365_000))
    patch.setattr(
        local_cluster,
        "ControllerConfig",
        functools.partial(local_cluster.ControllerConfig, poll_interval=Duration.from_seconds(0.1)),
    )
    cluster = local_cluster.LocalCluster(make_local_config(load_config(str(CLUSTER_CONFIG))))
    try:
        url = cluster.start()
        yield IrisCluster(url, root)
    finally:
        cluster.close()
        patch.undo()
        _wait_for_no_new_processes(before)
        import shutil

        shutil.rmtree(root, ignore_errors=True)


def _wait_for_no_new_processes(before: set[int]) -> None:
    deadline = time.monotonic() + 30
    while True:
        left = [
            p
            for p in psutil.Process().children(recursive=True)
            if p.pid not in before and p.is_running() and p.status() != psutil.STATUS_ZOMBIE
        ]
        if not left:
            return
        if time.monotonic() > deadline:
            raise AssertionError(
                f"processes left behind by the Iris tests: {[(p.pid, p.cmdline()) for p in left]}"
            )
        time.sleep(0.1)  # polling interval of a bounded wait


@pytest.fixture
def iris_client(iris_cluster: IrisCluster) -> Iterator[object]:
    """A fresh fray IrisClient on the session cluster, shut down after the test."""
    from fray_iris import IrisClient

    client = IrisClient(iris_cluster.url, results_url=iris_cluster.results_url)
    yield client
    client.shutdown()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Iris's process runtime drops the pipes of finished tasks without closing them; the
    resulting ResourceWarnings surface (via garbage collection) in whichever test runs next.
    Only this package's tests, which run that cluster, ignore them."""
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(
                pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
            )
            item.add_marker(pytest.mark.filterwarnings("ignore::ResourceWarning"))


def pytest_configure(config: pytest.Config) -> None:
    del config
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
