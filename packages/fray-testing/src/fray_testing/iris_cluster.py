"""A real Iris cluster inside the test process, for tests (needs fray-iris, and on Python
3.12+ ``marin-iris[controller]``)::

    from fray_testing.iris_cluster import LocalIrisCluster

    with LocalIrisCluster(CONFIG_YAML) as cluster:
        client = IrisClient(cluster.url, results_url=cluster.results_url)
        ...

The controller, its autoscaler and fake VMs (worker threads) run in this process; tasks are
its child processes. It works with both lines of marin-iris fray-iris supports (0.2.20 on
Python 3.11, 0.2.227 on 3.12 and 3.13), and changes two things in this in-process cluster
only, undone on exit; no fray-iris code does either:

* the controller's 14-day client-freshness check is widened to ~1,000 years (on 0.2.20 it
  compares the client's build date with today, so every published wheel is rejected two
  weeks after its build, even by a cluster in the same process; 0.2.227 compares it with
  the controller's own build date and accepts its own wheel anyway);
* the controller reconciles every 0.1 s instead of every second, so a job round trip takes a
  fraction of a second.

HOME (Iris keeps tokens and credentials there) and TMPDIR (the cluster's state and the
workers' folders) point into a private temporary folder, removed on exit; on exit it also
waits for every process the cluster started to end, kills any that do not, and raises
``AssertionError`` naming them.
"""

# pyright: standard
# marin-iris ships no type information; this module is a thin adapter over it.

from __future__ import annotations

import datetime
import functools
import importlib
import logging
import shutil
import tempfile
import time
import warnings
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType, TracebackType
from typing import Any

import pytest

__all__ = ["LocalIrisCluster"]

_RECONCILE_S = 0.1
_FRESHNESS_WINDOW = datetime.timedelta(days=365_000)
_LEFTOVER_TIMEOUT_S = 60.0


def _first_module(*names: str) -> ModuleType:
    """The first of ``names`` that imports (the module moved between marin-iris lines)."""
    for name in names[:-1]:
        try:
            return importlib.import_module(name)
        except ImportError:
            continue
    return importlib.import_module(names[-1])


class LocalIrisCluster:
    """An in-process Iris cluster, started on ``__enter__`` and stopped on ``__exit__``.

    Args:
        config: The cluster's YAML (text, or a path to a file). It needs a top-level
            ``name:`` (other than ``local``) on marin-iris 0.2.227.
        env: More environment variables to set while the cluster runs (tasks inherit them).

    Attributes:
        url: The controller's URL (``http://127.0.0.1:PORT``), once started.
        root: The private folder (``home``, ``tmp``, ``results``).
        results_url: A ``file://`` folder for fray-iris's results store.
    """

    def __init__(self, config: str | Path, *, env: Mapping[str, str] | None = None) -> None:
        self._config = config
        self._env = dict(env or {})
        self.root = Path(tempfile.mkdtemp(prefix="fray-iris-cluster-"))
        self.results_url = f"file://{self.root / 'results'}"
        self.url = ""
        self._patch = pytest.MonkeyPatch()
        self._cluster: Any = None
        self._before: set[int] = set()

    @property
    def address(self) -> str:
        """``host:port`` of the controller (the form ``iris://`` specs take)."""
        return self.url.split("://", 1)[1]

    @property
    def spec(self) -> str:
        """The Fray client spec of this cluster (``iris://host:port``)."""
        return f"iris://{self.address}"

    def __enter__(self) -> LocalIrisCluster:
        import psutil

        for sub in ("home", "tmp"):
            (self.root / sub).mkdir()
        (self.root / "results").mkdir(mode=0o700)
        for name in ("iris", "finelog", "uvicorn", "rigging"):
            logging.getLogger(name).setLevel(logging.WARNING)
        self._before = {p.pid for p in psutil.Process().children(recursive=True)}
        patch = self._patch
        # Before the first import of Iris where possible: some of its folders are read from
        # HOME at import time (and patched below where Iris was imported already).
        patch.setenv("HOME", str(self.root / "home"))
        patch.setenv("TMPDIR", str(self.root / "tmp"))
        patch.setenv("JAX_PLATFORMS", "cpu")
        patch.delenv("FRAY_CLIENT_SPEC", raising=False)
        patch.delenv("FRAY_JOB_ID", raising=False)
        for key, value in self._env.items():
            patch.setenv(key, value)
        patch.setattr(tempfile, "tempdir", str(self.root / "tmp"))
        try:
            self._start()
        except BaseException:
            self._stop()
            raise
        return self

    def _start(self) -> None:
        with warnings.catch_warnings():
            # marin-iris 0.2.20 imports starlette.middleware.wsgi, which warns on import.
            warnings.simplefilter("ignore")
            local_cluster = _first_module(
                "iris.cluster.local_cluster",  # 0.2.227
                "iris.cluster.backends.local.cluster",  # 0.2.20
            )
            freshness = _first_module(
                "iris.cluster.controller.jobs",  # 0.2.227
                "iris.cluster.controller.service",  # 0.2.20
            )
            config_module = importlib.import_module("iris.cluster.config")
            timing = importlib.import_module("rigging.timing")
        patch = self._patch
        patch.setattr(freshness, "FRESHNESS_WINDOW", _FRESHNESS_WINDOW)
        patch.setattr(
            local_cluster,
            "ControllerConfig",
            functools.partial(
                local_cluster.ControllerConfig,
                poll_interval=timing.Duration.from_seconds(_RECONCILE_S),
            ),
        )
        try:  # 0.2.227 saves the cluster's admin credentials under ~/.config/marin
            credentials = importlib.import_module("rigging.credential_store")
        except ImportError:
            pass
        else:
            if hasattr(credentials, "_CREDENTIALS_DIR"):
                folder = self.root / "home" / ".config" / "marin" / "credentials"
                patch.setattr(credentials, "_CREDENTIALS_DIR", folder)
        path = Path(self._config) if isinstance(self._config, Path) else None
        if path is None:
            path = self.root / "cluster.yaml"
            path.write_text(str(self._config))
        config = config_module.make_local_config(config_module.load_config(str(path)))
        self._cluster = local_cluster.LocalCluster(config)
        self.url = self._cluster.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._stop()

    def _stop(self) -> None:
        import psutil

        try:
            if self._cluster is not None:
                self._cluster.close()
                self._cluster = None
        finally:
            self._patch.undo()
            deadline = time.monotonic() + _LEFTOVER_TIMEOUT_S
            left = [
                p for p in psutil.Process().children(recursive=True) if p.pid not in self._before
            ]
            while any(_alive(p) for p in left) and time.monotonic() < deadline:
                time.sleep(0.1)  # polling interval of a bounded wait
            alive = [p for p in left if _alive(p)]
            for proc in alive:
                proc.kill()
            shutil.rmtree(self.root, ignore_errors=True)
        if alive:
            raise AssertionError(
                f"processes left behind by the Iris cluster: {[p.pid for p in alive]}"
            )


def _alive(proc: Any) -> bool:
    import psutil

    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False
