"""Fray against its predecessor (``marin-fray``), the same user code side by side.

The predecessor is installed, once, into a venv of its own under the user's cache
(``~/.cache/fray-bench/predecessor``, made with ``uv venv`` and ``uv pip install``, and reused
while it holds the pinned version). ``_user_code.py`` is run by both interpreters: Fray's (the
one running this module) and the predecessor's. Each run starts one fresh interpreter per
side; for each scenario the two are asked for a sample in turn (a, b, b, a, ...), the warm-up
round is dropped and the median of the repeats kept. Three such runs give the min, median and
max of the ratio Fray speed ÷ predecessor (predecessor's time / Fray's), the row's number.

Rows here cover the local backend; the Iris rows (``FrayIrisClient`` on a local Iris cluster,
``bench_iris.py``) and the Zephyr pipeline row (``bench_zephyr.py``) belong with the modules
that start those, which reuse this venv (the wheel pins ``marin-iris`` and ``marin-rigging`` to
its own build, so it holds the predecessor's Iris client too), :class:`Side`, :func:`measure`
and :func:`ratio_rows`.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import IO, Any

from _bench import alternate, at_least, failed_row, main, median

PREDECESSOR = "marin-fray==0.2.20.dev202606180959"
PREDECESSOR_PYTHON = "3.11"
RUNS = 3
MIN_REPEATS = 7  # per run, as in the issue that set the targets
SCRIPT = Path(__file__).resolve().with_name("_user_code.py")

# scenario in _user_code.py -> (row name, what one sample is per)
SCENARIOS = {
    "job_wait": ("vs predecessor: trivial job submit(...).wait(), one at a time", "job"),
    "jobs_wait_all": ("vs predecessor: 1,000 trivial jobs + wait_all", "job"),
    "actor_remote": ("vs predecessor: actor .remote().result()", "call"),
    "actor_blocking": ("vs predecessor: actor blocking call handle.method(x)", "call"),
}
HOW = {
    "job_wait": "median latency of 200 jobs per sample, the request built once",
    "jobs_wait_all": "1,000 submits then wait_all, wall time / 1,000 per sample",
    "actor_remote": "median latency of 2,000 calls per sample",
    "actor_blocking": "wall time of 20,000 calls / 20,000 per sample",
}


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(Path.home(), ".cache")
    return Path(base) / "fray-bench" / "predecessor"


def _installed_version(python: Path) -> str | None:
    code = "import importlib.metadata as m; print(m.version('marin-fray'))"
    try:
        proc = subprocess.run(
            [str(python), "-c", code], capture_output=True, text=True, timeout=60, check=False
        )
    except OSError:
        return None
    return proc.stdout.strip() if proc.returncode == 0 else None


def predecessor_python() -> Path:
    """The predecessor venv's interpreter, creating the venv if it is missing or stale.

    Raises:
        RuntimeError: ``uv`` is not on PATH, or it could not make the venv.
    """
    venv = _cache_dir()
    python = venv / "bin" / "python"
    wanted = PREDECESSOR.split("==", 1)[1]
    if python.exists() and _installed_version(python) == wanted:
        return python
    uv = shutil.which("uv")
    if uv is None:
        raise RuntimeError(f"uv is not on PATH: it installs {PREDECESSOR} into {venv}")
    for argv in (
        [uv, "venv", "--quiet", "--python", PREDECESSOR_PYTHON, str(venv)],
        [uv, "pip", "install", "--quiet", "--python", str(python), PREDECESSOR],
    ):
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=900, check=False)
        if proc.returncode != 0:
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
            raise RuntimeError(f"`{' '.join(argv[1:3])}` failed: {' / '.join(tail)}")
    return python


class Side:
    """One interpreter serving a user-code script's scenarios (``_user_code.py`` by default):
    ``ready``, then one JSON line per command (other lines, a library's logging, are skipped).

    A subclass may serve over other streams: it calls :meth:`attach` instead of ``__init__``
    and overrides :meth:`close`."""

    def __init__(self, python: str | Path, workdir: str, script: Path = SCRIPT) -> None:
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
        env["PYTHONUNBUFFERED"] = "1"
        self.proc = subprocess.Popen(
            [str(python), str(script)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=workdir,  # nothing there shadows either side's ``fray``
            env=env,
        )
        assert self.proc.stdout is not None and self.proc.stdin is not None
        try:
            self.attach(self.proc.stdout, self.proc.stdin, f"{python} {script.name}")
        except RuntimeError:
            self.close()
            raise

    def attach(self, reader: IO[str], writer: IO[str], label: str) -> None:
        """Serve through ``reader``/``writer``; waits for ``ready``.

        Raises:
            RuntimeError: The other end said something else first.
        """
        self._reader, self._writer, self.label = reader, writer, label
        ready = reader.readline().strip()
        if ready != "ready":
            raise RuntimeError(f"{label} did not start (said {ready!r})")

    def sample(self, scenario: str) -> float:
        self._writer.write(scenario + "\n")
        self._writer.flush()
        while True:
            line = self._reader.readline()
            if not line:
                raise RuntimeError(f"{self.label} exited during {scenario!r}")
            if line.startswith("{"):
                return float(json.loads(line)["seconds"])

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.write("quit\n")
                self.proc.stdin.close()
                self.proc.wait(timeout=60)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()


def measure(
    start: Callable[[], dict[str, Side]], scenarios: Iterable[str], repeats: int
) -> dict[str, list[tuple[float, float]]]:
    """Per scenario, one (Fray, predecessor) pair of median seconds per run; ``start`` gives
    each run its fresh ``fray`` and ``predecessor`` sides (closed at the end of the run)."""
    found: dict[str, list[tuple[float, float]]] = {name: [] for name in scenarios}
    for _ in range(RUNS):
        sides = start()
        try:
            for scenario in found:
                samples = alternate(
                    {n: (lambda s=s, c=scenario: s.sample(c)) for n, s in sides.items()},
                    repeats,
                )
                found[scenario].append((median(samples["fray"]), median(samples["predecessor"])))
        finally:
            for side in sides.values():
                side.close()
    return found


def _local_sides(pred: Path, workdir: str) -> dict[str, Side]:
    sides = {"fray": Side(sys.executable, workdir)}
    try:
        sides["predecessor"] = Side(pred, workdir)
    except BaseException:
        sides["fray"].close()
        raise
    return sides


def _time(seconds: float) -> str:
    return f"{seconds * 1e3:.2f} ms" if seconds >= 1e-3 else f"{seconds * 1e6:.2f} us"


def ratio_rows(
    found: dict[str, list[tuple[float, float]]],
    repeats: int,
    scenarios: Mapping[str, tuple[str, str]],
    how: Mapping[str, str],
) -> list[dict[str, Any]]:
    """One row per scenario: the median over the runs of Fray speed / predecessor, with min
    and max; ``scenarios`` names each row and what a sample is per, ``how`` says how."""
    out: list[dict[str, Any]] = []
    for scenario, runs in found.items():
        name, per = scenarios[scenario]
        ratios = sorted(p / f for f, p in runs)
        fray_s = median(f for f, _ in runs)
        pred_s = median(p for _, p in runs)
        ratio = median(ratios)
        row = at_least(
            name,
            ratio,
            1.0,
            "x",
            target=">= 1.0x predecessor (median of 3 runs)",
            ratio=ratio,
            note=f"Fray {_time(fray_s)} vs predecessor {_time(pred_s)} per {per}; Fray speed "
            f"/ predecessor min {ratios[0]:.2f}x, median {ratio:.2f}x, max {ratios[-1]:.2f}x "
            f"over {RUNS} runs, each in fresh interpreters, both sides alternated, median of "
            f"{repeats} repeats; {how[scenario]}",
        )
        row["spread"] = {"min": ratios[0], "median": ratio, "max": ratios[-1]}
        row["seconds"] = {"fray": [f for f, _ in runs], "predecessor": [p for _, p in runs]}
        out.append(row)
    return out


def run(repeats: int) -> list[dict[str, Any]]:
    """The local rows against the predecessor; see the module docstring."""
    repeats = max(repeats, MIN_REPEATS)
    try:
        pred = predecessor_python()
    except (RuntimeError, OSError, subprocess.SubprocessError) as err:
        return [failed_row(name, str(err)) for name, _ in SCENARIOS.values()]
    with tempfile.TemporaryDirectory(prefix="fray-bench-pred-") as workdir:
        found = measure(lambda: _local_sides(pred, workdir), SCENARIOS, repeats)
    return ratio_rows(found, repeats, SCENARIOS, HOW)


if __name__ == "__main__":
    main(run)
