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
import socket
import subprocess
import sys
import threading
import time
from typing import Any

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
SLEEPER = "echo ready; exec sleep 600"


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


class FreezableRelay:
    """A TCP relay to the controller that can be frozen: it then keeps every connection open
    but passes no byte on, as a controller that hangs would."""

    def __init__(self, address: str) -> None:
        host, port = address.rsplit(":", 1)
        self._target = (host, int(port))
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.address = f"127.0.0.1:{self._listener.getsockname()[1]}"
        self.frozen = threading.Event()
        self._sockets: list[socket.socket] = [self._listener]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
                upstream = socket.create_connection(self._target)
            except OSError:
                return
            self._sockets += [client, upstream]
            for src, dst in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(src, dst), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        while True:
            try:
                data = src.recv(65536)
                if not data:
                    dst.shutdown(socket.SHUT_WR)
                    return
                if not self.frozen.is_set():
                    dst.sendall(data)
            except OSError:
                return

    def close(self) -> None:
        for sock in self._sockets:
            sock.close()


def _lines(stream: object, into: queue.Queue[str | None]) -> None:
    for line in iter(stream.readline, ""):  # type: ignore[attr-defined]
        into.put(line)
    into.put(None)


def _start_fray_run(spec: str, name: str) -> tuple[subprocess.Popen[str], queue.Queue[str | None]]:
    """``fray run`` of a job that prints ``ready`` and then sleeps, with its output lines."""
    proc = subprocess.Popen(
        _fray(
            "run", "--spec", spec, "--name", name, "--", "sh", "-c", "echo ready; exec sleep 600"
        ),
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines: queue.Queue[str | None] = queue.Queue()
    threading.Thread(target=_lines, args=(proc.stdout, lines), daemon=True).start()
    return proc, lines


def _signal_once_ready(
    proc: subprocess.Popen[str], lines: queue.Queue[str | None], signum: int, before: Any = None
) -> tuple[int, float, str]:
    """Waits for the job's ``ready``, sends ``signum``; the exit code, the seconds from the
    signal to the exit, and everything ``fray run`` printed."""
    seen: list[str] = []
    try:
        deadline = time.monotonic() + 180
        while not any(line.strip() == "ready" for line in seen):
            line = lines.get(timeout=max(deadline - time.monotonic(), 0.01))
            assert line is not None, f"fray run ended early: {''.join(seen)}"
            seen.append(line)
        if before is not None:
            before()
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
    return code, took, "".join(seen)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_stops_fray_run_and_its_job(iris_cluster: LocalIrisCluster, signum: int) -> None:
    name = f"cli-stop-{signal.Signals(signum).name.lower()}-{os.getpid()}"
    proc, lines = _start_fray_run(iris_cluster.spec, name)
    code, took, output = _signal_once_ready(proc, lines, signum)
    print(f"\n{signal.Signals(signum).name} -> fray run exited {code} after {took:.3f} s")
    assert code == 128 + signum, output
    assert took < STOP_LIMIT_S * 2.5, f"took {took:.2f} s"  # 2 s promised; generous here
    client = IrisClient(iris_cluster.url)
    try:
        assert client.get_job(name).status().value == "stopped"
    finally:
        client.shutdown()


def test_a_signal_stops_fray_run_when_the_controller_hangs(iris_cluster: LocalIrisCluster) -> None:
    relay = FreezableRelay(iris_cluster.address)
    name = f"cli-hung-{os.getpid()}"
    try:
        proc, lines = _start_fray_run(f"iris://{relay.address}", name)
        code, took, output = _signal_once_ready(proc, lines, signal.SIGINT, relay.frozen.set)
    finally:
        relay.close()
    print(f"\nSIGINT with the controller hung -> fray run exited {code} after {took:.3f} s")
    assert code == 130, output
    assert "did not confirm" in output, output
    assert took < STOP_LIMIT_S * 2.5, f"took {took:.2f} s"
    client = IrisClient(iris_cluster.url)  # the job is left running: stop it directly
    try:
        client.get_job(name).terminate()
    finally:
        client.shutdown()
