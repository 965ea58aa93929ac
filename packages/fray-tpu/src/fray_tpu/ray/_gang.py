# pyright: standard
"""Finding complete TPU slices on the cluster, claiming them, and letting them go.

Slices are discovered from the live nodes' ``ray.io/tpu-*`` labels (Ray sets them on every
TPU VM, real or fake): a slice is usable only when all of its VMs are alive. Claiming a
slice starts one host actor per VM, pinned to that VM, holding the slice's resources: the
``TPU-<type>-head`` resource on worker 0 and ``{<slice-name>: 1}`` on every VM, so that no
other gang can take it meanwhile.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field
from typing import Any

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from fray._tpu import TpuTopology, canonical_tpu_name
from fray_tpu.ray._host import TpuHost
from fray_tpu.ray._util import rget

__all__ = ["ClaimStopped", "ClaimTimeout", "Gang", "SliceView", "claim_gang", "discover_slices"]

_SLICE_LABEL = "ray.io/tpu-slice-name"
_WORKER_LABEL = "ray.io/tpu-worker-id"
_POD_TYPE_LABEL = "ray.io/tpu-pod-type"


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
    """Claimed slices: per slice, its host actors and their info, ordered by worker id."""

    slices: list[str]
    hosts: list[list[Any]]
    infos: list[list[dict[str, Any]]]

    def all_hosts(self) -> list[tuple[int, int, Any, dict[str, Any]]]:
        return [
            (s, w, actor, self.infos[s][w])
            for s in range(len(self.slices))
            for w, actor in enumerate(self.hosts[s])
        ]

    def teardown(self, timeout: float = 15.0) -> None:
        """Stops every host's task, then kills the host actors (releasing the slices)."""
        actors = [actor for row in self.hosts for actor in row]
        stops = []
        for actor in actors:
            with contextlib.suppress(Exception):
                stops.append(actor.stop.remote())
        if stops:
            with contextlib.suppress(Exception):
                ray.wait(stops, num_returns=len(stops), timeout=timeout)
        for actor in actors:
            with contextlib.suppress(Exception):
                ray.kill(actor, no_restart=True)


class ClaimTimeout(Exception):
    """Not enough complete, free slices appeared before the deadline."""


def discover_slices(topology: TpuTopology) -> dict[str, SliceView]:
    """Live slices of ``topology``'s type, from the nodes' labels."""
    slices: dict[str, SliceView] = {}
    try:
        from ray._private import state as ray_state  # a DeveloperAPI, stable since Ray 2.0

        available: dict[str, dict[str, float]] = ray_state.available_resources_per_node()
    except Exception:
        available = {}
    head_key = f"TPU-{topology.name}-head"
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
        view = slices.setdefault(name, SliceView(name, topology.name))
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
    settings: dict[str, str],
    should_stop: Any,
    claim_window_s: float = 60.0,
) -> Gang:
    """Claims the largest allowed number of complete, free slices.

    Waits (polling the cluster) until enough appear; a slice whose hosts do not all come up
    within ``claim_window_s`` is skipped on the next try.

    Raises:
        ClaimTimeout: ``deadline`` (monotonic) passed first; the message says what exists.
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
            gang, bad = _start_hosts(topology, chosen, settings, deadline, claim_window_s)
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
        time.sleep(0.5 if not skipped else 1.0)
        if len(skipped) and not fits:
            skipped.clear()  # give slices that were slow to come up another chance


class ClaimStopped(Exception):
    """The job was asked to stop while waiting for slices."""


def _start_hosts(
    topology: TpuTopology,
    chosen: list[SliceView],
    settings: dict[str, str],
    deadline: float | None,
    claim_window_s: float,
) -> tuple[Gang | None, set[str]]:
    head_key = f"TPU-{topology.name}-head"
    hosts: list[list[Any]] = []
    for view in chosen:
        row = []
        for worker in range(topology.vm_count):
            resources = {view.name: 1.0}
            if worker == 0:
                resources[head_key] = 1.0
            node_id = view.hosts[worker]["node_id"]
            row.append(
                TpuHost.options(
                    resources=resources,
                    scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False),
                ).remote(view.name, worker, settings)
            )
        hosts.append(row)
    window = claim_window_s
    if deadline is not None:
        window = max(min(window, deadline - time.monotonic()), 1.0)
    refs = [[actor.info.remote() for actor in row] for row in hosts]
    flat = [ref for row in refs for ref in row]
    ready, _ = ray.wait(flat, num_returns=len(flat), timeout=window)
    ready_set = set(ready)
    bad: set[str] = set()
    infos: list[list[dict[str, Any]]] = []
    for view, row in zip(chosen, refs, strict=True):
        row_infos = []
        for ref in row:
            if ref not in ready_set:
                bad.add(view.name)
                break
            try:
                row_infos.append(rget(ref))
            except Exception:
                bad.add(view.name)
                break
        infos.append(row_infos)
    gang = Gang([v.name for v in chosen], hosts, infos)
    if bad:
        gang.teardown(timeout=5)
        return None, bad
    return gang, set()
