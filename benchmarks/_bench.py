"""Shared helpers for the ``bench_*.py`` modules and ``run.py``.

A benchmark module exposes ``run(repeats: int) -> list[dict]``; each dict is a *row*::

    name      what was measured                      "local actor sync call overhead"
    target    the goal, in words                     "<= 5 us per call"
    measured  the number (median of the repeats)     2.4
    unit      its unit                               "us"
    ratio     measured side / comparison side, or None
    passed    whether the target is met
    note      how it was measured, or why it missed

Use :func:`row` to build rows, :func:`alternate` to time two (or more) things side by side,
and :func:`main` as a module's ``if __name__ == "__main__"`` body.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

ROW_KEYS = ("name", "target", "measured", "unit", "ratio", "passed", "note")


def row(
    name: str,
    measured: float,
    unit: str,
    *,
    target: str,
    passed: bool,
    ratio: float | None = None,
    note: str = "",
) -> dict[str, Any]:
    """One result row, in the shape ``run.py`` prints and stores."""
    return {
        "name": name,
        "target": target,
        "measured": float(measured),
        "unit": unit,
        "ratio": None if ratio is None else float(ratio),
        "passed": bool(passed) and math.isfinite(measured),
        "note": note,
    }


def at_most(name: str, measured: float, limit: float, unit: str, **kw: Any) -> dict[str, Any]:
    """A row whose target is ``measured <= limit`` (``kw``: ratio, note, target text)."""
    kw.setdefault("target", f"<= {limit:g} {unit}")
    return row(name, measured, unit, passed=measured <= limit, **kw)


def at_least(name: str, measured: float, limit: float, unit: str, **kw: Any) -> dict[str, Any]:
    """A row whose target is ``measured >= limit``."""
    kw.setdefault("target", f">= {limit:g} {unit}")
    return row(name, measured, unit, passed=measured >= limit, **kw)


def failed_row(name: str, error: str) -> dict[str, Any]:
    """A row for a benchmark that could not run at all."""
    return row(name, math.nan, "", target="runs", passed=False, note=error)


def check_rows(rows: Any) -> list[str]:
    """Problems with what a module's ``run()`` returned (empty when it is well formed)."""
    if not isinstance(rows, list):
        return [f"run() returned {type(rows).__name__}, not a list of row dicts"]
    problems: list[str] = []
    for i, item in enumerate(rows):  # pyright: ignore[reportUnknownVariableType]
        if not isinstance(item, dict):
            problems.append(f"row {i} is {type(item).__name__}, not a dict")  # pyright: ignore[reportUnknownArgumentType]
            continue
        missing = [k for k in ROW_KEYS if k not in item]
        if missing:
            problems.append(f"row {i} lacks {', '.join(missing)}")
    return problems


def median(values: Iterable[float]) -> float:
    """The median, or NaN for no values."""
    data = list(values)
    return statistics.median(data) if data else math.nan


def alternate(
    sides: Mapping[str, Callable[[], float]], repeats: int, *, warmup: int = 1
) -> dict[str, list[float]]:
    """Runs each side ``warmup + repeats`` times, interleaved (a, b, a, b, ...).

    Each callable returns one sample (usually seconds). Interleaving makes slow drift of a
    shared machine hit every side alike; the first ``warmup`` rounds are discarded.
    """
    samples: dict[str, list[float]] = {name: [] for name in sides}
    names = list(sides)
    for round_ in range(warmup + repeats):
        # Alternate the order too, so neither side always runs right after the other.
        order = names if round_ % 2 == 0 else names[::-1]
        for name in order:
            value = sides[name]()
            if round_ >= warmup:
                samples[name].append(value)
    return samples


def timed(fn: Callable[[], object]) -> float:
    """Seconds one call of ``fn`` takes."""
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def machine_info() -> dict[str, Any]:
    """What the numbers were measured on."""
    info: dict[str, Any] = {
        "python": sys.version.split()[0],
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpu_count": os.cpu_count(),
    }
    with contextlib.suppress(AttributeError, OSError):
        info["cpus_usable"] = len(os.sched_getaffinity(0))
    with contextlib.suppress(OSError):
        info["load_avg_1_5_15"] = [round(x, 2) for x in os.getloadavg()]
    try:
        with open("/proc/cpuinfo") as f:
            model = next((ln.split(":", 1)[1].strip() for ln in f if "model name" in ln), None)
        if model:
            info["cpu_model"] = model
        with open("/proc/meminfo") as f:
            total = next((ln.split()[1] for ln in f if ln.startswith("MemTotal")), None)
        if total:
            info["memory_gib"] = round(int(total) / (1 << 20), 1)
    except OSError:
        pass
    return info


def format_value(value: float | None, unit: str = "") -> str:
    """A number printed with a sensible precision."""
    if value is None:
        return "-"
    if math.isnan(value):
        return "n/a"
    magnitude = abs(value)
    if magnitude >= 100 or value == int(value):
        text = f"{value:,.0f}"
    elif magnitude >= 10:
        text = f"{value:.1f}"
    else:
        text = f"{value:.3g}"
    return f"{text} {unit}".rstrip()


def format_table(rows: list[dict[str, Any]], *, with_module: bool = False) -> str:
    """The rows as an aligned text table (notes of missed targets are listed below it)."""
    headers = (["module"] if with_module else []) + ["benchmark", "target", "measured"]
    headers += ["ratio", "result"]
    lines: list[list[str]] = []
    notes: list[str] = []
    for r in rows:
        ratio = r.get("ratio")
        cells = [r.get("module", "")] if with_module else []
        cells += [
            str(r["name"]),
            str(r["target"]),
            format_value(r["measured"], str(r["unit"])),
            "-" if ratio is None else f"{ratio:.2f}x",
            "pass" if r["passed"] else "MISS",
        ]
        lines.append(cells)
        if not r["passed"] and r.get("note"):
            notes.append(f"  {r['name']}: {r['note']}")
    widths = [max(len(h), *(len(c[i]) for c in lines)) for i, h in enumerate(headers)]
    out = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True))]
    out.append("  ".join("-" * w for w in widths))
    out += ["  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)) for cells in lines]
    if notes:
        out += ["", "Missed targets:", *notes]
    return "\n".join(out)


def main(run: Callable[[int], list[dict[str, Any]]], default_repeats: int = 5) -> None:
    """Command line of a single benchmark module: runs it and prints its rows."""
    parser = argparse.ArgumentParser(description=sys.modules["__main__"].__doc__)
    parser.add_argument(
        "--repeats", type=int, default=default_repeats, help="measured runs per benchmark"
    )
    args = parser.parse_args()
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    rows = run(args.repeats)
    print(format_table(rows))
