"""fray-tpu gang orchestration on a fake TPU pod: launch and preemption recovery times.

The cluster is local Ray posing as TPU hosts (``fray_testing.ray_cluster``): a head and
three fake v4-16 slices of two hosts each. Per repeat:

* **launch → all hosts running**: ``launch_on_pod(fn, "v4-16", num_slices=2)`` until the
  user's function has started on all 4 hosts (each host writes its start time; the same
  clock, one machine).
* **preemption → rerun running**: one host of the running gang is killed (drained as a
  preemption, then its raylet killed); measured until the function has started again on all
  4 hosts of the new gang (on the surviving and the spare slice). A replacement slice is
  added between repeats, outside the timings.
* **host killed and back → all hosts running again**: a one-slice gang on a cluster of its
  own (a head and one v4-16 slice); one host is killed, then brought back as a new Ray node
  (same slice name and worker id, as a preempted VM returns); measured from the kill until
  the function has started again on both hosts.

Targets (DESIGN.md): <= 10 s for the first two, <= 30 s for the third. The median of the
repeats is reported. The first launch
(imports and worker start-up on a fresh cluster) is a warm-up and not counted. Run alone
with ``python benchmarks/bench_tpu.py [--repeats N]`` or through ``benchmarks/run.py``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

TARGET_S = 10.0
RETURNED_TARGET_S = 30.0


def host_main(workdir: str) -> str:
    """Records when it started on this host, then waits for the release file."""
    name = f"{os.environ.get('TPU_NAME')}-{os.environ.get('TPU_WORKER_ID')}"
    Path(workdir, f"start-{time.time_ns()}-{name}").write_text(str(time.time()))
    deadline = time.monotonic() + 300
    while not os.path.exists(os.path.join(workdir, "release")):
        if time.monotonic() > deadline:
            raise RuntimeError("never released")
        time.sleep(0.02)
    return name


def _starts(workdir: Path) -> list[tuple[float, str]]:
    found: list[tuple[float, str]] = []
    for path in workdir.glob("start-*"):
        try:
            found.append((float(path.read_text()), path.name.split("-", 2)[2]))
        except (ValueError, OSError):
            continue
    return sorted(found)


def _wait_starts(workdir: Path, count: int, timeout: float) -> list[tuple[float, str]]:
    deadline = time.monotonic() + timeout
    while True:
        starts = _starts(workdir)
        if len(starts) >= count:
            return starts
        if time.monotonic() > deadline:
            raise TimeoutError(f"only {len(starts)}/{count} hosts started in {timeout:g}s")
        time.sleep(0.02)


def _row(name: str, samples: list[float], note: str, target: float = TARGET_S) -> dict[str, Any]:
    measured = statistics.median(samples) if samples else float("nan")
    return {
        "name": name,
        "target": f"<= {target:g} s",
        "measured": round(measured, 3),
        "unit": "s",
        "ratio": None,
        "passed": bool(samples) and measured <= target,
        "note": note + ("; samples " + ", ".join(f"{s:.2f}" for s in samples) if samples else ""),
    }


def _launch(workdir: Path, slices: int, name: str) -> Any:
    """A gang of ``slices`` v4-16 slices running ``host_main``: one preemption allowed."""
    import bench_tpu as here

    from fray_tpu.ray import launch_on_pod

    return launch_on_pod(
        here.host_main,
        "v4-16",
        num_slices=slices,
        args=[str(workdir)],
        max_retries_preemption=1,
        max_retries_failure=0,
        scheduling_timeout=120,
        health_interval=0.5,
        name=name,
    )


def _returned_host(repeats: int, scratch: Path, errors: list[str]) -> list[float]:
    """Kill -> all hosts running again, for a slice whose host comes back as a new node."""

    from fray_testing.ray_cluster import LocalRayCluster

    samples: list[float] = []
    with LocalRayCluster(head_cpus=4, head_resources={"head_node": 1}) as cluster:
        cluster.add_tpu_slice("v4-16", name="slice-a")
        cluster.connect(namespace="fray-bench-tpu-returned")
        for round_ in range(repeats + 1):
            workdir = scratch / f"returned-{round_}"
            workdir.mkdir()
            handle = _launch(workdir, 1, "bench-returned")
            try:
                _wait_starts(workdir, 2, 180)
                for path in workdir.glob("start-*"):
                    path.unlink()
                t0 = time.time()
                cluster.kill_node(cluster.slices["slice-a"][1], preemption=True)
                cluster.restore_tpu_host("slice-a", 1)
                again = _wait_starts(workdir, 2, 180)
                if round_ > 0:
                    samples.append(again[1][0] - t0)
                (workdir / "release").touch()
                handle.wait(timeout=180)
            except Exception as exc:  # report, keep the other rounds
                errors.append(f"returned host, round {round_}: {type(exc).__name__}: {exc}")
                (workdir / "release").touch()
                handle.terminate()
    return samples


def run(repeats: int = 3) -> list[dict[str, Any]]:
    """Returns three rows: gang launch, preemption-to-rerun and returned-host times
    (seconds, medians)."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

    from fray_testing.ray_cluster import LocalRayCluster

    launch: list[float] = []
    rerun: list[float] = []
    returned: list[float] = []
    errors: list[str] = []
    scratch = Path(tempfile.mkdtemp(prefix="fray-bench-tpu-"))
    try:
        with LocalRayCluster(head_cpus=4, head_resources={"head_node": 1}) as cluster:
            for name in ("slice-a", "slice-b", "slice-c"):
                cluster.add_tpu_slice("v4-16", name=name)
            cluster.connect(namespace="fray-bench-tpu")
            for round_ in range(repeats + 1):
                workdir = scratch / f"round-{round_}"
                workdir.mkdir()
                t0 = time.time()
                handle = _launch(workdir, 2, "bench")
                try:
                    first = _wait_starts(workdir, 4, 180)
                    if round_ > 0:
                        launch.append(first[3][0] - t0)
                    # Preempt one host of the gang's first slice.
                    victim_slice = min(name for _t, name in first).rsplit("-", 1)[0]
                    for path in workdir.glob("start-*"):
                        path.unlink()
                    t1 = time.time()
                    cluster.kill_node(cluster.slices[victim_slice][1], preemption=True)
                    second = _wait_starts(workdir, 4, 180)
                    if round_ > 0:
                        rerun.append(second[3][0] - t1)
                    (workdir / "release").touch()
                    handle.wait(timeout=180)
                except Exception as exc:  # report, keep the other rounds
                    tail = [line for line in handle.logs() if line.startswith("[fray-tpu]")]
                    errors.append(
                        f"round {round_}: {type(exc).__name__}: {exc} (job log: "
                        + " / ".join(tail[-4:])
                        + ")"
                    )
                    (workdir / "release").touch()
                    handle.terminate()
                # Replacement capacity for the next round (not timed).
                cluster.add_tpu_slice("v4-16", name=f"slice-r{round_}")
        returned = _returned_host(repeats, scratch, errors)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    note = f"fake 2 x v4-16 (4 hosts) on local Ray, {repeats} repeats after 1 warm-up"
    with contextlib.suppress(OSError):
        note += f"; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs"
    if errors:
        note += "; errors: " + " | ".join(errors)
    return [
        _row("tpu: fake 2-slice v4-16 gang launch -> all hosts running", launch, note),
        _row("tpu: host preempted -> rerun running on all hosts", rerun, note),
        _row(
            "tpu: one slice, host killed and back as a new node -> all hosts running again",
            returned,
            note.replace(
                "fake 2 x v4-16 (4 hosts)", "fake 1 x v4-16 (2 hosts), a cluster of its own"
            ),
            RETURNED_TARGET_S,
        ),
    ]


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from _bench import main

    main(run, default_repeats=3)
