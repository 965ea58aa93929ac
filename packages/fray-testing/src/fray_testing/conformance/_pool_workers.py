"""The actor the pool conformance tests run (kept apart from the test module, so a member's
process that unpickles it never imports pytest)."""

from __future__ import annotations

import os
import time
from typing import Any

from fray import current_actor
from fray_testing.conformance.entrypoints import ConformanceError

__all__ = ["PoolWorker"]


class PoolWorker:
    """A pool member: echoes, fails, sleeps, ends its own process or restarts itself."""

    def echo(self, value: Any) -> Any:
        """Returns ``value``."""
        return value

    def whoami(self, _: Any = None) -> str:
        """This member's name, ``{group}-{index}``."""
        ctx = current_actor()
        return f"{ctx.group_name}-{ctx.index}"

    def fail(self, message: str) -> None:
        """Raises ``ConformanceError(message)``: the user's own error."""
        raise ConformanceError(message)

    def die(self, value: Any = None) -> Any:
        """Ends this member's process (``SystemExit``), every time."""
        raise SystemExit(1)

    def die_once(self, marker: str, value: Any) -> Any:
        """Ends this member the first time ``marker`` (a file path) is seen, and returns
        ``value`` on every later call: an item whose first member died under it."""
        try:
            fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            return value
        os.close(fd)
        raise SystemExit(1)

    def restart_once(self, marker: str) -> str:
        """Ends this member as failed, so its backend restarts it (once per ``marker``)."""
        try:
            fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            return "already restarted"
        os.close(fd)
        current_actor().fail(ConformanceError("restart me"))
        return "restarting"

    def nap(self, seconds: float, value: Any = None) -> Any:
        """Returns ``value`` after ``seconds`` (the work being measured, not a wait)."""
        time.sleep(seconds)
        return value
