# pyright: standard
"""Small typed wrappers over Ray calls."""

from __future__ import annotations

from typing import Any

import ray

__all__ = ["rget"]


def rget(refs: Any, *, timeout: float | None = None) -> Any:
    """``ray.get`` with an ``Any`` result (Ray's overloads confuse type checkers)."""
    return ray.get(refs, timeout=timeout)
