"""Marin's Zephyr 0.2.227 (the line Marin runs today) on Fray against Zephyr 0.2.227 on
``marin-fray`` 0.2.227, local, Python 3.12: the same pipeline, side by side.

As ``bench_zephyr.py`` (whose measurement and row this reuses) but on Python 3.12 (the
pyenv-installed interpreter: uv does not find it by itself; ``FRAY_PYTHON_3_12`` names
another), with two venvs of their own under ``~/.cache/fray-bench/``:

* ``zephyr-227-predecessor``: ``marin-zephyr`` 0.2.227 as Marin installs it, with its pinned
  ``marin-fray`` 0.2.227 (and ``marin-iris``, ``marin-rigging``; ``marin-finelog`` pinned as
  fray-iris pins it);
* ``zephyr-227-fray``: this checkout's fray-core and fray-iris (editable; fray-iris brings
  marin-iris 0.2.227 on 3.12) with ``marin-zephyr`` installed ``--no-deps`` beside them and its
  other requirements by name, as ``nox -s compat-3.12`` does.

Both run ``_zephyr_code.py``: each pipeline on a dedicated pool (Zephyr 0.2.227 starts a
coordinator actor group and a worker group of two per ``execute``, and tears them down after).
"""

from __future__ import annotations

import glob
import os
import re
from pathlib import Path
from typing import Any

from _bench import main
from bench_zephyr import ROOT, _venv, zephyr_row

ZEPHYR = "marin-zephyr==0.2.227.dev40316220070"
# marin-zephyr 0.2.227's requirements other than marin-fray, marin-iris and marin-rigging
# (those come with fray-iris), as in the root pyproject's `marin-227` group.
ZEPHYR_REQUIREMENTS = [
    "braceexpand>=0.1.0",
    "click>=8.0",
    "cloudpickle>=3.0",
    "fsspec>=2023.1.0",
    "humanfriendly>=10.0",
    "msgspec>=0.18.0",
    "numpy>=2.0",
    "polars>=1.41.0",
    "psutil>=7.2.2",
    "starlette>=0.50.0",
    "vortex-data>=0.61.0",
    "xxhash>=3.4",
    "zstandard>=0.18.0",
]
# The marin-finelog fray-iris pins on 3.12 (marin-iris 0.2.227 asks only for >=0.2.10): both
# sides run the same Iris and log client packages, so that only Fray differs.
FINELOG = "marin-finelog==0.2.71.dev40003900277"
ROW = (
    "vs predecessor: Zephyr 0.2.227 pipeline (map, filter, flat_map, group_by) on the local "
    "backend, Python 3.12"
)


def python_312() -> str:
    """``FRAY_PYTHON_3_12``, else the newest pyenv ``python3.12``, else ``3.12`` for uv."""
    explicit = os.environ.get("FRAY_PYTHON_3_12")
    root = os.environ.get("PYENV_ROOT") or os.path.expanduser("~/.pyenv")
    found = glob.glob(os.path.join(root, "versions", "3.12*", "bin", "python3.12"))
    newest = max(found, key=lambda p: [int(n) for n in re.findall(r"\d+", p)], default="3.12")
    return explicit or newest


def pythons() -> tuple[Path, Path]:
    """(Fray's, the predecessor's) interpreters with Zephyr 0.2.227."""
    interpreter = python_312()
    fray = _venv(
        "zephyr-227-fray",
        [
            ["-e", str(ROOT / "packages/fray-core"), "-e", str(ROOT / "packages/fray-iris")],
            ["--no-deps", ZEPHYR],
            ZEPHYR_REQUIREMENTS,
        ],
        interpreter,
    )
    predecessor = _venv("zephyr-227-predecessor", [[ZEPHYR, FINELOG]], interpreter)
    return fray, predecessor


def run(repeats: int) -> list[dict[str, Any]]:
    """The Zephyr 0.2.227 row; see the module docstring."""
    return [zephyr_row(ROW, pythons, repeats)]


if __name__ == "__main__":
    main(run)
