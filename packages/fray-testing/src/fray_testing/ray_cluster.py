"""A private multi-node Ray cluster on this machine, for tests (needs ``fray-testing[ray]``).

Every node is a separate raylet started by :class:`ray.cluster_utils.Cluster`; resources are
logical, so a 2-core laptop can pose as a cluster of big TPU hosts::

    from fray_testing.ray_cluster import LocalRayCluster

    with LocalRayCluster(head_cpus=4, head_resources={"head_node": 1}) as cluster:
        cluster.add_tpu_slice("v4-16", name="slice-a")  # 2 fake hosts, 4 TPU chips each
        ray.init(address=cluster.address)
        ...

The cluster is isolated from any other Ray on the machine: it lives under a private, short
``RAY_TMPDIR`` (created for it and deleted afterwards), ``RAY_ADDRESS`` is unset while it runs,
and it never calls ``ray stop``. Its workers run at normal priority (not Ray's niceness 15), so
that a busy machine slows them no more than the test itself. On exit it disconnects the
driver, removes every node, kills whatever process of its own is left (collected from the
raylet and GCS process trees before they go) and raises :class:`LeftoverProcessesError` if it
had to.
"""

# pyright: standard
# Ray's cluster utilities are untyped; this module is a thin adapter over them.

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import socket
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import psutil
    from ray._private.node import Node

__all__ = ["TPU_HOST_ENV_KEYS", "LeftoverProcessesError", "LocalRayCluster"]

TPU_HOST_ENV_KEYS = ("TPU_NAME", "TPU_WORKER_ID", "TPU_ACCELERATOR_TYPE", "TPU_TOPOLOGY")
"""Env vars a real TPU VM's Ray node reads to find its slice; fake hosts get them set."""

_GIB = 1 << 30
_MIB = 1 << 20
_NICENESS = "RAY_worker_niceness"  # Ray's config: the niceness of the worker processes it starts

# GCS notices a dead raylet after period x threshold; Ray's default is about 15 s. Tests that
# kill nodes want the failure seen in a couple of seconds.
_FAST_FAILURE_DETECTION: dict[str, Any] = {
    "health_check_initial_delay_ms": 1000,
    "health_check_period_ms": 500,
    "health_check_timeout_ms": 500,
    "health_check_failure_threshold": 4,
}

# Topology strings for the fake hosts' TPU_TOPOLOGY (Ray reads them into node labels); the
# sizes themselves come from fray's TPU database.
_TOPOLOGY_HINTS = {"v4-8": "2x2x1", "v4-16": "2x2x2", "v4-32": "2x2x4", "v4-64": "2x4x4"}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


_NODE_TAG = "FRAY_TESTING_RAY_NODE_TAG"


@dataclass(frozen=True)
class _FakeHost:
    """How every host of one fake TPU slice is started."""

    tpu_type: str
    vm_count: int
    chips_per_vm: int
    num_cpus: float
    memory: int
    env: dict[str, str]


class LeftoverProcessesError(RuntimeError):
    """Processes of the cluster outlived its shutdown (they have been killed since)."""


@contextlib.contextmanager
def _patched_env(updates: Mapping[str, str | None]) -> Iterator[None]:
    """Sets (or, for ``None``, removes) env vars in this process, then restores them."""
    saved = {key: os.environ.get(key) for key in updates}
    try:
        for key, value in updates.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


class LocalRayCluster:
    """A Ray head plus any number of extra nodes, all on this machine, torn down on exit.

    Args:
        head_cpus: Logical CPUs of the head node.
        head_resources: Custom resources of the head node (e.g. ``{"head_node": 1}``).
        dashboard: Start the dashboard (needed only for the Ray Jobs API).
        head_memory: Logical memory of the head node in bytes (Ray's default if ``None``).
        object_store_memory: Object store size of each node, in bytes.
        system_config: Ray ``_system_config`` overrides; by default, dead nodes are detected
            within about 3 s instead of Ray's 15 s.
        propagate_sys_path: Give every node this process's ``sys.path`` as ``PYTHONPATH`` so
            that workers can import the functions a test defines.
    """

    def __init__(
        self,
        head_cpus: float = 4,
        head_resources: Mapping[str, float] | None = None,
        dashboard: bool = False,
        *,
        head_memory: int | None = None,
        object_store_memory: int = 80 * _MIB,
        system_config: Mapping[str, Any] | None = None,
        propagate_sys_path: bool = True,
    ) -> None:
        self._head_cpus = head_cpus
        self._head_resources = dict(head_resources or {})
        self._dashboard = dashboard
        self._head_memory = head_memory
        self._object_store_memory = object_store_memory
        self._system_config = dict(
            _FAST_FAILURE_DETECTION if system_config is None else system_config
        )
        self._propagate_sys_path = propagate_sys_path
        self._cluster: Any = None
        self._root: str | None = None
        self._saved_env: dict[str, str | None] = {}
        self._tracked: dict[int, psutil.Process] = {}
        self.slices: dict[str, list[Node]] = {}
        """Fake TPU slices added so far: name -> nodes, index = TPU worker id (the latest
        node of each host: :meth:`restore_tpu_host` replaces a killed one)."""
        self._slice_hosts: dict[str, _FakeHost] = {}  # slice name -> how its hosts start
        self._slice_counter = 0

    # -- lifecycle -------------------------------------------------------------------------

    def __enter__(self) -> LocalRayCluster:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.shutdown(raise_on_leftovers=exc is None)

    def start(self) -> None:
        """Starts the head node (private ``RAY_TMPDIR``, ``RAY_ADDRESS`` unset)."""
        if self._cluster is not None:
            raise RuntimeError("this LocalRayCluster is already started")
        from ray.cluster_utils import Cluster

        # Short: Ray's unix socket paths must stay under 108 bytes.
        self._root = tempfile.mkdtemp(prefix="frc-", dir="/tmp")
        os.makedirs(os.path.join(self._root, "ray"))
        self._saved_env = {
            key: os.environ.get(key) for key in ("RAY_TMPDIR", "RAY_ADDRESS", _NICENESS)
        }
        os.environ["RAY_TMPDIR"] = self._root
        os.environ.pop("RAY_ADDRESS", None)
        # Ray starts workers at niceness 15: beside any busy process of normal priority (a
        # loaded CI machine) they get a few percent of a core, and a test then waits on
        # starved workers. Every raylet of this cluster inherits this, so its workers (and
        # fake TPU hosts) run at the machine's normal priority.
        os.environ[_NICENESS] = "0"
        head_args: dict[str, Any] = {
            "num_cpus": self._head_cpus,
            "resources": self._head_resources,
            "include_dashboard": self._dashboard,
            "object_store_memory": self._object_store_memory,
            # Never the default 8265: other clusters on this machine may hold it.
            "dashboard_port": _free_port(),
        }
        if self._head_memory is not None:
            head_args["memory"] = self._head_memory
        if self._system_config:
            head_args["_system_config"] = self._system_config
        attempts = 2  # a loaded machine sometimes misses Ray's fixed 30 s start-up window
        for attempt in range(1, attempts + 1):
            try:
                # The head must not pose as a TPU host even if this machine's env says so.
                with self._node_env({key: None for key in TPU_HOST_ENV_KEYS}):
                    self._cluster = Cluster(
                        initialize_head=True, head_node_args=head_args, shutdown_at_exit=True
                    )
                break
            except BaseException as err:
                # Ray leaves the half-started head's processes running: find them by the
                # private RAY_TMPDIR they inherited.
                self._reap_by_root(grace_s=5.0)
                if attempt < attempts and isinstance(err, Exception):
                    continue
                self._restore_env()
                shutil.rmtree(self._root, ignore_errors=True)
                self._root = None
                raise

    @property
    def address(self) -> str:
        """The GCS address to pass to ``ray.init(address=...)``."""
        return str(self._require().address)

    @property
    def temp_root(self) -> str:
        """The private directory the cluster lives in (its ``RAY_TMPDIR``)."""
        assert self._root is not None
        return self._root

    @property
    def head_node(self) -> Node:
        """The head node."""
        return self._require().head_node

    def connect(self, namespace: str | None = None, **init_kwargs: Any) -> None:
        """``ray.init`` this process to the cluster (``log_to_driver`` off unless given)."""
        import ray

        init_kwargs.setdefault("log_to_driver", False)
        ray.init(address=self.address, namespace=namespace, **init_kwargs)

    # -- nodes -----------------------------------------------------------------------------

    def add_node(
        self,
        num_cpus: float = 1,
        resources: Mapping[str, float] | None = None,
        env: Mapping[str, str] | None = None,
        *,
        memory: int | None = None,
        labels: Mapping[str, str] | None = None,
        wait: bool = True,
    ) -> Node:
        """Starts one more raylet.

        Args:
            num_cpus: Logical CPUs (may exceed the machine's).
            resources: Custom resources.
            env: Env vars of the node's processes (set in this process around the start only;
                the raylet and its workers inherit them).
            memory: Logical memory in bytes (Ray's default if ``None``).
            labels: Node labels.
            wait: Wait until GCS lists the node.

        Returns:
            The node, for :meth:`kill_node`.
        """
        cluster = self._require()
        args: dict[str, Any] = {
            "num_cpus": num_cpus,
            "resources": dict(resources or {}),
            "object_store_memory": self._object_store_memory,
        }
        if memory is not None:
            args["memory"] = memory
        if labels:
            args["labels"] = dict(labels)
        attempts = 2  # a loaded machine sometimes misses Ray's fixed 30 s start-up window
        for attempt in range(1, attempts + 1):
            # Every process of the node inherits the tag, so a failed start can be cleaned up.
            tag = secrets.token_hex(8)
            with self._node_env({**(env or {}), _NODE_TAG: tag}):
                try:
                    node = cluster.add_node(wait=wait, **args)
                except Exception:
                    _kill_all(_with_env(_NODE_TAG, tag))
                    if attempt == attempts:
                        raise
                    continue
            self._track(node)
            return node
        raise AssertionError("unreachable")

    def add_tpu_slice(
        self,
        tpu_type: str,
        name: str | None = None,
        *,
        num_cpus: float | None = None,
        memory: int | None = None,
        env: Mapping[str, str] | None = None,
    ) -> list[Node]:
        """Adds one fake TPU slice: a raylet per VM that Ray takes for a TPU host.

        Each host gets ``TPU_NAME``, ``TPU_WORKER_ID``, ``TPU_ACCELERATOR_TYPE`` and
        ``TPU_TOPOLOGY`` and ``{"TPU": chips_per_vm}``; from those Ray itself adds the
        resources ``{<name>: 1}`` on every host and ``TPU-<type>-head: 1`` on worker 0, and
        the ``ray.io/tpu-*`` node labels, exactly as on a real slice. Logical CPUs and memory
        are generous so that jobs asking for a real host's share fit.

        Args:
            tpu_type: A TPU type from fray's database, e.g. ``"v4-16"``.
            name: The slice name (``TPU_NAME``); a fresh one if ``None``.
            num_cpus: Logical CPUs per host; default: a real host VM's of the family
                (``fray.topology.TPU_HOST_RESOURCES``), so ``with_tpu``'s defaults fit.
            memory: Logical memory per host, in bytes; default: a real host VM's.
            env: Extra env vars for every host of the slice.

        Returns:
            The hosts, index = TPU worker id.
        """
        from fray.topology import TPU_HOST_RESOURCES, get_tpu_topology, tpu_family

        topology = get_tpu_topology(tpu_type)
        host = TPU_HOST_RESOURCES[tpu_family(topology.name)]
        if num_cpus is None:
            num_cpus = host.cpu
        if memory is None:
            memory = host.ram_gb * 10**9
        if name is None:
            self._slice_counter += 1
            name = f"fake-{topology.name}-{self._slice_counter}"
        if name in self.slices:
            raise ValueError(f"a slice named {name!r} was already added")
        fake = _FakeHost(
            topology.name,
            topology.vm_count,
            topology.chips_per_vm,
            num_cpus,
            memory,
            dict(env or {}),
        )
        # Start every host first and wait for them together: a raylet takes seconds to come up.
        nodes = [self._start_tpu_host(name, fake, worker) for worker in range(fake.vm_count)]
        for node in nodes:
            self._cluster._wait_for_node(node, timeout=60)
        self._slice_hosts[name] = fake
        self.slices[name] = nodes
        return nodes

    def restore_tpu_host(self, slice_name: str, worker_id: int) -> Node:
        """Brings a killed host of a fake slice back as a new node, as a preempted TPU VM
        returns: a new Ray node (new node id) with the same ``TPU_NAME`` and
        ``TPU_WORKER_ID``, so the same slice resources and ``ray.io/tpu-*`` labels.

        Args:
            slice_name: A slice from :meth:`add_tpu_slice`.
            worker_id: The TPU worker id of a host of that slice killed with
                :meth:`kill_node`.

        Returns:
            The new node, now also ``slices[slice_name][worker_id]``; it is up in GCS.

        Raises:
            ValueError: ``slice_name`` was never added, ``worker_id`` is not one of its
                hosts, or that host is still alive.
        """
        cluster = self._require()
        fake = self._slice_hosts.get(slice_name)
        if fake is None:
            known = ", ".join(sorted(self._slice_hosts)) or "none"
            raise ValueError(f"slice_name {slice_name!r} is not a fake slice here (added: {known})")
        if isinstance(worker_id, bool) or not isinstance(worker_id, int):
            raise ValueError(f"worker_id must be an int, got {worker_id!r}")
        if not 0 <= worker_id < fake.vm_count:
            raise ValueError(
                f"worker_id {worker_id} is not a host of {slice_name!r} ({fake.tpu_type} has "
                f"worker ids 0..{fake.vm_count - 1})"
            )
        if self.slices[slice_name][worker_id] in self.alive_nodes():
            raise ValueError(
                f"worker_id {worker_id} of {slice_name!r} is still alive; kill_node it first"
            )
        node = self._start_tpu_host(slice_name, fake, worker_id)
        cluster._wait_for_node(node, timeout=60)
        self.slices[slice_name][worker_id] = node
        return node

    def _start_tpu_host(self, name: str, fake: _FakeHost, worker: int) -> Node:
        """Starts (without waiting for it) worker ``worker`` of fake slice ``name``."""
        hint = _TOPOLOGY_HINTS.get(fake.tpu_type)
        host_env = {
            "TPU_NAME": name,
            "TPU_WORKER_ID": str(worker),
            "TPU_ACCELERATOR_TYPE": fake.tpu_type,
            **({"TPU_TOPOLOGY": hint} if hint else {}),
            **fake.env,
        }
        return self.add_node(
            num_cpus=fake.num_cpus,
            resources={"TPU": fake.chips_per_vm},
            env=host_env,
            memory=fake.memory,
            wait=False,
        )

    def node_id(self, node: Node) -> str:
        """The node's Ray id (hex), as ``ray.get_runtime_context().get_node_id()`` says."""
        return str(node.node_id)

    def kill_node(self, node: Node, *, preemption: bool = True) -> None:
        """Kills a node abruptly, as a lost VM would go.

        Args:
            node: A node from :meth:`add_node` or :meth:`add_tpu_slice`.
            preemption: First ask GCS to drain the node with reason PREEMPTION (best effort;
                Ray then reports its actors' deaths as preemptions), then kill it.
        """
        cluster = self._require()
        if preemption:
            with contextlib.suppress(Exception):
                from ray._raylet import GcsClient  # pyright: ignore[reportAttributeAccessIssue]
                from ray.core.generated import autoscaler_pb2

                reasons: Any = getattr(autoscaler_pb2, "DrainNodeReason")  # noqa: B009
                reason = reasons.Value("DRAIN_NODE_REASON_PREEMPTION")
                client = GcsClient(address=self.address)
                deadline_ms = int(time.time() * 1000) + 1000
                client.drain_node(self.node_id(node), reason, "fake preemption", deadline_ms)
        self._track(node)
        cluster.remove_node(node, allow_graceful=False)

    def alive_nodes(self) -> list[Node]:
        """The head and every node not killed."""
        return list(self._require().list_all_nodes())

    # -- teardown --------------------------------------------------------------------------

    def shutdown(self, *, raise_on_leftovers: bool = True, grace_s: float = 10.0) -> None:
        """Disconnects the driver, removes every node and deletes the temp root.

        Args:
            raise_on_leftovers: Raise :class:`LeftoverProcessesError` if some process of the
                cluster had to be killed because it outlived the shutdown.
            grace_s: How long processes get to exit by themselves.
        """
        leftovers: list[str] = []
        try:
            if self._cluster is not None:
                import ray

                for node in self._cluster.list_all_nodes():
                    self._track(node)
                if ray.is_initialized():
                    ray.shutdown()
                try:
                    self._cluster.shutdown()
                finally:
                    self._cluster = None
                leftovers = self._reap(grace_s)
                leftovers += self._reap_by_root(grace_s=1.0)
        finally:
            self._restore_env()
            if self._root is not None:
                shutil.rmtree(self._root, ignore_errors=True)
                # A worker that was still exiting may have recreated its session folder:
                # once nothing of the cluster runs, delete whatever came back.
                self._reap_by_root(grace_s=2.0)
                shutil.rmtree(self._root, ignore_errors=True)
                self._root = None
        if leftovers and raise_on_leftovers:
            raise LeftoverProcessesError(
                "these Ray processes outlived the cluster's shutdown and were killed: "
                + ", ".join(leftovers)
            )

    # -- internals -------------------------------------------------------------------------

    def _require(self) -> Any:
        if self._cluster is None:
            raise RuntimeError("the LocalRayCluster is not running (use it as a context manager)")
        return self._cluster

    def _restore_env(self) -> None:
        for key, value in self._saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        self._saved_env = {}

    def _node_env(self, env: Mapping[str, str | None]) -> contextlib.AbstractContextManager[None]:
        updates: dict[str, str | None] = {}
        if self._propagate_sys_path:
            paths = [p for p in sys.path if p and os.path.isdir(p)]
            if os.environ.get("PYTHONPATH"):
                paths.append(os.environ["PYTHONPATH"])
            updates["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
        updates.update(env)
        return _patched_env(updates)

    def _track(self, node: Node) -> None:
        """Remembers the node's processes and their descendants (agents rename themselves,
        so they cannot be found by name once their parents are gone)."""
        import psutil

        for infos in getattr(node, "all_processes", {}).values():
            for info in infos:
                pid = getattr(info.process, "pid", None)
                if pid is None:
                    continue
                try:
                    root = psutil.Process(pid)
                    found = [root, *root.children(recursive=True)]
                except psutil.Error:
                    continue
                for proc in found:
                    self._tracked.setdefault(proc.pid, proc)

    def _reap_by_root(self, grace_s: float) -> list[str]:
        """Kills processes still running from this cluster's temp root; returns them."""
        import psutil

        if self._root is None:
            return []
        found = [p for p in _with_env("RAY_TMPDIR", self._root) if _running(p)]
        if found:
            _gone, found = psutil.wait_procs(found, timeout=grace_s)
        leftovers: list[str] = []
        for proc in found:
            with contextlib.suppress(psutil.Error):
                leftovers.append(f"{proc.pid} ({proc.name()})")
                proc.kill()
        if found:
            psutil.wait_procs(found, timeout=5)
        return leftovers

    def _reap(self, grace_s: float) -> list[str]:
        import psutil

        alive = [p for p in self._tracked.values() if _running(p)]
        if alive:
            _gone, alive = psutil.wait_procs(alive, timeout=grace_s)
        leftovers: list[str] = []
        for proc in alive:
            if not _running(proc):
                continue
            with contextlib.suppress(psutil.Error):
                leftovers.append(f"{proc.pid} ({proc.name()})")
                proc.kill()
        if alive:
            psutil.wait_procs(alive, timeout=5)
        self._tracked = {}
        return leftovers


def _with_env(name: str, value: str) -> list[psutil.Process]:
    """This user's other processes whose environment has ``name=value``."""
    import psutil

    found: list[psutil.Process] = []
    me = os.getpid()
    for proc in psutil.process_iter():
        if proc.pid == me:
            continue
        try:
            if proc.environ().get(name) == value:
                found.append(proc)
        except psutil.Error:
            continue
    return found


def _kill_all(procs: list[psutil.Process]) -> None:
    import psutil

    for proc in procs:
        with contextlib.suppress(psutil.Error):
            proc.kill()
    psutil.wait_procs(procs, timeout=5)


def _running(proc: psutil.Process) -> bool:
    import psutil

    try:
        # is_running() also checks the pid was not reused by another process.
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False
