# pyright: standard
"""A TPU job's hub: one small actor per job, on the driver's node, where the gang's hosts
send what the driver cannot ask them while the user's code holds their main thread.

Hosts send their output lines (the driver reads them into the job's log) and say when the
GCE metadata server tells them their VM is being preempted (the driver asks every second
while an attempt runs). It runs one call at a time, so each host's lines are kept in the
order it sent them (Ray keeps a caller's order only for such actors). The job's record and
budgets are the driver's (:mod:`fray_tpu.ray.gang`); the hub keeps nothing else.
"""

from __future__ import annotations

from collections import deque

import ray

__all__ = ["Hub"]

_MAX_LINES = 200_000


class _HubImpl:
    def __init__(self) -> None:
        self._lines: deque[str] = deque(maxlen=_MAX_LINES)
        self._dropped = 0
        self._preempted: dict[str, str] = {}  # gang token -> the first host saying so

    def append_logs(self, lines: list[str]) -> None:
        for line in lines:
            if len(self._lines) == self._lines.maxlen:
                self._dropped += 1
            self._lines.append(line)

    def read_logs(self, start: int) -> tuple[list[str], int]:
        """Lines from absolute index ``start`` on, and the index after them."""
        first = max(start - self._dropped, 0)
        return list(self._lines)[first:], self._dropped + len(self._lines)

    def report_preempted(self, token: str, where: str) -> None:
        """A host of gang ``token`` was told its VM is being preempted (the first stays)."""
        self._preempted.setdefault(token, where)

    def peek(self, token: str) -> str | None:
        """Which host of gang ``token`` said it is preempted, if one has."""
        return self._preempted.get(token)


Hub = ray.remote(num_cpus=0, max_restarts=0)(_HubImpl)  # pyright: ignore[reportCallIssue]
