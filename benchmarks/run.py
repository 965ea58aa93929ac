"""Runs Fray's benchmarks and checks them against the targets in DESIGN.md.

    python benchmarks/run.py                       # every bench_*.py here
    python benchmarks/run.py --only local,ray      # just those
    python benchmarks/run.py --repeats 9           # more repeats, steadier medians
    python benchmarks/run.py --compare old.json    # show a previous run's numbers beside
    python benchmarks/run.py --only pool --merge   # replace only those modules' rows

Each ``bench_<name>.py`` exposes ``run(repeats) -> list[dict]`` (see ``_bench.py``). Every
module runs in a fresh interpreter of its own, so one backend's threads or clusters never
skew another's timings, and a module that fails to import, raises, returns junk or runs past
``--timeout`` becomes a failed row instead of stopping the run. The table is printed and
written, with machine info and a timestamp, to ``benchmarks/results.json``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _bench import check_rows, failed_row, format_table, format_value, machine_info  # noqa: E402

# Runs in the child interpreter: import one module, run it, write its rows as JSON.
_CHILD = """
import json, sys, traceback
sys.path.insert(0, sys.argv[1])
name, repeats, out = sys.argv[2], int(sys.argv[3]), sys.argv[4]
try:
    module = __import__("bench_" + name)
    rows = module.run(repeats)
    record = {"rows": rows}
except BaseException as exc:
    traceback.print_exc()
    record = {"error": f"{type(exc).__name__}: {exc}"}
with open(out, "w") as f:
    json.dump(record, f, default=repr)
"""


def available() -> list[str]:
    """Names of the benchmark modules present (``bench_local.py`` -> ``local``)."""
    return sorted(p.stem.removeprefix("bench_") for p in HERE.glob("bench_*.py"))


def run_module(name: str, repeats: int, timeout: float) -> tuple[list[dict[str, Any]], float]:
    """Runs ``bench_<name>.py`` in a child interpreter; returns its rows and the seconds taken.

    Never raises for a broken module: its failure comes back as a row with ``passed=False``.
    """
    if not (HERE / f"bench_{name}.py").exists():
        known = ", ".join(available()) or "none"
        return [failed_row(f"{name} (module)", f"bench_{name}.py does not exist; have: {known}")], 0
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="fray-bench-") as tmp:
        out = os.path.join(tmp, "rows.json")
        argv = [sys.executable, "-c", _CHILD, str(HERE), name, str(repeats), out]
        try:
            proc = subprocess.run(argv, cwd=HERE.parent, timeout=timeout, check=False)
        except subprocess.TimeoutExpired:
            elapsed = time.monotonic() - start
            return [failed_row(f"{name} (module)", f"ran past --timeout {timeout:g}s")], elapsed
        elapsed = time.monotonic() - start
        try:
            with open(out) as f:
                record: dict[str, Any] = json.load(f)
        except (OSError, ValueError):
            error = f"the module's interpreter exited with code {proc.returncode} before reporting"
            return [failed_row(f"{name} (module)", error)], elapsed
    if "error" in record:
        return [failed_row(f"{name} (module)", str(record["error"]))], elapsed
    rows = record.get("rows")
    problems = check_rows(rows)
    if problems:
        note = "run() returned malformed rows: " + "; ".join(problems[:3])
        return [failed_row(f"{name} (module)", note)], elapsed
    assert isinstance(rows, list)
    return [_clean(r) for r in rows], elapsed  # pyright: ignore[reportUnknownVariableType, reportUnknownArgumentType]


def _clean(r: dict[str, Any]) -> dict[str, Any]:
    """Coerces a row from JSON (NaN travels as null)."""
    measured = r["measured"]
    return {
        **r,
        "measured": math.nan if measured is None else float(measured),
        "ratio": None if r["ratio"] is None else float(r["ratio"]),
        "passed": bool(r["passed"]),
    }


def _git() -> dict[str, Any]:
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=HERE, capture_output=True, text=True, timeout=10
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain"], cwd=HERE, capture_output=True, text=True, timeout=10
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return {}
    return {"commit": commit or None, "dirty": bool(dirty)}


def _json_safe(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}  # pyright: ignore[reportUnknownVariableType]
    if isinstance(value, list):
        return [_json_safe(v) for v in value]  # pyright: ignore[reportUnknownVariableType]
    return value


def write_results(path: Path, record: dict[str, Any]) -> None:
    """Writes ``record`` atomically (a half-written results file would break comparisons)."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(_json_safe(record), indent=2) + "\n")
    os.replace(tmp, path)


def _with_previous(rows: list[dict[str, Any]], old_path: Path) -> list[dict[str, Any]]:
    """Appends the previous run's measurement of the same row to each note."""
    try:
        old = json.loads(old_path.read_text())
    except (OSError, ValueError) as err:
        print(f"--compare: cannot read {old_path}: {err}", file=sys.stderr)
        return rows
    before = {(r.get("module"), r.get("name")): r for r in old.get("rows", [])}
    out: list[dict[str, Any]] = []
    for r in rows:
        prev = before.get((r.get("module"), r["name"]))
        if prev is not None and prev.get("measured") is not None:
            was = format_value(float(prev["measured"]), str(prev.get("unit", "")))
            r = {**r, "previous": prev["measured"], "note": f"{r['note']} [was {was}]".strip()}
        out.append(r)
    return out


def _merged(path: Path, record: dict[str, Any]) -> dict[str, Any]:
    """``record`` with the rows and modules of the results at ``path`` that it did not run:
    each module's entry says when, on which commit and with how many repeats it ran."""
    try:
        old = json.loads(path.read_text())
    except (OSError, ValueError):
        return record
    ran = set(record["modules"])
    stamp = {k: record[k] for k in ("timestamp", "git", "repeats")}
    modules = {name: {**m, **stamp} for name, m in record["modules"].items()}
    for name, entry in old.get("modules", {}).items():
        if name not in ran:
            old_stamp = {k: old.get(k) for k in ("timestamp", "git", "repeats")}
            modules[name] = {**old_stamp, **entry}
    kept = [r for r in old.get("rows", []) if r.get("module") not in ran]
    return {**record, "modules": dict(sorted(modules.items())), "rows": kept + record["rows"]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Run Fray's benchmarks against the DESIGN.md targets."
    )
    parser.add_argument(
        "--only",
        default="",
        help="comma-separated module names, e.g. local,ray (default: every bench_*.py: "
        + (", ".join(available()) or "none found")
        + ")",
    )
    parser.add_argument("--repeats", type=int, default=5, help="measured runs per benchmark")
    parser.add_argument(
        "--timeout", type=float, default=1800, help="seconds one module may take (default 1800)"
    )
    parser.add_argument(
        "--output", type=Path, default=HERE / "results.json", help="where to write the results"
    )
    parser.add_argument("--compare", type=Path, help="a previous results.json to show beside")
    parser.add_argument(
        "--strict", action="store_true", help="exit with status 1 when any target is missed"
    )
    parser.add_argument(
        "--merge",
        action="store_true",
        help="keep the other modules' rows of --output (each module keeps its own run's time)",
    )
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error(f"--repeats must be at least 1, not {args.repeats}")
    if args.timeout <= 0:
        parser.error(f"--timeout must be positive, not {args.timeout:g}")
    names = [n.strip().removeprefix("bench_").removesuffix(".py") for n in args.only.split(",")]
    names = [n for n in names if n] or available()
    if not names:
        parser.error(f"no bench_*.py modules found in {HERE}")

    started = datetime.datetime.now(datetime.UTC)
    rows: list[dict[str, Any]] = []
    modules: dict[str, Any] = {}
    for name in dict.fromkeys(names):
        print(f"== bench_{name} (repeats={args.repeats})", flush=True)
        module_rows, seconds = run_module(name, args.repeats, args.timeout)
        modules[name] = {"seconds": round(seconds, 2), "rows": len(module_rows)}
        rows += [{"module": name, **r} for r in module_rows]
    if args.compare:
        rows = _with_previous(rows, args.compare)

    print()
    print(format_table(rows, with_module=True))
    missed = sum(1 for r in rows if not r["passed"])
    print(f"\n{len(rows) - missed} of {len(rows)} targets met.")
    record = {
        "timestamp": started.isoformat(timespec="seconds"),
        "finished": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "repeats": args.repeats,
        "machine": machine_info(),
        "git": _git(),
        "modules": modules,
        "rows": rows,
    }
    if args.merge:
        record = _merged(args.output, record)
    write_results(args.output, record)
    print(f"Results written to {args.output}")
    return 1 if (args.strict and missed) else 0


if __name__ == "__main__":
    sys.exit(main())
