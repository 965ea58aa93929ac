"""Marin's Zephyr on Fray against Zephyr on its predecessor: the same pipeline, side by side.

Two venvs under the user's cache (``~/.cache/fray-bench/``), made once and reused:

* ``zephyr-predecessor``: ``marin-zephyr`` 0.2.20 as Marin installs it (with its pinned
  ``marin-fray``);
* ``zephyr-fray``: this checkout's fray-core and fray-iris (editable, so the code measured is
  the code here) with ``marin-zephyr`` installed ``--no-deps`` beside it and its other
  requirements by name, as ``nox -s compat`` does.

``_zephyr_code.py`` runs in both: a pipeline on the local backend (map with shared data,
filter, flat_map, group_by with a combiner), its result checked each time. Three runs, each
with fresh interpreters, the two sides alternated; the row is the median ratio Fray speed ÷
predecessor, with min and max.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _bench import alternate, at_least, failed_row, main, median
from bench_predecessor import Side

ZEPHYR = "marin-zephyr==0.2.20.dev202606180959"
PYTHON = "3.11"
# marin-zephyr 0.2.20's requirements other than marin-fray, marin-iris and marin-rigging
# (those come with fray-iris), as in the root pyproject's `zephyr` group.
ZEPHYR_REQUIREMENTS = [
    "braceexpand>=0.1.0",
    "click>=8.0",
    "cloudpickle>=3.0",
    "fsspec>=2023.1.0",
    "humanfriendly>=10.0",
    "msgspec>=0.18.0",
    "numpy>=2.0",
    "psutil>=5.9.0",
    "tqdm-loggable>=0.2",
    "typing-extensions>=4.0",
    "vortex-data>=0.61.0",
    "xxhash>=3.4",
    "zstandard>=0.18.0",
]
RUNS = 3
MIN_REPEATS = 7
ROOT = Path(__file__).resolve().parents[1]
SCRIPT = Path(__file__).resolve().with_name("_zephyr_code.py")
ROW = "vs predecessor: Zephyr pipeline (map, filter, flat_map, group_by) on the local backend"


def _cache(name: str) -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(Path.home(), ".cache")
    return Path(base) / "fray-bench" / name


def _run(argv: list[str]) -> None:
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=1200, check=False)
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        raise RuntimeError(f"`{' '.join(argv[1:3])}` failed: {' / '.join(tail)}")


def _venv(name: str, installs: list[list[str]], interpreter: str = PYTHON) -> Path:
    """The venv ``name``'s interpreter, made on ``interpreter`` (a version uv finds, or a
    path) with ``installs`` (``uv pip install`` argument lists) unless it is already complete
    (a marker file says so)."""
    venv = _cache(name)
    python = venv / "bin" / "python"
    done = venv / ".fray-bench-complete"
    wanted = repr([interpreter, *installs])
    if python.exists() and done.exists() and done.read_text() == wanted:
        return python
    uv = shutil.which("uv")
    if uv is None:
        raise RuntimeError(f"uv is not on PATH: it makes the benchmark venv {venv}")
    shutil.rmtree(venv, ignore_errors=True)
    _run([uv, "venv", "--quiet", "--python", interpreter, str(venv)])
    for args in installs:
        _run([uv, "pip", "install", "--quiet", "--python", str(python), *args])
    done.write_text(wanted)
    return python


def pythons() -> tuple[Path, Path]:
    """(Fray's, the predecessor's) interpreters with Zephyr."""
    fray = _venv(
        "zephyr-fray",
        [
            ["-e", str(ROOT / "packages/fray-core"), "-e", str(ROOT / "packages/fray-iris")],
            ["--no-deps", ZEPHYR],
            ZEPHYR_REQUIREMENTS,
        ],
    )
    predecessor = _venv("zephyr-predecessor", [[ZEPHYR]])
    return fray, predecessor


def measure(fray: Path, predecessor: Path, repeats: int) -> list[tuple[float, float]]:
    """One (Fray, predecessor) pair of median seconds per pipeline, per run."""
    found: list[tuple[float, float]] = []
    with tempfile.TemporaryDirectory(prefix="fray-bench-zephyr-") as workdir:
        for _ in range(RUNS):
            sides = {"fray": Side(fray, workdir, SCRIPT)}
            try:
                sides["predecessor"] = Side(predecessor, workdir, SCRIPT)
                samples = alternate(
                    {n: (lambda s=s: s.sample("pipeline")) for n, s in sides.items()}, repeats
                )
                found.append((median(samples["fray"]), median(samples["predecessor"])))
            finally:
                for side in sides.values():
                    side.close()
    return found


def run(repeats: int) -> list[dict[str, Any]]:
    """The Zephyr row; see the module docstring."""
    return [zephyr_row(ROW, pythons, repeats)]


def zephyr_row(
    name: str, make_pythons: Callable[[], tuple[Path, Path]], repeats: int
) -> dict[str, Any]:
    """The row ``name``: ``_zephyr_code.py``'s pipeline timed in the (Fray, predecessor)
    interpreters ``make_pythons`` returns (a failed row if they cannot be made)."""
    repeats = max(repeats, MIN_REPEATS)
    try:
        fray, predecessor = make_pythons()
        found = measure(fray, predecessor, repeats)
    except (RuntimeError, OSError, subprocess.SubprocessError) as err:
        return failed_row(name, str(err))
    ratios = sorted(p / f for f, p in found)
    ratio = median(ratios)
    row = at_least(
        name,
        ratio,
        1.0,
        "x",
        target=">= 1.0x predecessor (median of 3 runs)",
        ratio=ratio,
        note=f"Fray {median(f for f, _ in found) * 1e3:.0f} ms vs predecessor "
        f"{median(p for _, p in found) * 1e3:.0f} ms per pipeline; Fray speed / predecessor "
        f"min {ratios[0]:.2f}x, median {ratio:.2f}x, max {ratios[-1]:.2f}x over {RUNS} runs, "
        f"each in fresh interpreters, both sides alternated, median of {repeats} repeats",
    )
    row["spread"] = {"min": ratios[0], "median": ratio, "max": ratios[-1]}
    return row


if __name__ == "__main__":
    main(run)
