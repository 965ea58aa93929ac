"""``fray jobs list|status|logs|stop|wait``, written once against the client protocol: on
Ray and Iris the cluster answers; locally, the runs ``fray run`` recorded (``_runs``)."""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any, cast

from fray import JobStatus, wait_all
from fray.cli._common import (
    CliError,
    add_command,
    format_duration,
    format_time,
    number,
    open_client,
    print_json,
    print_pairs,
    print_table,
)
from fray.errors import JobTimeoutError

__all__ = ["add_parser"]

# Labels of the facts whose names are long or unclear (`fray jobs status`).
_LABELS = {"pending_reason": "waiting", "preemptions": "preempted", "stop_signal": "signal"}


def add_parser(sub: Any) -> None:
    """Adds ``fray jobs`` and its subcommands."""
    jobs = add_command(
        sub,
        "jobs",
        None,
        help="list, inspect, follow and stop jobs",
        description="Jobs of the chosen backend: on Ray and Iris the cluster's; locally, the "
        "runs 'fray run' recorded in the state directory (FRAY_STATE_DIR).",
    )
    inner = jobs.add_subparsers(metavar="COMMAND")
    p = add_command(inner, "list", cmd_list, True, help="list jobs, oldest first")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.add_argument("--limit", type=number(int, 1), metavar="N", help="only the N most recent")
    p = add_command(inner, "status", cmd_status, True, help="show one job in detail")
    p.add_argument("job_id", metavar="ID", help="job id (locally also a unique prefix or name)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p = add_command(inner, "logs", cmd_logs, True, help="print a job's output")
    p.add_argument("job_id", metavar="ID")
    p.add_argument("-f", "--follow", action="store_true", help="keep printing until the job ends")
    p.add_argument("--children", action="store_true", help="interleave child jobs' lines")
    p = add_command(inner, "stop", cmd_stop, True, help="stop a running job")
    p.add_argument("job_id", metavar="ID")
    p.add_argument("--timeout", type=number(float, 0), default=60.0, metavar="S", help="at most")
    p = add_command(inner, "wait", cmd_wait, True, help="wait for jobs (exit 0: all succeeded)")
    p.add_argument("job_ids", metavar="ID", nargs="+")
    p.add_argument("--timeout", type=number(float, 0), metavar="S", help="exit 124 after S s")


def _facts(info: Any) -> dict[str, Any]:
    """A job's facts (a recorded run's info is a dict already), with its duration."""
    facts = cast("dict[str, Any]", info) if isinstance(info, dict) else info.model_dump(mode="json")
    started, finished = facts.get("started_at"), facts.get("finished_at")
    end = finished or (None if JobStatus(facts["status"]).is_finished else time.time())
    return {**facts, "duration_s": end - started if started and end else None}


def cmd_list(args: argparse.Namespace) -> int:
    """``fray jobs list``."""
    with open_client(args.spec, runs=True) as client:
        rows = [_facts(info) for info in client.list_jobs()][-(args.limit or 0) :]
        where = getattr(client, "root", None)  # the state directory, locally
    if args.json:
        print_json(rows)
    elif not rows:
        print(f"fray: no runs recorded in {where}" if where else "fray: no jobs", file=sys.stderr)
    else:
        width = 7 if where else 6  # local runs show their command
        headers = ["JOB ID", "NAME", "STATUS", "EXIT", "STARTED", "DURATION", "COMMAND"]
        table = [
            [
                *(row[key] for key in ("job_id", "name", "status", "exit_code")),
                format_time(row["started_at"] or row["submitted_at"]),
                format_duration(row["duration_s"]),
                " ".join(row.get("command", ()))[:50],
            ]
            for row in rows
        ]
        print_table(headers[:width], [row[:width] for row in table])
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    """``fray jobs status ID``."""
    with open_client(args.spec, runs=True) as client:
        facts = _facts(client.get_job(args.job_id).info())
    if args.json:
        print_json(facts)
        return 0
    pairs: list[tuple[str, Any]] = []
    for key, value in facts.items():
        if isinstance(value, dict):
            value = ", ".join(f"{k}={v}" for k, v in value.items() if v is not None) or "-"  # pyright: ignore[reportUnknownVariableType]
        elif isinstance(value, list):
            value = " ".join(map(str, value)) or "-"  # pyright: ignore[reportUnknownArgumentType]
        elif key.endswith(("_at", "_s")):
            value = (format_time if key.endswith("_at") else format_duration)(value)
        label = key.removesuffix("_at").removesuffix("_s").replace("_", " ")
        if value is not None:
            pairs.append((_LABELS.get(key, label), value))
    print_pairs(pairs)
    return 0


def cmd_logs(args: argparse.Namespace) -> int:
    """``fray jobs logs ID [-f] [--children]``."""
    with open_client(args.spec, runs=True) as client:
        handle = client.get_job(args.job_id)
        for line in handle.logs(follow=args.follow, include_children=args.children):
            print(line, flush=True)
    return 0


def cmd_stop(args: argparse.Namespace) -> int:
    """``fray jobs stop ID``."""
    with open_client(args.spec, runs=True) as client:
        handle = client.get_job(args.job_id)
        status = handle.status()
        if status.is_finished:
            print(f"job {handle.job_id} is already {status.value}")
            return 0
        handle.terminate()
        try:
            (status,) = wait_all([handle], timeout=args.timeout, raise_on_failure=False)
        except JobTimeoutError:
            raise CliError(
                f"job {handle.job_id} did not stop within {args.timeout:g}s",
                hint=f"'fray jobs status {handle.job_id}' shows its state",
            ) from None
    print(f"job {handle.job_id} {status.value}")
    return 0


def cmd_wait(args: argparse.Namespace) -> int:
    """``fray jobs wait ID...``: exit 0 if all succeeded, 1 if any did not, 124 on timeout."""
    with open_client(args.spec, runs=True) as client:
        handles = [client.get_job(one) for one in args.job_ids]
        try:
            statuses = wait_all(handles, timeout=args.timeout, raise_on_failure=False)
        except JobTimeoutError as err:
            print(f"fray: {err}", file=sys.stderr)
            return 124
    for handle, status in zip(handles, statuses, strict=True):
        print(handle.job_id, status.value)
    return 0 if all(s is JobStatus.SUCCEEDED for s in statuses) else 1
