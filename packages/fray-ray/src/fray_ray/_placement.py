"""Why a Ray job or actor is not placed: what a replica (or actor) asks of a node, compared
with what the cluster's nodes have.

Ray says nothing to a task's or actor's owner while it waits for a node. This module reads
the nodes (``ray.nodes()``: totals, labels, alive) and what each has free
(:func:`fray_ray._adapter.free_per_node`, else the cluster's sum) and turns the comparison
into the text of ``JobInfo.pending_reason``, of the error of a job not placed within
``JobRequest.scheduling_timeout`` and of an actor's ``pending_reason``. It is read only when
someone asks, never on the way to a worker.

Whether a cluster can grow is not public in Ray: a request no node has is never refused
for it, except on a local Ray this client started itself (which cannot grow); elsewhere it
waits, and its pending reason says what no node has.
"""

# pyright: standard
# Ray is untyped: this module is an adapter over it.

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NamedTuple

from fray_ray._adapter import free_per_node
from fray_ray._convert import Ask, amount, label_matches


class _Node(NamedTuple):
    node_id: str
    alive: bool
    totals: Mapping[str, float]
    labels: Mapping[str, str]


class ClusterView(NamedTuple):
    """The cluster's nodes as Ray lists them (dead ones too: a cluster may start a
    replacement of the same shape)."""

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
            return f"no node offers {', '.join(missing)}"
        unmatched = [
            f"{k}={v}"
            for k, v in ask.labels.items()
            if not any(label_matches(n.labels.get(k), v) for n in alive)
        ]
        if unmatched:
            return f"no node has the label {', '.join(unmatched)}"
        most = {k: max(n.totals.get(k, 0.0) for n in alive) for k in ask.resources}
        return (
            f"no single node has all of it (the most any of its {len(alive)} node(s) has: "
            f"{_amounts(ask, most)})"
        )


def cluster_view() -> ClusterView:
    """The nodes Ray lists (one GCS call, well under a millisecond)."""
    import ray

    return ClusterView(
        [
            _Node(node["NodeID"], node["Alive"], node["Resources"], node.get("Labels") or {})
            for node in ray.nodes()
        ]
    )


def cluster_says(ask: Ask) -> str | None:
    """What the cluster has for one replica with this ask: no node has what it needs, or
    every node that could take it is busy (with what they have free). ``None`` while a
    node that could take it has room: the replica is starting, or runs already."""
    view = cluster_view()
    if not view.fits_some_node(ask):
        return f"{view.shortfall(ask)}; it waits until the cluster has such a node"
    able = [n for n in view.nodes if n.alive and ask.fits(n.totals, n.labels)]
    free = free_per_node()
    if free is None:  # the public fallback: what the whole cluster has free
        import ray

        total = ray.available_resources()
        if ask.fits(total, {}):
            return None
        return (
            f"the {len(able)} node(s) that could take it are busy (free in the cluster: "
            f"{_amounts(ask, total)})"
        )
    busy = [n for n in able if not ask.fits(free.get(n.node_id, {}), n.labels)]
    if len(busy) < len(able):
        return None
    shown = "; ".join(_amounts(ask, free.get(n.node_id, {})) for n in busy[:3])
    more = f" and {len(busy) - 3} more" if len(busy) > 3 else ""
    return f"the {len(busy)} node(s) that could take it are busy (free: {shown or 'none'}{more})"


def _amounts(ask: Ask, have: Mapping[str, float]) -> str:
    """How much of each resource ``ask`` asks for ``have`` holds: ``CPU=0, memory=2 GiB``."""
    return ", ".join(amount(k, have.get(k, 0.0)) for k in ask.resources)
