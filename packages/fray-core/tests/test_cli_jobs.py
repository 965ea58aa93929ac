"""``fray jobs`` on the local backend: a later process sees, follows and stops recorded runs."""

from __future__ import annotations

import signal
import sys
from pathlib import Path

import pytest

from fray_cli_support import cli_env, fray, fray_json, read_line, start, stop, wait_gone

pytestmark = pytest.mark.integration
PY = sys.executable

WAIT_FOR_GATE = (
    "import os, sys, time\n"
    "print('one', os.getpid(), flush=True)\n"
    "deadline = time.time() + 60\n"
    "while not os.path.exists(sys.argv[1]) and time.time() < deadline: time.sleep(0.02)\n"
    "print('two', flush=True)\n"
)
SLEEPER = "import os, time; print('ready', os.getpid(), flush=True); time.sleep(300)"


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return cli_env(tmp_path)


def test_runs_are_listed_and_shown_by_a_later_process(env: dict[str, str]) -> None:
    assert fray(env, "run", "--name", "good", "--", "echo", "all fine").returncode == 0
    assert (
        fray(env, "run", "--name", "bad", "--", "bash", "-c", "echo broken; exit 4").returncode == 4
    )
    records = fray_json(env, "jobs", "list")
    assert [(r["name"], r["status"], r["exit_code"]) for r in records] == [
        ("good", "succeeded", 0),
        ("bad", "failed", 4),
    ]
    table = fray(env, "jobs", "list")
    assert table.returncode == 0
    header, *rows = table.stdout.splitlines()
    assert header.split()[:3] == ["JOB", "ID", "NAME"]
    assert "succeeded" in rows[0] and "echo all fine" in rows[0] and "failed" in rows[1]
    good_id = records[0]["job_id"]
    shown = fray(env, "jobs", "status", good_id[:-3])  # a unique prefix
    assert shown.returncode == 0
    assert f"job id:    {good_id}" in shown.stdout and "status:    succeeded" in shown.stdout
    status = fray_json(env, "jobs", "status", "bad")  # a unique name
    assert status["error"].startswith("exited with code 4")
    assert fray(env, "jobs", "logs", good_id).stdout == "all fine\n"
    assert fray_json(env, "jobs", "list", "--limit", "1")[0]["name"] == "bad"


def test_stop_from_another_process(env: dict[str, str]) -> None:
    proc = start(env, "run", "--name", "sleeper", "--", PY, "-c", SLEEPER)
    try:
        line = read_line(proc)
        job_pid = int(line.split()[1])
        assert fray_json(env, "jobs", "status", "sleeper")["status"] == "running"
        done = fray(env, "jobs", "stop", "sleeper")
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip().endswith("stopped")
        assert proc.wait(timeout=60) == 128 + signal.SIGTERM
        assert wait_gone([job_pid]) == []
    finally:
        stop(proc)
    status = fray_json(env, "jobs", "status", "sleeper")
    assert status["status"] == "stopped" and status["stop_signal"] == "SIGTERM"
    again = fray(env, "jobs", "stop", "sleeper")
    assert again.returncode == 0 and "already stopped" in again.stdout
    refused = fray(env, "jobs", "stop", "sleeper", "--timeout", "-1")  # whatever its state
    assert refused.returncode == 2 and "argument --timeout: '-1' is not valid" in refused.stderr


def test_logs_follow_until_the_job_ends(env: dict[str, str], tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    run = start(env, "run", "--name", "chatty", "--", PY, "-c", WAIT_FOR_GATE, str(gate))
    follower = None
    try:
        assert read_line(run).startswith("one ")
        follower = start(env, "jobs", "logs", "-f", "chatty")
        assert read_line(follower).startswith("one ")
        assert follower.poll() is None  # still following
        gate.touch()
        assert read_line(follower) == "two"
        assert follower.wait(timeout=60) == 0
        assert run.wait(timeout=60) == 0
    finally:
        stop(run)
        if follower is not None:
            stop(follower)


def test_killed_runner_shows_failed_and_its_job_is_gone(env: dict[str, str]) -> None:
    proc = start(env, "run", "--name", "doomed", "--", PY, "-c", SLEEPER)
    try:
        job_pid = int(read_line(proc).split()[1])
        proc.kill()  # SIGKILL: the runner gets no chance to record anything
        proc.wait(timeout=30)
        assert wait_gone([job_pid]) == []
    finally:
        stop(proc)
    status = fray_json(env, "jobs", "status", "doomed")
    assert status["status"] == "failed" and "was killed" in status["error"]
    done = fray(env, "jobs", "stop", "doomed")
    assert done.returncode == 0 and "already failed" in done.stdout


def test_child_runs_are_recorded_and_their_logs_interleaved(env: dict[str, str]) -> None:
    inner = [PY, "-m", "fray.cli", "run", "--name", "inner", "--", "echo", "from-inner"]
    done = fray(env, "run", "--name", "outer", "--", *inner)
    assert done.returncode == 0, done.stderr
    records = {r["name"]: r for r in fray_json(env, "jobs", "list")}
    outer_id, inner_id = records["outer"]["job_id"], records["inner"]["job_id"]
    assert inner_id.startswith(outer_id + "/") and records["inner"]["parent"] == outer_id
    assert fray_json(env, "jobs", "status", outer_id)["children"] == [inner_id]
    plain = fray(env, "jobs", "logs", outer_id).stdout.splitlines()
    assert plain == ["from-inner"]  # the outer job's own output (the inner run streamed it)
    mixed = fray(env, "jobs", "logs", outer_id, "--children").stdout.splitlines()
    assert sorted(mixed) == sorted(["from-inner", f"[{inner_id}] from-inner"])


def test_wait_reports_and_exit_codes(env: dict[str, str]) -> None:
    assert fray(env, "run", "--name", "ok", "--", "true").returncode == 0
    assert fray(env, "run", "--name", "nope", "--", "false").returncode == 1
    both = fray(env, "jobs", "wait", "ok", "nope")
    assert both.returncode == 1
    assert [line.split()[1] for line in both.stdout.splitlines()] == ["succeeded", "failed"]
    assert both.stderr == ""  # no progress line when piped
    assert fray(env, "jobs", "wait", "ok").returncode == 0


def test_unknown_and_ambiguous_ids_are_one_line_errors(env: dict[str, str]) -> None:
    missing = fray(env, "jobs", "status", "no-such-job")
    assert missing.returncode == 1
    assert missing.stderr.splitlines() == [
        "fray jobs status: error: no recorded run matches 'no-such-job'",
        "hint: 'fray jobs list' shows the known jobs",
    ]
    for _ in range(2):
        assert fray(env, "run", "--name", "twin", "--", "true").returncode == 0
    ambiguous = fray(env, "jobs", "logs", "twin")
    assert ambiguous.returncode == 1 and "matches 2 runs" in ambiguous.stderr
    debug = fray(env, "jobs", "status", "no-such-job", "--debug")
    assert debug.returncode == 1 and "Traceback" in debug.stderr


def test_empty_state_dir(env: dict[str, str]) -> None:
    done = fray(env, "jobs", "list")
    assert done.returncode == 0 and done.stdout == "" and "no runs recorded" in done.stderr
    assert fray_json(env, "jobs", "list") == []
