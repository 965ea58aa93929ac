"""Removing libtpu's lockfile before a launch.

libtpu takes ``/tmp/libtpu_lockfile`` when a process opens the TPU. A process that died
without cleaning up (or a long-lived worker that still holds it) makes the next program on
the VM fail to get the TPU, so every launch removes the file first. Failing to remove it is
reported and never fatal: the launch goes ahead and libtpu gives its own error if the TPU is
really still taken.
"""

from __future__ import annotations

import enum
import logging
import os
from dataclasses import dataclass

from fray_tpu import environment_variables as ev

__all__ = ["DEFAULT_LIBTPU_LOCKFILE", "LockfileOutcome", "LockfileResult", "remove_libtpu_lockfile"]

logger = logging.getLogger(__name__)

DEFAULT_LIBTPU_LOCKFILE = "/tmp/libtpu_lockfile"
"""Where libtpu keeps its lock (``FRAY_TPU_LIBTPU_LOCKFILE`` overrides it)."""


class LockfileOutcome(enum.StrEnum):
    """What :func:`remove_libtpu_lockfile` did."""

    REMOVED = "removed"
    MISSING = "missing"
    FAILED = "failed"


@dataclass(frozen=True)
class LockfileResult:
    """The outcome of one removal.

    Attributes:
        path: The lockfile's path.
        outcome: Removed, missing (nothing to do) or failed.
        error: Why it failed (``None`` unless ``outcome`` is FAILED).
    """

    path: str
    outcome: LockfileOutcome
    error: str | None = None

    def describe(self) -> str:
        """One line for logs."""
        if self.outcome is LockfileOutcome.FAILED:
            return f"could not remove the libtpu lockfile {self.path}: {self.error}"
        return f"libtpu lockfile {self.path}: {self.outcome.value}"


def remove_libtpu_lockfile(path: str | None = None) -> LockfileResult:
    """Removes libtpu's lockfile; never raises.

    Args:
        path: The file; ``None`` uses ``$FRAY_TPU_LIBTPU_LOCKFILE`` or
            :data:`DEFAULT_LIBTPU_LOCKFILE`.

    Returns:
        What happened. Permission and other OS errors come back as ``FAILED`` with the
        reason (and a warning is logged); a missing file is ``MISSING``.
    """
    target = path or os.environ.get(ev.FRAY_TPU_LIBTPU_LOCKFILE) or DEFAULT_LIBTPU_LOCKFILE
    try:
        os.unlink(target)
    except FileNotFoundError:
        return LockfileResult(target, LockfileOutcome.MISSING)
    except OSError as err:
        result = LockfileResult(target, LockfileOutcome.FAILED, f"{type(err).__name__}: {err}")
        logger.warning("%s", result.describe())
        return result
    return LockfileResult(target, LockfileOutcome.REMOVED)
