# pyright: standard
"""Finding complete TPU slices on the cluster, claiming them, and letting them go.

Slices are discovered from the live nodes' ``ray.io/tpu-*`` labels (Ray sets them on every
TPU VM, real or fake): a slice is usable only when all of its VMs are alive. Claiming a
slice starts one host actor per VM, pinned to that VM, holding the slice's resources: the
``TPU-<type>-head`` resource on worker 0 and ``{<slice-name>: 1}`` on every VM, so that no
other gang can take it meanwhile, plus what the user's code needs on the VM (it runs inside
the host actor). Letting the gang go kills the host actors.
"""

from __future__ import annotations

import contextlib
import secrets
import time
from dataclasses import dataclass, field
from typing import Any

import ray
from ray import exceptions as rx
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from fray.topology import TpuTopology, canonical_tpu_name
from fray_tpu.ray._host import TpuHost
from fray_tpu.ray._util import rget
from fray_tpu.ray.errors import actor_is_dead

__all__ = [
    "ClaimStopped",
    "ClaimTimeout",
    "Gang",
    "HostOptions",
    "HostSetupError",
    "SliceView",
    "claim_gang",
    "discover_slices",
]

_SLICE_LABEL = "ray.io/tpu-slice-name"
_WORKER_LABEL = "ray.io/tpu-worker-id"
_POD_TYPE_LABEL = "ray.io/tpu-pod-type"

# How long host actors whose runtime env must be built (pip, working_dir, ...) may take to
# come up: building it is not waiting for slices, so the scheduling deadline does not cut it.
_RUNTIME_ENV_SETUP_WINDOW_S = 900.0
_CLAIM_POLL_S = 0.2  # between looks at the cluster while waiting for free slices
_RELEASE_POLL_S = 0.05  # between looks while a torn-down gang's resources are released
# Resources still taken this long after their actors died belong to someone else by now.
_TAKEN_AFTER_DEATH_S = 2.0


@dataclass(frozen=True)
class HostOptions:
    """What every host actor of a gang gets besides the slice's own resources.

    Attributes:
        settings: ``GCE_METADATA_HOST`` / ``FRAY_TPU_LIBTPU_LOCKFILE`` from the job's env.
        state: The job's state actor (output lines, preemption reports).
        health_interval_s: How often each host asks the metadata server about preemption.
        num_cpus: CPUs the user's code needs on each host.
        memory: Memory in bytes the user's code needs on each host (``None``: no claim).
        resources: ``{"TPU": chips_per_vm}`` plus the user's custom resources.
        runtime_env: The user's Ray runtime env (``None``: the cluster's own).
    """

    settings: dict[str, str]
    state: Any
    health_interval_s: float
    num_cpus: float = 0.0
    memory: int | None = None
    resources: dict[str, float] = field(default_factory=dict)
    runtime_env: dict[str, Any] | None = None


@dataclass
class SliceView:
    """A slice as the cluster shows it now: its live VMs by worker id."""

    name: str
    tpu_type: str
    hosts: dict[int, dict[str, Any]] = field(default_factory=dict)  # worker id -> node
    free: bool = True

    def complete(self, vm_count: int) -> bool:
        return sorted(self.hosts) == list(range(vm_count))


@dataclass
class Gang:
    """Claimed slices: per slice, its host actors and their info, ordered by worker id.

    ``token`` names this gang in the hosts' preemption reports to the job's state actor.
    """

    slices: list[str]
    hosts: list[list[Any]]
    infos: list[list[dict[str, Any]]]
    token: str = ""
    held: list[tuple[str, str]] = field(default_factory=list)  # (node id, resource) pairs

    def all_hosts(self) -> list[tuple[int, int, Any, dict[str, Any]]]:
        return [
            (s, w, actor, self.infos[s][w])
            for s in range(len(self.slices))
            for w, actor in enumerate(self.hosts[s])
        ]

    def teardown(self, release_timeout: float = 10.0) -> None:
        """Kills every host actor (and the user's code running in it), then waits, up to
        ``release_timeout``, until the cluster shows the slices' resources free again (or
        their VMs gone), so that a claim that follows, this job's or another's, counts them.

        The wait ends early when the actors are dead but their resources still look taken
        for a while: another gang has claimed the slices since.
        """
        actors = [actor for row in self.hosts for actor in row]
        for actor in actors:
            with contextlib.suppress(Exception):
                ray.kill(actor, no_restart=True)
        deadline = time.monotonic() + release_timeout
        dead_since: float | None = None
        alive = list(actors)
        while self.held and time.monotonic() < deadline:
            available = _available_per_node()
            if available is None:
                return
            self.held = [
                (node, key)
                for node, key in self.held
                if node in available and available[node].get(key, 0) < 1
            ]
            if not self.held:
                return
            if dead_since is None:
                alive = [actor for actor in alive if not actor_is_dead(actor)]
                if not alive:
                    dead_since = time.monotonic()
            elif time.monotonic() - dead_since > _TAKEN_AFTER_DEATH_S:
                return
            time.sleep(_RELEASE_POLL_S)


class ClaimTimeout(Exception):
    """Not enough complete, free slices appeared before the deadline."""


class HostSetupError(Exception):
    """The host actors could not start because the user's runtime env failed to build.

    Attributes:
        placement: Where the gang would have run (slice, worker, node id, IP per host).
    """

    def __init__(self, message: str, placement: list[dict[str, Any]]) -> None:
        super().__init__(message)
        self.placement = placement


def _available_per_node() -> dict[str, dict[str, float]] | None:
    """Free resources of every live node (``None`` if Ray cannot say)."""
    try:
        from ray._private import state as ray_state  # a DeveloperAPI, stable since Ray 2.0

        return ray_state.available_resources_per_node()
    except Exception:
        return None


def _node_start_times() -> dict[str, int]:
    """When GCS registered each node (ms since the epoch), by hex id; empty if Ray cannot say.

    ``ray.nodes()`` does not carry it; the GCS client does (a private API, read only here).
    """
    try:
        from ray._private.worker import global_worker

        gcs: Any = getattr(global_worker, "gcs_client")  # noqa: B009 (untyped in Ray)
        infos = gcs.get_all_node_info()
        return {node_id.hex(): int(info.start_time_ms) for node_id, info in infos.items()}
    except Exception:
        return {}


def discover_slices(topology: TpuTopology) -> dict[str, SliceView]:
    """Live slices of ``topology``'s type, from the nodes' labels.

    A preempted VM that comes back is a new Ray node with the same slice name and worker id,
    and GCS may list the old node as alive for a while yet (until its health checks fail).
    A worker id can be one VM only, so when two live nodes claim it, the one GCS registered
    last is the VM and the other is ignored, its resources too (they stay held by the host
    actor that died with it). If Ray cannot say which came last, the slice counts as in use
    until GCS has declared the old node dead.
    """
    available = _available_per_node() or {}
    head_key = f"TPU-{topology.name}-head"
    claims: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for node in ray.nodes():
        if not node.get("Alive"):
            continue
        labels = node.get("Labels") or {}
        name = labels.get(_SLICE_LABEL)
        pod_type = labels.get(_POD_TYPE_LABEL)
        worker = labels.get(_WORKER_LABEL)
        if not name or not pod_type or worker is None:
            continue
        try:
            if canonical_tpu_name(pod_type) != topology.name:
                continue
            worker_id = int(worker)
        except ValueError:
            continue
        claims.setdefault((name, worker_id), []).append(node)
    started = _node_start_times() if any(len(c) > 1 for c in claims.values()) else {}
    slices: dict[str, SliceView] = {}
    for (name, worker_id), nodes in sorted(claims.items()):
        view = slices.setdefault(name, SliceView(name, topology.name))
        ids = [node["NodeID"] for node in nodes]
        if len(nodes) > 1 and not all(i in started for i in ids):
            view.free = False  # which node is the VM now is unknown until GCS settles it
        node = max(nodes, key=lambda n: started.get(n["NodeID"], 0))
        view.hosts[worker_id] = {"node_id": node["NodeID"], "ip": node.get("NodeManagerAddress")}
        node_free = available.get(node["NodeID"])
        if node_free is not None:
            if node_free.get(name, 0) < 1:
                view.free = False
            if worker_id == 0 and node_free.get(head_key, 0) < 1:
                view.free = False
    return slices


def describe_slices(topology: TpuTopology, slices: dict[str, SliceView]) -> str:
    """Human summary of what the cluster has, for scheduling errors."""
    if not slices:
        return f"the cluster has no {topology.name} slice (no live node labelled as one)"
    parts = []
    for view in sorted(slices.values(), key=lambda v: v.name):
        state = "complete" if view.complete(topology.vm_count) else "incomplete"
        busy = "free" if view.free else "in use"
        parts.append(
            f"{view.name} ({len(view.hosts)}/{topology.vm_count} VMs alive, {state}, {busy})"
        )
    complete = sum(v.complete(topology.vm_count) for v in slices.values())
    return f"the cluster has {complete} complete {topology.name} slice(s): " + ", ".join(parts)


def claim_gang(
    topology: TpuTopology,
    allowed: tuple[int, ...],
    *,
    deadline: float | None,
    host: HostOptions,
    should_stop: Any,
    claim_window_s: float = 60.0,
) -> Gang:
    """Claims the largest allowed number of complete, free slices.

    Waits (polling the cluster) until enough appear; a slice whose hosts do not all come up
    within ``claim_window_s`` is skipped on the next try.

    Raises:
        ClaimTimeout: ``deadline`` (monotonic) passed first; the message says what exists.
        ClaimStopped: The job was asked to stop meanwhile.
        HostSetupError: The user's runtime env could not be built on a host.
    """
    skipped: set[str] = set()
    while True:
        if should_stop():
            raise ClaimStopped
        slices = discover_slices(topology)
        usable = sorted(
            v.name
            for v in slices.values()
            if v.complete(topology.vm_count) and v.free and v.name not in skipped
        )
        fits = [n for n in allowed if n <= len(usable)]
        if fits:
            count = max(fits)
            chosen = [slices[name] for name in usable[:count]]
            gang, bad = _start_hosts(topology, chosen, host, deadline, claim_window_s)
            if gang is not None:
                return gang
            skipped.update(bad)
        now = time.monotonic()
        if deadline is not None and now >= deadline:
            wanted = (
                str(allowed[0]) if len(allowed) == 1 else "one of " + "/".join(map(str, allowed))
            )
            raise ClaimTimeout(
                f"asked for {wanted} slice(s) of {topology.name} ({topology.vm_count} VM(s) x "
                f"{topology.chips_per_vm} chips each, resource TPU-{topology.name}-head per "
                f"slice); {describe_slices(topology, discover_slices(topology))}"
            )
        time.sleep(_CLAIM_POLL_S if not skipped else 1.0)
        if len(skipped) and not fits:
            skipped.clear()  # give slices that were slow to come up another chance


class ClaimStopped(Exception):
    """The job was asked to stop while waiting for slices."""


def _start_hosts(
    topology: TpuTopology,
    chosen: list[SliceView],
    host: HostOptions,
    deadline: float | None,
    claim_window_s: float,
) -> tuple[Gang | None, set[str]]:
    head_key = f"TPU-{topology.name}-head"
    token = secrets.token_hex(8)
    hosts: list[list[Any]] = []
    for view in chosen:
        row = []
        for worker in range(topology.vm_count):
            resources = dict(host.resources)
            resources[view.name] = 1.0
            if worker == 0:
                resources[head_key] = 1.0
            node_id = view.hosts[worker]["node_id"]
            options: dict[str, Any] = {
                "num_cpus": host.num_cpus,
                "num_gpus": 0,
                "resources": resources,
                "scheduling_strategy": NodeAffinitySchedulingStrategy(node_id, soft=False),
                "runtime_env": host.runtime_env or None,
            }
            if host.memory:
                options["memory"] = host.memory
            row.append(
                TpuHost.options(**options).remote(
                    view.name, worker, host.settings, host.state, token, host.health_interval_s
                )
            )
        hosts.append(row)
    if host.runtime_env:
        window = max(claim_window_s, _RUNTIME_ENV_SETUP_WINDOW_S)
    else:
        window = claim_window_s
        if deadline is not None:
            window = max(min(window, deadline - time.monotonic()), 1.0)
    refs = [[actor.info.remote() for actor in row] for row in hosts]
    flat = [ref for row in refs for ref in row]
    ready, _ = ray.wait(flat, num_returns=len(flat), timeout=window)
    ready_set = set(ready)
    bad: set[str] = set()
    setup_error: str | None = None
    infos: list[list[dict[str, Any]]] = []
    held: list[tuple[str, str]] = []  # what the hosts that came up hold, for teardown
    for view, row in zip(chosen, refs, strict=True):
        row_infos = []
        for worker, ref in enumerate(row):
            if ref not in ready_set:
                bad.add(view.name)
                continue
            try:
                info = rget(ref)
            except rx.RuntimeEnvSetupError as err:
                setup_error = setup_error or str(err)
                bad.add(view.name)
                continue
            except Exception:
                bad.add(view.name)
                continue
            row_infos.append(info)
            held.append((info["node_id"], view.name))
            if worker == 0:
                held.append((info["node_id"], head_key))
        infos.append(row_infos)
    gang = Gang([v.name for v in chosen], hosts, infos, token, held)
    if setup_error is not None:
        gang.teardown()
        placement = [
            {"slice": view.name, "worker": w, "node_id": node["node_id"], "ip": node["ip"]}
            for view in chosen
            for w, node in sorted(view.hosts.items())
        ]
        raise HostSetupError(f"runtime environment setup failed: {setup_error}", placement)
    if bad:
        gang.teardown(release_timeout=5.0)
        return None, bad
    return gang, set()
