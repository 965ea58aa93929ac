"""The ``fray`` command against Iris, end to end: a controller that is not there is one line
within seconds, and Ctrl-C or SIGTERM stop ``fray run`` (and its job) at once.

Each test prints the times it measured (``pytest -s`` shows them); the limits asserted are
generous, for a loaded 2-core machine, and only catch a hang or a return of Iris's
30-minute retries.
"""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time

import pytest

from fray.errors import FrayError
from fray_iris import IrisClient
from fray_testing.iris_cluster import LocalIrisCluster

pytestmark = pytest.mark.integration

DOWN = "127.0.0.1:1"  # nothing listens on port 1
EXPECTED = "cannot reach the Iris controller at http://127.0.0.1:1: connection refused"
PROBE_LIMIT_S = 10.0  # what the issue promises, in this process
PROCESS_LIMIT_S = 60.0  # a whole `fray` process, interpreter start and imports included
STOP_LIMIT_S = 2.0


def _fray(*args: str) -> list[str]:
    return [sys.executable, "-m", "fray.cli", *args]


def _env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("FRAY_CLIENT_SPEC", None)
    env.update(extra)
    return env


def test_client_for_a_controller_that_is_down_fails_at_once() -> None:
    start = time.monotonic()
    with pytest.raises(FrayError) as caught:
        IrisClient(DOWN)
    took = time.monotonic() - start
    print(f"\nIrisClient({DOWN!r}) raised after {took:.3f} s: {caught.value}")
    assert str(caught.value) == EXPECTED
    assert took < PROBE_LIMIT_S


@pytest.mark.parametrize(
    ("argv", "env"),
    [
        (["run", "--spec", f"iris://{DOWN}", "--", "true"], {}),
        (["jobs", "list", "--spec", f"iris://{DOWN}"], {}),
        (["jobs", "logs", "some-job", "--spec", f"iris://{DOWN}"], {}),
        (["doctor", "--connect"], {"FRAY_CLIENT_SPEC": f"iris://{DOWN}"}),
    ],
    ids=["run", "jobs-list", "jobs-logs", "doctor-connect"],
)
def test_fray_commands_name_a_controller_that_is_down(argv: list[str], env: dict[str, str]) -> None:
    start = time.monotonic()
    done = subprocess.run(
        _fray(*argv),
        env=_env(**env),
        capture_output=True,
        text=True,
        timeout=PROCESS_LIMIT_S * 2,
        check=False,
    )
    took = time.monotonic() - start
    output = done.stdout + done.stderr
    print(f"\nfray {' '.join(argv)}: exit {done.returncode} after {took:.2f} s (whole process)")
    assert done.returncode == 1, output
    assert EXPECTED in output
    assert output.count("cannot reach") == 1, output
    assert "Traceback" not in output and "retrying" not in output, output
    assert took < PROCESS_LIMIT_S


# -- stopping `fray run` ----------------------------------------------------------------------


def _lines(stream: object, into: queue.Queue[str | None]) -> None:
    for line in iter(stream.readline, ""):  # type: ignore[attr-defined]
        into.put(line)
    into.put(None)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_stops_fray_run_and_its_job(iris_cluster: LocalIrisCluster, signum: int) -> None:
    cluster = iris_cluster
    name = f"cli-stop-{signal.Signals(signum).name.lower()}-{os.getpid()}"
    proc = subprocess.Popen(
        _fray(
            "run",
            "--spec",
            cluster.spec,
            "--name",
            name,
            "--",
            "sh",
            "-c",
            "echo ready; exec sleep 600",
        ),
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines: queue.Queue[str | None] = queue.Queue()
    threading.Thread(target=_lines, args=(proc.stdout, lines), daemon=True).start()
    seen: list[str] = []
    try:
        deadline = time.monotonic() + 180
        while not any(line.strip() == "ready" for line in seen):
            line = lines.get(timeout=max(deadline - time.monotonic(), 0.01))
            assert line is not None, f"fray run ended early: {''.join(seen)}"
            seen.append(line)
        start = time.monotonic()
        proc.send_signal(signum)
        code = proc.wait(timeout=60)
        took = time.monotonic() - start
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    while (line := lines.get(timeout=10)) is not None:
        seen.append(line)
    print(f"\n{signal.Signals(signum).name} -> fray run exited {code} after {took:.3f} s")
    assert code == 128 + signum, "".join(seen)
    assert took < STOP_LIMIT_S * 2.5, f"took {took:.2f} s"  # 2 s promised; generous here
    client = IrisClient(cluster.url)
    try:
        assert client.get_job(name).status().value == "stopped"
    finally:
        client.shutdown()
