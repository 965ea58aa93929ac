"""Why a Ray job or actor is not placed: what a replica (or actor) asks of a node, compared
with what the cluster's nodes have.

Ray says nothing to a task's or actor's owner while it waits for a node. This module reads
the cluster from the GCS (node totals and labels, what is free, which request shapes wait)
and turns the comparison into the text of ``JobInfo.pending_reason``, of the error of a job
not placed within ``JobRequest.scheduling_timeout``, and of an actor's ``pending_reason``
(also in a timed-out ``wait_ready``). It is read only when someone asks (a job or actor that
has not started, a request no known node fits), never on the way to a worker.

Whether the cluster can grow is read from what Ray's autoscalers leave in the GCS: the v2
autoscaler's cluster config (node groups and their counts) and the v1 monitor's status
(node types by name; a cluster without an autoscaler config runs a read-only monitor
whose node types are named after node ids). A cluster with neither is taken as fixed.
"""

# pyright: standard
# Ray is untyped: this module is an adapter over it.

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "Ask",
    "ClusterView",
    "autoscaler_note",
    "cluster_view",
    "pending_reason",
    "resource_state",
    "waiting_count",
]

_GIB = float(1 << 30)
# Node types of the read-only monitor Ray runs on a cluster without an autoscaler config.
_READONLY_TYPE = re.compile(r"node_[0-9a-f]{56}")
_OPTION_NAMES = {"num_cpus": "CPU", "memory": "memory", "num_gpus": "GPU"}


@dataclass(frozen=True)
class Ask:
    """What one replica asks of a node, in Ray's terms: resources and label selectors."""

    resources: Mapping[str, float]
    labels: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def of(cls, options: Mapping[str, Any]) -> Ask:
        """From task options (``num_cpus``, ``memory``, ``num_gpus``, ``accelerator_type``,
        ``resources``, ``label_selector``) or Jobs API ones (``entrypoint_`` prefixed)."""
        resources: dict[str, float] = {}
        for key, value in options.items():
            name = key.removeprefix("entrypoint_")
            if name in _OPTION_NAMES and value:
                resources[_OPTION_NAMES[name]] = float(value)
        accelerator = options.get("accelerator_type")
        if accelerator:
            resources[f"accelerator_type:{accelerator}"] = 0.001
        custom = options.get("resources") or options.get("entrypoint_resources") or {}
        resources.update({k: float(v) for k, v in custom.items()})
        return cls(resources, dict(options.get("label_selector") or {}))

    def describe(self) -> str:
        """``CPU=64, memory=1 GiB, GPU=1, accelerator_type:A100`` (and the labels)."""
        parts = [_amount(name, value) for name, value in self.resources.items()]
        parts += [f"label {key}={value}" for key, value in self.labels.items()]
        return ", ".join(parts) or "nothing"

    def fits(self, totals: Mapping[str, float], labels: Mapping[str, str]) -> bool:
        """Whether a node with these resources (totals or free) and labels could take it."""
        return all(totals.get(k, 0.0) >= v - 1e-9 for k, v in self.resources.items()) and all(
            _label_matches(labels.get(key), selector) for key, selector in self.labels.items()
        )


def _amount(name: str, value: float) -> str:
    if name.startswith("accelerator_type:"):
        return name
    if name == "memory":
        return f"memory={value / _GIB:.3g} GiB"
    return f"{name}={value:g}"


def _label_matches(value: str | None, selector: str) -> bool:
    """Ray's label selector syntax: ``v``, ``!v``, ``in(a,b)``, ``!in(a,b)``."""
    negate = selector.startswith("!")
    selector = selector.removeprefix("!")
    if selector.startswith("in(") and selector.endswith(")"):
        hit = value in {v.strip() for v in selector[3:-1].split(",")}
    else:
        hit = value == selector
    return hit != negate


@dataclass(frozen=True)
class _Node:
    alive: bool
    totals: Mapping[str, float]
    labels: Mapping[str, str]


@dataclass(frozen=True)
class ClusterView:
    """The cluster's nodes as the GCS lists them (dead ones too: a fixed cluster may
    start a replacement with the same shape)."""

    nodes: Sequence[_Node]

    def fits_some_node(self, ask: Ask) -> bool:
        """Whether any node, alive or dead, has the totals and labels the ask needs."""
        return any(ask.fits(node.totals, node.labels) for node in self.nodes)

    def shortfall(self, ask: Ask) -> str:
        """What no live node has: ``no node offers GPU``, or the most any node has of each
        resource asked for."""
        alive = [node for node in self.nodes if node.alive]
        missing = [k for k in ask.resources if not any(k in n.totals for n in alive)]
        if missing:
            return f"no node offers {', '.join(_amount(k, 1).split('=')[0] for k in missing)}"
        unmatched = [
            f"{k}={v}"
            for k, v in ask.labels.items()
            if not any(_label_matches(n.labels.get(k), v) for n in alive)
        ]
        if unmatched:
            return f"no node has the label {', '.join(unmatched)}"
        most = {k: max(n.totals.get(k, 0.0) for n in alive) for k in ask.resources}
        return (
            f"no single node has all of it (the most any of its {len(alive)} node(s) has: "
            f"{', '.join(_amount(k, v) for k, v in most.items())})"
        )


def cluster_view() -> ClusterView:
    """The nodes the GCS lists (one GCS call, well under a millisecond)."""
    import ray

    return ClusterView(
        [
            _Node(
                bool(node.get("Alive")),
                dict(node.get("Resources") or {}),
                dict(node.get("Labels") or {}),
            )
            for node in ray.nodes()
        ]
    )


def autoscaler_note() -> str | None:
    """How the cluster can grow, where an autoscaler says it can; ``None`` for a fixed
    cluster (no autoscaler config, and a read-only monitor or none)."""
    import ray._private.state
    from ray._private import ray_constants
    from ray.experimental.internal_kv import _internal_kv_get

    config = ray._private.state.state.get_cluster_config()
    if config is not None and config.node_group_configs:
        groups = [
            group.name
            for group in config.node_group_configs
            if group.max_count == -1 or group.max_count > group.min_count
        ]
        return f"the autoscaler may add nodes of {', '.join(groups)}" if groups else None
    raw = _internal_kv_get(ray_constants.DEBUG_AUTOSCALING_STATUS)
    if not raw:
        return None
    try:
        report = json.loads(raw).get("autoscaler_report") or {}
    except (ValueError, AttributeError):
        return None
    types = {str(t) for t in (report.get("active_nodes") or {})}
    types |= {str(launch[1]) for launch in report.get("pending_nodes") or () if len(launch) > 1}
    named = sorted(t for t in types if not _READONLY_TYPE.fullmatch(t))
    return f"the autoscaler may add nodes (node types: {', '.join(named)})" if named else None


def resource_state() -> Any:
    """The cluster's resource state from the GCS (Ray's ``ClusterResourceState``: nodes,
    what is free, which request shapes wait)."""
    import ray
    from ray._raylet import GcsClient  # pyright: ignore[reportAttributeAccessIssue]
    from ray.autoscaler.v2.sdk import get_cluster_resource_state

    return get_cluster_resource_state(GcsClient(address=ray.get_runtime_context().gcs_address))


def waiting_count(ask: Ask, state: Any) -> int:
    """How many requests of this shape wait in the cluster for a node (anyone's)."""
    return sum(
        int(waiting.count)
        for waiting in state.pending_resource_requests
        if _same_shape(ask, waiting.request)
    )


def pending_reason(ask: Ask, *, waiting_only: bool, state: Any = None) -> str | None:
    """What the cluster has for a replica with this ask: no node could ever take it (and
    whether an autoscaler may add one), or every node that could is busy (with what is
    free). With ``waiting_only``, ``None`` unless a request of this shape waits in the
    cluster (for a caller that cannot tell whether its own replica has been placed).
    ``state``: the :func:`resource_state` already read, if any."""
    if state is None:
        state = resource_state()
    if waiting_only and not waiting_count(ask, state):
        return None
    view = cluster_view()
    if not view.fits_some_node(ask):
        note = autoscaler_note()
        return f"{view.shortfall(ask)}; {note or 'this cluster has no autoscaler to add one'}"
    able = [n for n in state.node_states if ask.fits(dict(n.total_resources), dict(n.labels))]
    free = "; ".join(
        ", ".join(_amount(k, node.available_resources.get(k, 0.0)) for k in ask.resources)
        for node in able[:3]
    )
    more = f" and {len(able) - 3} more" if len(able) > 3 else ""
    return f"the {len(able)} node(s) that could take it are busy (free: {free or 'none'}{more})"


def _same_shape(ask: Ask, request: Any) -> bool:
    bundle = dict(request.resources_bundle)
    return set(bundle) == set(ask.resources) and all(
        abs(bundle[k] - v) < 1e-6 for k, v in ask.resources.items()
    )
