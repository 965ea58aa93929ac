"""``fray jobs list|status|logs|stop|wait``.

On the local backend these read the runs recorded by ``fray run`` in the state directory;
on Ray and Iris they go through the Client protocol (``list_jobs``, ``get_job`` and the
handle's methods).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from fray._state import StateStore, effective_status, runner_alive
from fray._types import JobInfo, JobStatus
from fray.cli._common import (
    CliError,
    Progress,
    UsageError,
    choose_spec,
    counts_line,
    format_duration,
    format_time,
    print_json,
    print_table,
)
from fray.errors import JobNotFoundError, JobTimeoutError

__all__ = ["add_parser"]


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    """Adds ``fray jobs`` and its subcommands."""
    jobs: argparse.ArgumentParser = sub.add_parser(
        "jobs",
        parents=[common],
        help="list, inspect, follow and stop jobs",
        description=(
            "Jobs of the chosen backend. Locally these are the runs 'fray run' recorded in "
            "the state directory (FRAY_STATE_DIR); on Ray and Iris, the cluster's jobs."
        ),
    )
    inner = jobs.add_subparsers(dest="jobs_command", metavar="COMMAND")
    spec = argparse.ArgumentParser(add_help=False)
    spec.add_argument("--spec", help="backend spec (default: FRAY_CLIENT_SPEC, else local)")

    p = inner.add_parser("list", parents=[common, spec], help="list jobs, oldest first")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.add_argument("--limit", type=int, metavar="N", help="only the N most recent jobs")
    p.set_defaults(handler=cmd_list)

    p = inner.add_parser("status", parents=[common, spec], help="show one job in detail")
    p.add_argument(
        "job_id", metavar="ID", help="job id (a unique prefix or name also works locally)"
    )
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(handler=cmd_status)

    p = inner.add_parser("logs", parents=[common, spec], help="print a job's output")
    p.add_argument("job_id", metavar="ID")
    p.add_argument("-f", "--follow", action="store_true", help="keep printing until the job ends")
    p.add_argument(
        "--children", action="store_true", help="interleave child jobs' lines, as [child-id] ..."
    )
    p.set_defaults(handler=cmd_logs)

    p = inner.add_parser("stop", parents=[common, spec], help="stop a running job")
    p.add_argument("job_id", metavar="ID")
    p.add_argument(
        "--timeout", type=float, default=None, metavar="S", help="give up waiting after S seconds"
    )
    p.set_defaults(handler=cmd_stop)

    p = inner.add_parser(
        "wait", parents=[common, spec], help="wait for jobs to finish (exit 0 if all succeeded)"
    )
    p.add_argument("job_ids", metavar="ID", nargs="+")
    p.add_argument(
        "--timeout", type=float, default=None, metavar="S", help="exit 124 after S seconds"
    )
    p.set_defaults(handler=cmd_wait)

    def no_command(_args: argparse.Namespace) -> int:
        jobs.print_help(sys.stderr)
        return 2

    jobs.set_defaults(handler=no_command)


# ---------------------------------------------------------------------------------------------
# Backend access


class _Remote:
    """A non-local client, shut down after the command."""

    def __init__(self, spec: str | None) -> None:
        from fray._client import client_from_spec, current_client

        self.client: Any = current_client() if spec is None else client_from_spec(spec)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.client.shutdown()


def _backend(args: argparse.Namespace) -> StateStore | _Remote:
    spec, _reason = choose_spec(args.spec)
    if spec is not None:
        from fray._client import parse_client_spec

        parsed = parse_client_spec(spec)
        if parsed.scheme == "local":
            parsed.reject_unknown({"threads"}, address=False)
            return StateStore()
    return _Remote(spec)


def _with_backend(
    args: argparse.Namespace, local: Callable[[StateStore], int], remote: Callable[[Any], int]
) -> int:
    backend = _backend(args)
    if isinstance(backend, StateStore):
        return local(backend)
    try:
        return remote(backend.client)
    finally:
        backend.close()


def _record_row(record: dict[str, Any]) -> dict[str, Any]:
    status, error = effective_status(record)
    started = record.get("started_at")
    finished = record.get("finished_at")
    end = finished if finished else (time.time() if not status.is_finished else None)
    duration = (end - started) if started and end else None
    return {
        "job_id": record.get("job_id"),
        "name": record.get("name"),
        "status": status.value,
        "exit_code": record.get("exit_code"),
        "error": error,
        "command": record.get("command"),
        "submitted_at": record.get("submitted_at"),
        "started_at": started,
        "finished_at": finished,
        "duration_s": duration,
        "parent": record.get("parent"),
    }


def _info_row(info: JobInfo) -> dict[str, Any]:
    end = info.finished_at or (time.time() if not info.status.is_finished else None)
    duration = (end - info.started_at) if info.started_at and end else None
    return {
        "job_id": info.job_id,
        "name": info.name,
        "status": info.status.value,
        "exit_code": info.exit_code,
        "error": info.error,
        "submitted_at": info.submitted_at,
        "started_at": info.started_at,
        "finished_at": info.finished_at,
        "duration_s": duration,
        "parent": info.parent,
        "attempts": info.attempts,
        "failures": info.failures,
        "preemptions": info.preemptions,
        "children": list(info.children),
        "pending_reason": info.pending_reason,
    }


def _command_text(command: Any, width: int = 50) -> str:
    if not isinstance(command, list):
        return ""
    text = " ".join(str(part) for part in command)  # pyright: ignore[reportUnknownVariableType, reportUnknownArgumentType]
    return text if len(text) <= width else text[: width - 3] + "..."


# ---------------------------------------------------------------------------------------------
# list


def cmd_list(args: argparse.Namespace) -> int:
    """``fray jobs list``."""
    if args.limit is not None and args.limit < 1:
        raise UsageError("--limit", f"{args.limit} is not valid; must be an integer >= 1")

    def local(store: StateStore) -> int:
        rows = [_record_row(r) for r in store.list_records()]
        return _print_rows(
            args, rows, show_command=True, empty=f"no runs recorded in {store.describe()}"
        )

    def remote(client: Any) -> int:
        rows = [_info_row(info) for info in client.list_jobs()]
        return _print_rows(args, rows, show_command=False, empty="no jobs")

    return _with_backend(args, local, remote)


def _print_rows(
    args: argparse.Namespace, rows: list[dict[str, Any]], *, show_command: bool, empty: str
) -> int:
    if args.limit is not None:
        rows = rows[-args.limit :]
    if args.json:
        print_json(rows)
        return 0
    if not rows:
        sys.stderr.write(f"fray: {empty}\n")
        return 0
    headers = ["JOB ID", "NAME", "STATUS", "EXIT", "STARTED", "DURATION"]
    if show_command:
        headers.append("COMMAND")
    table: list[list[Any]] = []
    for row in rows:
        cells: list[Any] = [
            row["job_id"],
            row["name"],
            row["status"],
            "-" if row["exit_code"] is None else row["exit_code"],
            format_time(row["started_at"] or row["submitted_at"]),
            format_duration(row["duration_s"]),
        ]
        if show_command:
            cells.append(_command_text(row.get("command")))
        table.append(cells)
    print_table(headers, table)
    return 0


# ---------------------------------------------------------------------------------------------
# status


def cmd_status(args: argparse.Namespace) -> int:
    """``fray jobs status ID``."""

    def local(store: StateStore) -> int:
        record = store.find(args.job_id)
        job_id = str(record["job_id"])
        status, error = effective_status(record)
        children = [
            str(r.get("job_id"))
            for r in store.list_records()
            if str(r.get("job_id", "")).startswith(job_id + "/")
        ]
        alive = runner_alive(record)
        if args.json:
            print_json({**record, "status": status.value, "error": error, "children": children})
            return 0
        row = _record_row(record)
        runner: dict[str, Any] = record.get("runner") or {}
        lines: list[tuple[str, Any]] = [
            ("job id", job_id),
            ("name", record.get("name")),
            ("status", status.value),
            ("exit code", "-" if record.get("exit_code") is None else record.get("exit_code")),
        ]
        if error:
            lines.append(("error", error))
        if record.get("stop_signal"):
            lines.append(("stopped by", record.get("stop_signal")))
        lines += [
            ("command", _command_text(record.get("command"), width=10_000)),
            ("cwd", record.get("cwd")),
            ("resources", _resources_text(record.get("resources"))),
            ("env", _env_text(record.get("env"))),
            (
                "attempts",
                f"{record.get('attempts', 0)} (failures {record.get('failures', 0)}, "
                f"preemptions {record.get('preemptions', 0)})",
            ),
            ("parent", record.get("parent") or "-"),
            ("children", ", ".join(children) or "-"),
            ("submitted", format_time(record.get("submitted_at"))),
            ("started", format_time(record.get("started_at"))),
            ("finished", format_time(record.get("finished_at"))),
            ("duration", format_duration(row["duration_s"])),
            (
                "runner",
                f"pid {runner.get('pid')} on {runner.get('host')}"
                + {True: " (running)", False: " (exited)", None: ""}[alive],
            ),
            ("log", store.log_path(job_id)),
        ]
        _print_pairs(lines)
        return 0

    def remote(client: Any) -> int:
        info: JobInfo = client.get_job(args.job_id).info()
        if args.json:
            print_json(_info_row(info))
            return 0
        row = _info_row(info)
        _print_pairs(
            [
                ("job id", info.job_id),
                ("name", info.name),
                ("status", info.status.value),
                ("exit code", "-" if info.exit_code is None else info.exit_code),
                ("error", info.error or "-"),
                *([("waiting", info.pending_reason)] if info.pending_reason else []),
                (
                    "attempts",
                    f"{info.attempts} (failures {info.failures}, preemptions {info.preemptions})",
                ),
                ("replicas", info.replicas),
                ("parent", info.parent or "-"),
                ("children", ", ".join(info.children) or "-"),
                ("submitted", format_time(info.submitted_at)),
                ("started", format_time(info.started_at)),
                ("finished", format_time(info.finished_at)),
                ("duration", format_duration(row["duration_s"])),
            ]
        )
        return 0

    return _with_backend(args, local, remote)


def _print_pairs(lines: Sequence[tuple[str, Any]]) -> None:
    width = max(len(key) for key, _ in lines)
    for key, value in lines:
        sys.stdout.write(f"{key + ':':<{width + 1}} {value}\n")
    sys.stdout.flush()


def _resources_text(resources: Any) -> str:
    if not isinstance(resources, dict):
        return "-"
    r: dict[str, Any] = resources  # pyright: ignore[reportUnknownVariableType]
    return (
        f"{r.get('device')}, {r.get('replicas')} replica(s), cpu {r.get('cpu')}, "
        f"ram {r.get('ram')}, disk {r.get('disk')}"
    )


def _env_text(env: Any) -> str:
    if not isinstance(env, dict) or not env:
        return "-"
    items: dict[str, Any] = env  # pyright: ignore[reportUnknownVariableType]
    return " ".join(f"{k}={v}" for k, v in sorted(items.items()))


# ---------------------------------------------------------------------------------------------
# logs


def cmd_logs(args: argparse.Namespace) -> int:
    """``fray jobs logs ID [-f] [--children]``."""

    def local(store: StateStore) -> int:
        record = store.find(args.job_id)
        job_id = str(record["job_id"])
        for line in _local_lines(store, job_id, follow=args.follow, children=args.children):
            _emit(line)
        return 0

    def remote(client: Any) -> int:
        handle = client.get_job(args.job_id)
        for line in handle.logs(follow=args.follow, include_children=args.children):
            _emit(line)
        return 0

    return _with_backend(args, local, remote)


def _emit(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def _local_lines(store: StateStore, job_id: str, *, follow: bool, children: bool) -> Iterator[str]:
    """A run's lines (and its children's, prefixed ``[child-id]``), in time order."""

    def ids() -> list[str]:
        if not children:
            return [job_id]
        found = [
            str(r.get("job_id"))
            for r in store.list_records()
            if str(r.get("job_id", "")).startswith(job_id + "/")
        ]
        return [job_id, *found]

    def all_finished(current: list[str]) -> bool:
        for one in current:
            try:
                if not effective_status(store.read_record(one))[0].is_finished:
                    return False
            except JobNotFoundError:
                continue
        return True

    offsets: dict[str, int] = {}
    delay = 0.02
    while True:
        current = ids()
        done = all_finished(current) if follow else True
        fresh: list[tuple[float, int, str]] = []
        for order, one in enumerate(current):
            lines, offsets[one] = store.read_log(one, offsets.get(one, 0))
            prefix = f"[{one}] " if one != job_id else ""
            fresh.extend((stamp, order, prefix + text) for stamp, text in lines)
        fresh.sort(key=lambda item: (item[0], item[1]))
        for _stamp, _order, text in fresh:
            yield text
        if done and not fresh:
            return
        if not fresh:
            time.sleep(delay)  # the log is written by another process: poll it, backing off
            delay = min(delay * 1.5, 0.5)
        else:
            delay = 0.02


# ---------------------------------------------------------------------------------------------
# stop


def cmd_stop(args: argparse.Namespace) -> int:
    """``fray jobs stop ID``."""

    def local(store: StateStore) -> int:
        record = store.find(args.job_id)
        job_id = str(record["job_id"])
        status, _error = effective_status(record)
        if status.is_finished:
            sys.stdout.write(f"job {job_id} is already {status.value}\n")
            return 0
        alive = runner_alive(record)
        runner: dict[str, Any] = record.get("runner") or {}
        if alive is None:
            raise CliError(
                f"job {job_id} runs on host {runner.get('host')}, not this one",
                hint="run 'fray jobs stop' on that host",
            )
        pid = int(runner["pid"])
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        except PermissionError as err:
            raise CliError(
                f"not allowed to signal the runner of job {job_id} (pid {pid}): {err}"
            ) from err
        grace = float(record.get("terminate_grace_s") or 5.0)
        timeout = args.timeout if args.timeout is not None else grace + 30.0
        deadline = time.monotonic() + timeout
        progress = Progress()
        delay = 0.02
        while True:
            record = store.read_record(job_id)
            status, _error = effective_status(record)
            if status.is_finished:
                break
            if runner_alive(record) is False:
                break
            if time.monotonic() >= deadline:
                progress.done()
                raise CliError(
                    f"job {job_id} did not stop within {timeout:g}s",
                    hint=f"its runner is pid {pid}; 'fray jobs status {job_id}' shows its state",
                )
            progress.show(f"stopping {job_id}")
            time.sleep(delay)  # waiting for another process to record the stop
            delay = min(delay * 1.5, 0.5)
        record = store.read_record(job_id)
        if record.get("status") not in ("stopped", "failed", "succeeded"):
            # The runner went away without writing its final state: record what happened.
            record.update(
                status="stopped",
                error="stopped by 'fray jobs stop'; the runner exited before recording it",
                finished_at=time.time(),
            )
            store.write_record(record)
        final, _ = effective_status(record)
        progress.done()
        sys.stdout.write(f"job {job_id} {final.value}\n")
        return 0

    def remote(client: Any) -> int:
        handle = client.get_job(args.job_id)
        if handle.status().is_finished:
            sys.stdout.write(f"job {handle.job_id} is already {handle.status().value}\n")
            return 0
        handle.terminate()
        sys.stdout.write(f"job {handle.job_id} {handle.status().value}\n")
        return 0

    return _with_backend(args, local, remote)


# ---------------------------------------------------------------------------------------------
# wait


def cmd_wait(args: argparse.Namespace) -> int:
    """``fray jobs wait ID...``: exit 0 if all succeeded, 1 if any did not, 124 on timeout."""
    if args.timeout is not None and args.timeout < 0:
        raise UsageError("--timeout", f"{args.timeout} is not valid; must be >= 0 seconds")

    def local(store: StateStore) -> int:
        ids = [str(store.find(one)["job_id"]) for one in args.job_ids]
        deadline = None if args.timeout is None else time.monotonic() + args.timeout
        progress = Progress()
        delay = 0.02
        while True:
            statuses = [effective_status(store.read_record(one))[0] for one in ids]
            if all(s.is_finished for s in statuses):
                break
            if deadline is not None and time.monotonic() >= deadline:
                progress.done(counts_line(statuses, len(ids)))
                sys.stderr.write(f"fray: timed out after {args.timeout:g}s\n")
                return 124
            progress.show(counts_line(statuses, len(ids)))
            time.sleep(delay)  # the runs are other processes: poll their records
            delay = min(delay * 1.5, 0.5)
        progress.done(counts_line(statuses, len(ids)))
        return _report_final(ids, statuses)

    def remote(client: Any) -> int:
        from fray._wait import wait_all

        handles = [client.get_job(one) for one in args.job_ids]
        try:
            statuses = wait_all(handles, timeout=args.timeout, raise_on_failure=False)
        except JobTimeoutError as err:
            sys.stderr.write(f"fray: {err}\n")
            return 124
        return _report_final([h.job_id for h in handles], statuses)

    return _with_backend(args, local, remote)


def _report_final(ids: Sequence[str], statuses: Sequence[JobStatus]) -> int:
    for one, status in zip(ids, statuses, strict=True):
        sys.stdout.write(f"{one} {status.value}\n")
    sys.stdout.flush()
    return 0 if all(s is JobStatus.SUCCEEDED for s in statuses) else 1
