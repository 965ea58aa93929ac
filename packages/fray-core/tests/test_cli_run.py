"""``fray run`` end to end: real subprocesses, real output and exit codes."""

from __future__ import annotations

import json
import os
import signal
import stat
import sys
from pathlib import Path

import pytest

from fray_cli_support import cli_env, fray, fray_json, read_line, start, stop, wait_gone

pytestmark = pytest.mark.integration
PY = sys.executable


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return cli_env(tmp_path)


def test_success_streams_output_and_exits_zero(env: dict[str, str]) -> None:
    done = fray(env, "run", "--", PY, "-c", "print('hello'); print('world')")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "hello\nworld\n"
    assert done.stderr == ""  # piped: fray adds nothing of its own on success


def test_failure_exits_with_the_jobs_code(env: dict[str, str]) -> None:
    done = fray(
        env, "run", "--name", "fails", "--", "bash", "-c", "echo partial; echo oops >&2; exit 7"
    )
    assert done.returncode == 7
    assert done.stdout == "partial\noops\n"
    assert "fails-" in done.stderr and "exited with code 7" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("grace", ["soon", "-1", "nan"])
def test_a_bad_grace_period_is_refused_before_the_job_starts(
    env: dict[str, str], tmp_path: Path, grace: str
) -> None:
    marker = tmp_path / "ran"
    done = fray({**env, "FRAY_TERMINATE_GRACE_S": grace}, "run", "--", "touch", str(marker))
    assert done.returncode != 0
    assert "FRAY_TERMINATE_GRACE_S" in done.stderr and "seconds >= 0" in done.stderr
    assert "Traceback" not in done.stderr
    assert not marker.exists()


def test_an_empty_name_is_refused_as_the_api_refuses_it(
    env: dict[str, str], tmp_path: Path
) -> None:
    marker = tmp_path / "ran"
    done = fray(env, "run", "--name", "", "--", "touch", str(marker))
    assert done.returncode == 2
    assert "--name: '' is not valid" in done.stderr and "1-256 printable" in done.stderr
    assert not marker.exists()


def test_signal_death_maps_to_128_plus_signal(env: dict[str, str]) -> None:
    # A SIGKILL Fray did not send is a failure on one machine (no preemption retries), and
    # `fray run` and `fray jobs` report the same exit code.
    done = fray(env, "run", "--name", "oom", "--", "bash", "-c", "kill -KILL $$")
    assert done.returncode == 128 + signal.SIGKILL
    assert "not by Fray" in done.stderr
    listed = fray(env, "jobs", "list")
    (row,) = [line for line in listed.stdout.splitlines() if " oom " in f" {line} "]
    assert " 137 " in f" {row} "


def test_env_vars_reach_the_job(env: dict[str, str]) -> None:
    script = "import os; print(os.environ['GREETING'], os.environ['WITH_EQUALS'])"
    done = fray(
        env, "run", "--env", "GREETING=hi", "--env", "WITH_EQUALS=a=b", "--", PY, "-c", script
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "hi a=b\n"


def test_output_streams_while_the_job_runs(env: dict[str, str], tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    script = (
        "import os, time\n"
        "print('first', flush=True)\n"
        f"deadline = time.time() + 60\n"
        f"while not os.path.exists({str(gate)!r}) and time.time() < deadline: time.sleep(0.02)\n"
        "print('second')\n"
    )
    proc = start(env, "run", "--", PY, "-c", script)
    try:
        assert read_line(proc) == "first"  # arrives while the job is still waiting
        assert proc.poll() is None
        gate.touch()
        assert read_line(proc) == "second"
        assert proc.wait(timeout=60) == 0
    finally:
        stop(proc)


CHILD_TREE = (
    "import os, subprocess, sys, time\n"
    "child = subprocess.Popen(['sleep', '300'])\n"
    "print(os.getpid(), child.pid, flush=True)\n"
    "time.sleep(300)\n"
)


def test_ctrl_c_stops_the_job_and_leaves_no_process(env: dict[str, str]) -> None:
    proc = start(env, "run", "--name", "interrupted", "--", PY, "-c", CHILD_TREE)
    try:
        pids = [int(p) for p in read_line(proc).split()]
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=60) == 130
        assert wait_gone(pids) == []
        assert proc.stderr is not None and "stopped" in proc.stderr.read()
    finally:
        stop(proc)
    (record,) = fray_json(env, "jobs", "list")
    assert record["status"] == "stopped"
    status = fray_json(env, "jobs", "status", "interrupted")
    assert status["stop_signal"] == "SIGINT"


def test_secrets_are_redacted_in_output_and_state(env: dict[str, str], tmp_path: Path) -> None:
    secret = "hunter2-very-secret"
    done = fray(
        env,
        "run",
        "--name",
        "secretive",
        "--env",
        f"API_TOKEN={secret}",
        "--env",
        "PLAIN_SETTING=visible",
        "--",
        "bash",
        "-c",
        'echo "token=$API_TOKEN plain=$PLAIN_SETTING"; test "$API_TOKEN" = ' + secret,
    )
    assert done.returncode == 0, done.stderr  # the job itself got the real value
    assert done.stdout == "token=*** plain=visible\n"
    status = fray_json(env, "jobs", "status", "secretive")
    assert status["env"] == {"API_TOKEN": "***", "PLAIN_SETTING": "visible"}
    assert secret not in " ".join(status["command"])
    logs = fray(env, "jobs", "logs", "secretive")
    assert logs.stdout == "token=*** plain=visible\n"
    for path in (tmp_path / "state").rglob("*"):
        if path.is_file():
            assert secret.encode() not in path.read_bytes(), path


def test_state_files_are_private(env: dict[str, str], tmp_path: Path) -> None:
    assert fray(env, "run", "--", "echo", "hi").returncode == 0
    state = tmp_path / "state"
    paths = [state, *state.rglob("*")]
    assert any(p.name == "record.json" for p in paths) and any(p.name == "log" for p in paths)
    for path in paths:
        mode = stat.S_IMODE(path.stat().st_mode)
        assert mode == (0o700 if path.is_dir() else 0o600), (path, oct(mode))


def test_tpu_job_runs_one_replica_per_vm(env: dict[str, str]) -> None:
    script = "import os; print(os.environ['MEGASCALE_SLICE_ID'], os.environ['TPU_WORKER_ID'])"
    done = fray(
        env, "run", "--name", "pod", "--tpu", "v4-16", "--slices", "2", "--", PY, "-c", script
    )
    assert done.returncode == 0, done.stderr
    # One replica per VM, each line prefixed with the replica's index.
    assert sorted(done.stdout.splitlines()) == ["[0] 0 0", "[1] 0 1", "[2] 1 0", "[3] 1 1"]
    status = fray_json(env, "jobs", "status", "pod")
    assert status["resources"]["replicas"] == 4
    assert status["resources"]["device"] == "tpu v4-16 x2 slice(s)"


@pytest.mark.parametrize(
    ("args", "argument", "detail"),
    [
        (["--ram", "16potatoes"], "--ram", "'16g'"),
        (["--disk", "lots"], "--disk", "'512Mi'"),
        (["--env", "NOEQUALS"], "--env", "NAME=VALUE"),
        (["--env", "1BAD=x"], "--env", "letters, digits"),
        (["--tpu", "v5p-7"], "--tpu", "v5p-8"),
        (["--gpu", "H100:zero"], "--gpu", ">= 1"),
        (["--gpu", "H1000"], "--gpu", "H100"),
        (["--tpu", "v4-8", "--gpu", "H100"], "--gpu", "--tpu"),
        (["--slices", "2"], "--slices", "--tpu"),
        (["--cpu", "-1"], "--cpu", "greater than or equal to 0"),
        (["--name", "bad name"], "--name", "without spaces"),
        (["--max-retries-failure", "-1"], "--max-retries-failure", "greater than or equal to 0"),
        (["--cpu", "many"], "--cpu", "invalid float value"),
        (["--spec", "nosuchbackend"], "--spec", "unknown backend"),
    ],
)
def test_bad_arguments_exit_2_naming_the_argument(
    env: dict[str, str], tmp_path: Path, args: list[str], argument: str, detail: str
) -> None:
    done = fray(env, "run", *args, "--", "echo", "never")
    expected = 1 if argument == "FRAY_CLIENT_SPEC" else 2
    assert done.returncode == expected, done.stderr
    assert argument in done.stderr and detail in done.stderr
    assert "Traceback" not in done.stderr
    assert "never" not in done.stdout
    assert not (tmp_path / "state" / "runs").exists() or not any(
        (tmp_path / "state" / "runs").iterdir()
    )


def test_missing_command_is_a_usage_error(env: dict[str, str]) -> None:
    done = fray(env, "run", "--name", "x")
    assert done.returncode == 2
    assert "argument CMD" in done.stderr and "fray run -- " in done.stderr


def test_unwritable_state_dir_is_one_clear_error(env: dict[str, str], tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    env["FRAY_STATE_DIR"] = str(blocker / "state")
    done = fray(env, "run", "--", "echo", "hi")
    assert done.returncode == 1
    assert "cannot write the state directory" in done.stderr and "hint: " in done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""


def test_default_name_comes_from_the_command(env: dict[str, str], tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text("print('training')\n")
    assert fray(env, "run", "--", PY, str(script)).returncode == 0
    (record,) = fray_json(env, "jobs", "list")
    assert record["name"] == "train"
    assert json.loads(json.dumps(record))["status"] == "succeeded"
    assert os.path.basename(record["command"][-1]) == "train.py"
