# pyright: standard
"""The one module of fray-tpu that reads a private name of Ray, with its public fallback.

``run_on_pod`` accepts a ``@ray.remote`` function, as the predecessor did, and honours the
options it was made with. The function is public (``fn.remote.__wrapped__``: Ray wraps
``remote`` with ``functools.wraps``); its options are only in
``RemoteFunction._default_options``: where that is gone, the function runs with Fray's
defaults (a warning says so). ``tests/test_tpu_helpers.py`` checks both paths against the
pinned Ray.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

__all__ = ["PRIVATE_NAMES", "unwrap_remote_function"]

logger = logging.getLogger("fray_tpu.ray")

PRIVATE_NAMES = ("ray.remote_function.RemoteFunction._default_options",)
"""The private Ray names this module reads (the AST test counts them)."""


def unwrap_remote_function(fn: Any) -> tuple[Callable[..., Any], dict[str, Any]]:
    """The plain function behind a ``@ray.remote`` function and the options it carries
    (``fn`` itself and no options for anything else)."""
    from ray.remote_function import RemoteFunction

    if not isinstance(fn, RemoteFunction):
        return fn, {}
    plain = getattr(fn.remote, "__wrapped__", None)
    if not callable(plain):
        raise TypeError(f"cannot find the function behind the @ray.remote function {fn!r}")
    options = getattr(fn, "_default_options", None)
    if not isinstance(options, dict):
        logger.warning(
            "this Ray keeps no options on %r that Fray can read: it runs with Fray's defaults",
            fn,
        )
        options = {}
    return plain, dict(options)
