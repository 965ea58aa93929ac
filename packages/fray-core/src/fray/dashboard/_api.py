"""The dashboard's JSON answers, in plain Python (the web layer in ``_app.py`` only routes).

Every list is paged (``offset``, ``limit``: default 50, at most 500) and no answer carries more
than 500 rows, nested ones included; a log tail has at most 1,000 lines of at most 2,000
characters. Each source is asked in a thread of the dashboard's own, all at once, and given
``timeout`` seconds: a source that raises or does not answer in time is reported in the
answer's ``errors`` (one per source) and the others still answer. Every text that comes from
a job (names, errors, reasons, log lines, member errors) is masked: the values of this
process's secret-looking env vars and ``NAME=value`` text with a secret-looking name.
"""

from __future__ import annotations

import collections
import concurrent.futures
import heapq
import itertools
import os
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from fray._secrets import REDACTED, is_secret_name, masker
from fray._types import AttemptInfo, JobInfo, JobStatus
from fray.dashboard._sources import Source
from fray.dashboard._views import GangView, GroupView, MemberState
from fray.errors import InvalidRequestError, JobNotFoundError

__all__ = ["DEFAULT_LIMIT", "MAX_LIMIT", "MAX_LINE_CHARS", "MAX_TAIL", "Dashboard", "NotFound"]

DEFAULT_LIMIT, MAX_LIMIT = 50, 500
DEFAULT_TAIL, MAX_TAIL = 200, 1000
MAX_LINE_CHARS = 2000
_REASON_CHARS = 300
_FAILED_KINDS = ("failed", "timed_out")
# ``NAME=value``; the look-behind keeps the scan linear on long identifier-like text.
_ASSIGNMENT = re.compile(r"(?<![A-Za-z0-9_])([A-Za-z_][A-Za-z0-9_]*)=(\S*)")


class NotFound(LookupError):
    """No source knows the job asked for (HTTP 404)."""


def _whole(query: Mapping[str, str], key: str, default: int, low: int, high: int) -> int:
    """Query parameter ``key`` as a whole number from ``low`` to ``high``."""
    text = query.get(key)
    if text is None or text == "":
        return default
    if not text.isdigit() or not low <= int(text) <= high:
        raise InvalidRequestError.for_field(key, text, f"a whole number from {low} to {high}")
    return int(text)


def _paging(query: Mapping[str, str]) -> tuple[int, int]:
    """``offset`` (default 0) and ``limit`` (default 50, at most 500)."""
    offset = _whole(query, "offset", 0, 0, 10**9)
    return offset, _whole(query, "limit", DEFAULT_LIMIT, 1, MAX_LIMIT)


def _state(query: Mapping[str, str]) -> JobStatus | None:
    text = query.get("state") or None
    if text is None:
        return None
    try:
        return JobStatus(text)
    except ValueError:
        allowed = ", ".join(status.value for status in JobStatus)
        raise InvalidRequestError.for_field("state", text, f"one of {allowed}") from None


def _first_line(text: str | None, limit: int = _REASON_CHARS) -> str | None:
    if not text:
        return None
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _newest_first(item: tuple[JobInfo, int]) -> float:
    return -(item[0].submitted_at or 0.0)


def _matching(
    infos: Sequence[JobInfo], parent: str | None, state: JobStatus | None, prefix: str
) -> list[JobInfo]:
    """The jobs under ``parent`` (``None``: top-level) with that state and prefix, newest
    first (a source lists them oldest first)."""
    found = [info for info in reversed(infos) if info.parent == parent]
    if state is not None:
        found = [info for info in found if info.status is state]
    if prefix:
        found = [i for i in found if i.name.startswith(prefix) or i.job_id.startswith(prefix)]
    return found


def _child_counts(infos: Sequence[JobInfo]) -> Mapping[str, int]:
    """How many children each job of ``infos`` has."""
    return collections.Counter([info.parent for info in infos if info.parent is not None])


def _hide_value(match: re.Match[str]) -> str:
    return f"{match[1]}={REDACTED}" if is_secret_name(match[1]) and match[2] else match[0]


class Dashboard:
    """The answers of ``fray dashboard`` over ``sources`` (each asked for at most
    ``timeout`` seconds per answer). :meth:`close` ends its threads."""

    def __init__(self, sources: Sequence[Source], *, timeout: float = 10.0) -> None:
        names = [source.name for source in sources]
        if not names or len(set(names)) != len(names):
            raise InvalidRequestError.for_field(
                "sources", names, "one or more sources, each with a name of its own"
            )
        self.sources = tuple(sources)
        self.timeout = timeout
        self._pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=max(4, 2 * len(names)), thread_name_prefix="fray-dashboard"
        )
        self._secrets = masker([os.environ])

    def close(self) -> None:
        """Ends the dashboard's threads (a source still answering is left to finish)."""
        self._pool.shutdown(wait=False, cancel_futures=True)

    def mask(self, text: str) -> str:
        """``text`` with secrets hidden (see the module docstring)."""
        text = self._secrets(text)
        return _ASSIGNMENT.sub(_hide_value, text) if "=" in text else text

    def _mask(self, text: str | None) -> str | None:
        return None if text is None else self.mask(text)

    # -- asking the sources --------------------------------------------------------------

    def _ask(
        self, question: Callable[[Source], Any], name: str | None = None
    ) -> tuple[list[tuple[Source, Any]], list[dict[str, str]]]:
        """Asks every source (or the one named) at once: the answers, in source order, and
        one error per source that raised or did not answer within ``timeout``."""
        chosen = self._chosen(name)
        futures = [self._pool.submit(question, source) for source in chosen]
        concurrent.futures.wait(futures, timeout=self.timeout)
        answers: list[tuple[Source, Any]] = []
        errors: list[dict[str, str]] = []
        for source, future in zip(chosen, futures, strict=True):
            if not future.done():
                error = f"did not answer within {self.timeout:g}s"
            elif future.exception() is None:
                answers.append((source, future.result()))
                continue
            else:
                exc = future.exception()
                error = _first_line(f"{type(exc).__name__}: {exc}", 500) or "error"
            errors.append({"source": source.name, "error": self.mask(error)})
        return answers, errors

    def _chosen(self, name: str | None) -> Sequence[Source]:
        if not name:
            return self.sources
        chosen = [source for source in self.sources if source.name == name]
        if not chosen:
            allowed = ", ".join(source.name for source in self.sources)
            raise InvalidRequestError.for_field("source", name, f"one of {allowed}")
        return chosen

    # -- the answers ---------------------------------------------------------------------

    def source_list(self) -> dict[str, Any]:
        """``/api/sources``: each source's name, whether it answers, and its job count."""
        answers, errors = self._ask(lambda source: len(source.jobs()))
        counts = {source.name: count for source, count in answers}
        failed = {error["source"]: error["error"] for error in errors}
        rows = [
            {"name": s.name, "jobs": counts.get(s.name), "error": failed.get(s.name)}
            for s in self.sources
        ]
        return {"sources": rows, "errors": errors}

    def jobs(self, query: Mapping[str, str]) -> dict[str, Any]:
        """``/api/jobs``: top-level jobs (or the children of ``parent``), newest first,
        filtered by ``source``, ``state`` and a ``prefix`` of the name or id."""
        offset, limit = _paging(query)
        state, prefix, parent = _state(query), query.get("prefix", ""), query.get("parent") or None
        answers, errors = self._ask(lambda source: source.jobs(), query.get("source"))
        total, tagged = 0, list[Iterator[tuple[JobInfo, int]]]()
        for index, (_source, infos) in enumerate(answers):
            found = _matching(infos, parent, state, prefix)
            total += len(found)
            tagged.append(zip(found, itertools.repeat(index)))
        # Each source lists its jobs oldest first: merged newest first, lazily (no sort, and
        # only the rows up to the page's end are touched).
        merged = heapq.merge(*tagged, key=_newest_first)
        page = list(itertools.islice(merged, offset, offset + limit))
        counts = {i: _child_counts(answers[i][1]) for i in {index for _, index in page}}
        rows = [self._row(answers[i][0], info, counts[i]) for info, i in page]
        return {"jobs": rows, "total": total, "offset": offset, "limit": limit, "errors": errors}

    def _row(self, source: Source, info: JobInfo, children: Mapping[str, int]) -> dict[str, Any]:
        reason = info.error or (info.pending_reason if info.status is JobStatus.PENDING else None)
        lost = [a for a in info.attempt_history if a.outcome != "succeeded"]
        if lost and (reason is None or info.status is JobStatus.SUCCEEDED):
            # it recovered (or runs again): what it lost last
            last = lost[-1]
            reason = f"attempt {last.attempt} {last.outcome.replace('_', ' ')}"
            reason += f": {last.error}" if last.error else ""
        return {
            "source": source.name,
            "id": info.job_id,
            "name": self.mask(info.name),
            "state": info.status.value,
            "attempts": info.attempts,
            "failures": info.failures,
            "preemptions": info.preemptions,
            "replicas": info.replicas,
            "children": children.get(info.job_id, 0),
            "submitted_at": info.submitted_at,
            "started_at": info.started_at,
            "finished_at": info.finished_at,
            "reason": self._mask(_first_line(reason)),
        }

    def job(self, job_id: str, query: Mapping[str, str]) -> dict[str, Any]:
        """``/api/jobs/{id}``: the job, its attempts, the root cause of its failures, its
        children (the first 50), the actor groups it hosts and its gang.

        Raises:
            NotFound: No source (of those asked) knows the job.
        """
        answers, errors = self._ask(lambda s: self._detail(s, job_id), query.get("source"))
        found = [detail for _source, detail in answers if detail is not None]
        if not found:
            where = ", ".join(s.name for s in self._chosen(query.get("source")))
            raise NotFound(f"no job {job_id!r} in {where}")
        return {**found[0], "errors": errors}

    def _detail(self, source: Source, job_id: str) -> dict[str, Any] | None:
        try:
            info = source.job(job_id)
        except JobNotFoundError:
            return None
        infos = source.jobs()
        kids = [i for i in infos if i.parent == job_id]
        counts = _child_counts(infos)
        groups = [g for g in source.groups() if g.job_id == job_id]
        gang = next((g for g in source.gangs() if g.job_id == job_id), None)
        attempts = [self._attempt(a) for a in info.attempt_history]
        children = [self._row(source, kid, counts) for kid in kids[:DEFAULT_LIMIT]]
        budget = _Budget(MAX_LIMIT - len(attempts) - len(children))
        return {
            "job": {
                **self._row(source, info, counts),
                "error": self._mask(info.error),
                "exit_code": info.exit_code,
                "parent": info.parent,
                "pending_reason": self._mask(info.pending_reason),
            },
            "attempts": attempts,
            "root_cause": self._root_cause(info, attempts, gang, kids),
            "children": {"rows": children, "total": len(kids)},
            "groups": [self._group(source, g, budget) for g in groups[:DEFAULT_LIMIT]],
            "gang": None if gang is None else self._gang(source, gang, budget),
        }

    def _attempt(self, attempt: AttemptInfo) -> dict[str, Any]:
        return {
            "attempt": attempt.attempt,
            "kind": attempt.outcome,
            "started_at": attempt.started_at,
            "finished_at": attempt.finished_at,
            "exit_code": attempt.exit_code,
            "error": self._mask(attempt.error),
        }

    def _root_cause(
        self,
        info: JobInfo,
        attempts: list[dict[str, Any]],
        gang: GangView | None,
        children: list[JobInfo],
    ) -> dict[str, Any] | None:
        """The earliest failed attempt (and, in a gang, the host that failed first; or the
        child that failed first), for a failed job or one that recovered from a failure."""
        failed = [a for a in attempts if a["kind"] in _FAILED_KINDS]
        if not failed and info.status is not JobStatus.FAILED:
            return None
        first = min(failed, key=lambda a: a["attempt"]) if failed else None
        task = None
        first_slice = gang.first_failed_slice if gang is not None else None
        if first_slice is not None:
            host = min(
                (h for h in first_slice.hosts if h.failed_at is not None),
                key=lambda h: h.failed_at or 0.0,
            )
            task = f"slice {first_slice.index} ({first_slice.name}), host {host.worker}"
            task += f": {host.error}" if host.error else ""
        failed_kids = [c for c in children if c.status is JobStatus.FAILED]
        child = min(failed_kids, key=lambda c: c.finished_at or 0.0, default=None)
        error = first["error"] if first is not None and first["error"] else info.error
        return {
            "attempt": None if first is None else first["attempt"],
            "error": self._mask(_first_line(error, MAX_LINE_CHARS)),
            "exit_code": info.exit_code if first is None else first["exit_code"],
            "at": None if first is None else first["finished_at"],
            "task": self._mask(task),
            "child": None if child is None else child.job_id,
            "recovered": info.status is JobStatus.SUCCEEDED,
        }

    def logs(self, job_id: str, query: Mapping[str, str]) -> dict[str, Any]:
        """``/api/jobs/{id}/logs``: the last ``tail`` lines (default 200, at most 1,000),
        each cut at 2,000 characters.

        Raises:
            NotFound: No source (of those asked) knows the job.
        """
        tail = _whole(query, "tail", DEFAULT_TAIL, 0, MAX_TAIL)

        def read(source: Source) -> Sequence[str] | None:
            try:
                return source.logs(job_id, tail)
            except JobNotFoundError:
                return None

        answers, errors = self._ask(read, query.get("source"))
        found = [(s, lines) for s, lines in answers if lines is not None]
        if not found:
            if errors:
                return {"job_id": job_id, "lines": [], "cut": 0, "errors": errors}
            raise NotFound(f"no job {job_id!r}")
        source, lines = found[0]
        lines = list(lines)[-tail:] if tail else []
        cut = sum(1 for line in lines if len(line) > MAX_LINE_CHARS)
        shown = [self.mask(line[:MAX_LINE_CHARS]) for line in lines]
        return {
            "source": source.name,
            "job_id": job_id,
            "lines": shown,
            "cut": cut,
            "errors": errors,
        }

    def groups(self, query: Mapping[str, str]) -> dict[str, Any]:
        """``/api/actors``: actor groups (name or hosting job id starting with ``prefix``),
        with member counts by state and up to 500 members in all."""

        def keep(group: GroupView, prefix: str) -> bool:
            return group.name.startswith(prefix) or (group.job_id or "").startswith(prefix)

        return self._listing("groups", query, lambda source: source.groups(), keep, self._group)

    def _listing(
        self,
        key: str,
        query: Mapping[str, str],
        question: Callable[[Source], Sequence[Any]],
        keep: Callable[[Any, str], bool],
        render: Callable[[Source, Any, _Budget], dict[str, Any]],
    ) -> dict[str, Any]:
        """One page of what ``question`` asks every source, kept by ``keep(item, prefix)``
        and rendered within one budget of nested rows."""
        offset, limit = _paging(query)
        prefix = query.get("prefix", "")
        answers, errors = self._ask(question, query.get("source"))
        matched = [(s, item) for s, items in answers for item in items if keep(item, prefix)]
        budget = _Budget(MAX_LIMIT - min(limit, len(matched)))
        rows = [render(s, item, budget) for s, item in matched[offset : offset + limit]]
        return {
            key: rows,
            "total": len(matched),
            "offset": offset,
            "limit": limit,
            "errors": errors,
        }

    def _group(self, source: Source, group: GroupView, budget: _Budget) -> dict[str, Any]:
        counts = collections.Counter(member.state for member in group.members)
        restarts = [m.restarts for m in group.members if m.restarts is not None]
        members = [
            {
                "name": m.name,
                "state": m.state.value,
                "restarts": m.restarts,
                "error": self._mask(_first_line(m.error)),
            }
            for m in budget.take(group.members)
        ]
        return {
            "source": source.name,
            "name": group.name,
            "job_id": group.job_id,
            "size": len(group.members),
            **{state.value: counts.get(state, 0) for state in MemberState},
            "restarts": sum(restarts) if restarts else None,
            "members": members,
        }

    def gangs(self, query: Mapping[str, str]) -> dict[str, Any]:
        """``/api/gangs``: TPU gangs (job id starting with ``prefix``), their slices and
        hosts (up to 500 hosts in all), which slice failed first, and ``MEGASCALE_*`` per
        attempt."""

        def keep(gang: GangView, prefix: str) -> bool:
            return gang.job_id.startswith(prefix)

        return self._listing("gangs", query, lambda source: source.gangs(), keep, self._gang)

    def _gang(self, source: Source, gang: GangView, budget: _Budget) -> dict[str, Any]:
        first = gang.first_failed_slice
        slices = [
            {
                "index": s.index,
                "name": s.name,
                "size": len(s.hosts),
                "first_failure": s.first_failure,
                "hosts": [
                    {
                        "worker": h.worker,
                        "state": h.state.value,
                        "failed_at": h.failed_at,
                        "error": self._mask(_first_line(h.error)),
                    }
                    for h in budget.take(s.hosts)
                ],
            }
            for s in gang.slices
        ]
        attempts = [
            {"attempt": a.attempt, "outcome": a.outcome, "megascale": dict(a.megascale)}
            for a in budget.take(gang.attempts)
        ]
        return {
            "source": source.name,
            "job_id": gang.job_id,
            "tpu_type": gang.tpu_type,
            "slices": slices,
            "first_failed_slice": None if first is None else first.index,
            "attempts": attempts,
        }


class _Budget:
    """How many more nested rows an answer may carry (no answer has more than 500)."""

    def __init__(self, left: int) -> None:
        self.left = max(left, 0)

    def take(self, items: Sequence[Any]) -> Sequence[Any]:
        """The first of ``items`` the budget still allows."""
        taken = items[: self.left]
        self.left -= len(taken)
        return taken
