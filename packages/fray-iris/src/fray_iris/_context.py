"""Whether this process runs in an Iris context (fray-core asks whenever it has no client and
no spec). It imports nothing of Iris's: a context set with ``iris_ctx_scope`` means it is."""

from __future__ import annotations

import os
import sys
from typing import Any


def detect() -> tuple[str, str, Any, str] | None:
    """``(key, scheme, build, why)`` for the client of the Iris context here, or ``None``."""
    if os.environ.get("IRIS_CONTROLLER_ADDRESS") and os.environ.get("IRIS_TASK_ID"):
        return "iris:context", "iris", _inside_job, "running inside an Iris job"
    module = sys.modules.get("iris.client.client")  # a context needs Iris imported
    context = module.get_iris_ctx() if module else None
    raw = getattr(context, "client", None)
    if raw is None:
        return None

    def wrap() -> Any:
        """A Fray client over the Iris client set with ``iris_ctx_scope``."""
        from fray_iris import FrayIrisClient

        return FrayIrisClient.from_iris_client(raw)

    # One client per wrapped Iris client: the cached client keeps it alive, so its id cannot
    # be reused while it is cached.
    return f"iris:scope:{id(raw)}", "iris", wrap, "an Iris context set with iris_ctx_scope()"


def _inside_job() -> Any:
    """A client on the Iris context of the job this process runs in."""
    from fray_iris import IrisClient  # the job's own Iris context

    return IrisClient()
