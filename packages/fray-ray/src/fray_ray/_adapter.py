"""The one module of fray-ray that reads a private name of Ray, with its public fallback.

Nothing public tells how much of each resource a node has free: ``ray.nodes()`` gives
totals, ``ray.available_resources()`` the cluster's sum. Pending reasons ("the node that
could take it is busy: CPU=0 free") need it per node, so it is read from
``ray._private.state.available_resources_per_node`` (a DeveloperAPI since Ray 2.0). Where
that name is gone or fails, callers get ``None`` and fall back to the cluster's sum. A test
against the pinned Ray (``tests/test_private_api.py``) checks both paths; an AST test keeps
every other private Ray name out of fray-core, fray-ray and fray-tpu.
"""

# pyright: standard
# Ray is untyped: this module is an adapter over it.

from __future__ import annotations

import logging

logger = logging.getLogger("fray.ray")

PRIVATE_NAMES = ("ray._private.state.available_resources_per_node",)
"""The private Ray names this module reads (the AST test counts them)."""


def free_per_node() -> dict[str, dict[str, float]] | None:
    """Free resources of each live node, by node id; ``None`` where Ray cannot say (the
    caller then uses ``ray.available_resources()``, the cluster's sum)."""
    try:
        from ray._private.state import available_resources_per_node

        return available_resources_per_node()  # {node id (hex): {resource: amount}}
    except Exception as exc:  # moved or failed: the public fallback
        logger.debug("free resources per node unavailable (%s); using the cluster's sum", exc)
        return None
