"""LocalClient and fray-core costs against the targets in DESIGN.md.

Every comparison is measured side by side in one run: both sides interleaved, the first round
discarded, the median of the repeats reported. Run alone with
``python benchmarks/bench_local.py [--repeats N]`` or through ``benchmarks/run.py``.
"""

from __future__ import annotations

import concurrent.futures
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from typing import Any

from _bench import alternate, at_most, main, median, timed

from fray import Entrypoint, JobRequest, LocalClient, wait_all

SCALE_NS = (10, 100, 1_000, 10_000)
CALLERS = (1, 4, 16)
ACTOR_CALLS = 20_000  # calls per measured block of actor calls


class Echo:
    """The actor under test: a method that does nothing but return its argument."""

    def f(self, x: int) -> int:
        return x


def noop() -> None:
    return None


# ---------------------------------------------------------------------------------------------
# import fray vs from pydantic import BaseModel


def bench_import(repeats: int) -> list[dict[str, Any]]:
    """Fresh interpreters, alternated. Bytecode is cached (in a private prefix) for both sides
    after the warm-up round, as it is in an installed environment."""
    cache = tempfile.mkdtemp(prefix="fray-bench-pyc-")
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = cache

    wall: dict[str, list[float]] = {}

    def interpreter(code: str) -> Callable[[], float]:
        argv = [sys.executable, "-c", code]

        def once() -> float:
            # CPU time (user + system) of the child: on a shared machine it is far steadier
            # than wall time, which also counts waiting for a core.
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            seconds = timed(
                lambda: subprocess.run(argv, env=env, cwd=cache, check=True, timeout=120)
            )
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            wall.setdefault(code, []).append(seconds)
            return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)

        return once

    try:
        samples = alternate(
            {
                "python": interpreter("pass"),
                "pydantic": interpreter("from pydantic import BaseModel"),
                "fray": interpreter("import fray"),
                "types": interpreter(_TYPES_IMPORT),
                "model": interpreter(_PYDANTIC_MODEL),
            },
            repeats=max(4 * repeats, 10),
            warmup=2,
        )
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    bare, pyd, fr, types, model = (
        median(samples[k]) * 1e3 for k in ("python", "pydantic", "fray", "types", "model")
    )
    wall_pyd = median(wall["from pydantic import BaseModel"]) * 1e3
    wall_fray = median(wall["import fray"]) * 1e3
    ratio = fr / pyd
    note = (
        f"CPU time of a fresh interpreter: `import fray` {fr:.0f} ms vs `from pydantic import "
        f"BaseModel` {pyd:.0f} ms (`python -c pass` {bare:.0f} ms; wall {wall_fray:.0f} vs "
        f"{wall_pyd:.0f} ms); the request types and backends load on first use"
    )
    # The request types are pydantic models with constrained fields, and the first such model
    # in a program imports pydantic's field and constraint machinery (pydantic.fields,
    # pydantic.types, annotated_types), which `from pydantic import BaseModel` alone does not.
    # Any program that defines one such model pays that too, so it is the baseline here;
    # what is left over is Fray's own share.
    types_ratio = types / model
    types_note = (
        f"CPU time: `{_TYPES_IMPORT}` {types:.0f} ms vs a program defining one pydantic model "
        f"with a constrained field {model:.0f} ms: Fray's own share {types - model:+.0f} ms "
        f"({types / pyd:.2f}x a bare `from pydantic import BaseModel`, {pyd:.0f} ms)"
    )
    return [
        at_most(
            "import fray / from pydantic import BaseModel",
            ratio,
            1.3,
            "x",
            target="<= 1.3x",
            ratio=ratio,
            note=note,
        ),
        at_most(
            "from fray import the request types / one pydantic model",
            types_ratio,
            1.3,
            "x",
            target="<= 1.3x",
            ratio=types_ratio,
            note=types_note,
        ),
    ]


_TYPES_IMPORT = "from fray import Entrypoint, JobRequest, ResourceConfig"
_PYDANTIC_MODEL = (
    "from pydantic import BaseModel, Field\n"
    "class Request(BaseModel):\n"
    "    replicas: int = Field(default=1, ge=1)"
)


# ---------------------------------------------------------------------------------------------
# Actors


def bench_actor_sync(client: LocalClient, repeats: int) -> list[dict[str, Any]]:
    handle = client.create_actor(Echo, name="bench-sync")
    direct = Echo()
    n = ACTOR_CALLS

    wall: dict[str, list[float]] = {"direct": [], "actor": []}

    def block(side: str, call: Callable[[int], object]) -> float:
        # A sync call on an idle actor runs in the caller's thread, so its cost is this
        # thread's CPU time; wall time on a shared machine also counts waiting for a core.
        cpu = time.thread_time()
        start = time.perf_counter()
        for i in range(n):
            call(i)
        wall[side].append((time.perf_counter() - start) / n)
        return (time.thread_time() - cpu) / n

    samples = alternate(
        {"direct": lambda: block("direct", direct.f), "actor": lambda: block("actor", handle.f)},
        repeats,
    )
    d, a = median(samples["direct"]) * 1e6, median(samples["actor"]) * 1e6
    wd, wa = median(wall["direct"][1:]) * 1e6, median(wall["actor"][1:]) * 1e6
    return [
        at_most(
            "local actor sync call overhead",
            a - d,
            5,
            "us",
            target="<= 5 us per call",
            ratio=a / d,
            note=f"CPU time per call: handle.f(i) {a:.2f} us vs direct obj.f(i) {d:.3f} us "
            f"(wall {wa:.2f} vs {wd:.3f} us); median of {repeats} blocks of {n:,}; "
            "ratio = actor call / direct call",
        )
    ]


def bench_actor_remote(client: LocalClient, repeats: int) -> list[dict[str, Any]]:
    handle = client.create_actor(Echo, name="bench-remote")
    pool = concurrent.futures.ThreadPoolExecutor(1)
    direct = Echo()
    n = 2_000

    def latencies(call: Callable[[int], Any]) -> float:
        lat: list[float] = []
        for i in range(n):
            start = time.perf_counter()
            call(i)
            lat.append(time.perf_counter() - start)
        return median(lat)

    try:
        samples = alternate(
            {
                "fray": lambda: latencies(lambda i: handle.f.remote(i).result()),
                "pool": lambda: latencies(lambda i: pool.submit(direct.f, i).result()),
            },
            repeats,
        )
    finally:
        pool.shutdown()
    fr, raw = median(samples["fray"]) * 1e6, median(samples["pool"]) * 1e6
    return [
        at_most(
            "local .remote().result() round trip",
            fr,
            50,
            "us",
            target="<= 50 us median",
            ratio=fr / raw,
            note=f"median of {repeats} medians of {n:,} calls; ratio vs the same call through "
            f"a 1-thread ThreadPoolExecutor ({raw:.1f} us)",
        )
    ]


def bench_actor_callers(client: LocalClient, repeats: int) -> list[dict[str, Any]]:
    """One actor (calls serialised), hit by 1, 4 and 16 threads at once: per-call wall time."""
    handle = client.create_actor(Echo, name="bench-callers")

    def run(callers: int, remote: bool) -> float:
        per_caller = ACTOR_CALLS // callers // (4 if remote else 1)
        start_gate = threading.Barrier(callers + 1)

        def caller() -> None:
            start_gate.wait()
            if remote:
                for i in range(per_caller):
                    handle.f.remote(i).result()
            else:
                for i in range(per_caller):
                    handle.f(i)

        threads = [threading.Thread(target=caller) for _ in range(callers)]
        for t in threads:
            t.start()
        start_gate.wait()
        start = time.perf_counter()
        for t in threads:
            t.join()
        return (time.perf_counter() - start) / (per_caller * callers)

    sides = {f"{c}-{r}": (lambda c=c, r=r: run(c, r)) for r in (False, True) for c in CALLERS}
    samples = alternate(sides, repeats)
    rows: list[dict[str, Any]] = []
    for remote in (False, True):
        base = median(samples[f"1-{remote}"]) * 1e6
        for callers in CALLERS:
            per_call = median(samples[f"{callers}-{remote}"]) * 1e6
            kind = ".remote().result()" if remote else "sync"
            rows.append(
                at_most(
                    f"local actor {kind} calls, {callers} caller{'s' if callers > 1 else ''}",
                    per_call,
                    2 * base,
                    "us",
                    target="<= 2x the 1-caller cost per call",
                    ratio=per_call / base,
                    note="wall time per call, one actor (calls run one at a time); "
                    "ratio = per-call cost / the 1-caller cost",
                )
            )
    return rows


# ---------------------------------------------------------------------------------------------
# Jobs


def bench_job_roundtrip(client: LocalClient, repeats: int) -> list[dict[str, Any]]:
    request = JobRequest(name="bench-noop", entrypoint=Entrypoint.from_callable(noop))
    pool = concurrent.futures.ThreadPoolExecutor(4)
    n = 200

    def fray_side() -> float:
        lat: list[float] = []
        for _ in range(n):
            start = time.perf_counter()
            client.submit(request).wait()
            lat.append(time.perf_counter() - start)
        return median(lat)

    def pool_side() -> float:
        lat: list[float] = []
        for _ in range(n):
            start = time.perf_counter()
            pool.submit(noop).result()
            lat.append(time.perf_counter() - start)
        return median(lat)

    try:
        samples = alternate({"fray": fray_side, "pool": pool_side}, repeats)
    finally:
        pool.shutdown()
    fr, raw = median(samples["fray"]) * 1e3, median(samples["pool"]) * 1e3
    return [
        at_most(
            "local trivial job submit -> SUCCEEDED",
            fr,
            1,
            "ms",
            target="<= 1 ms median",
            ratio=fr / raw,
            note=f"submit(request).wait(), median of {repeats} medians of {n} jobs; ratio vs "
            f"ThreadPoolExecutor.submit(fn).result() ({raw * 1e3:.1f} us)",
        )
    ]


_ended: dict[int, float] = {}


def _mark_end(i: int) -> None:
    _ended[i] = time.perf_counter()


def _last_job(gate: threading.Event, i: int) -> None:
    if not gate.wait(60):
        raise TimeoutError("the benchmark never opened the gate")
    _ended[i] = time.perf_counter()


def bench_wait_all_last(client: LocalClient, repeats: int) -> list[dict[str, Any]]:
    """999 trivial jobs and one that ends last, on a signal: how long after that last job's
    callable returns does ``wait_all`` return?"""
    n = 1_000

    def once() -> float:
        _ended.clear()
        gate = threading.Event()
        jobs = [
            client.submit(
                JobRequest(name="quick", entrypoint=Entrypoint.from_callable(_mark_end, [i]))
            )
            for i in range(n - 1)
        ]
        jobs.append(
            client.submit(
                JobRequest(
                    name="last", entrypoint=Entrypoint.from_callable(_last_job, [gate, n - 1])
                )
            )
        )

        def release() -> None:
            for job in jobs[:-1]:
                job.wait(timeout=60)
            gate.set()

        releaser = threading.Thread(target=release)
        releaser.start()
        wait_all(jobs, timeout=120)
        noticed = time.perf_counter()
        releaser.join()
        return noticed - _ended[n - 1]

    samples = alternate({"last": once}, repeats)
    latency = median(samples["last"]) * 1e3
    return [
        at_most(
            "wait_all noticing the last of 1,000 local jobs",
            latency,
            20,
            "ms",
            target="<= 20 ms after it ends",
            note=f"from the last job's callable returning to wait_all returning; median of "
            f"{repeats} runs (worst {max(samples['last']) * 1e3:.2f} ms)",
        )
    ]


def bench_job_scaling(repeats: int) -> list[dict[str, Any]]:
    """Submit N trivial jobs, then ``wait_all`` them, each N on a fresh client; the per-job
    cost should not grow with N (total cost linear in N)."""
    request = JobRequest(name="bench-scale", entrypoint=Entrypoint.from_callable(noop))
    submit: dict[int, list[float]] = {n: [] for n in SCALE_NS}
    waited: dict[int, list[float]] = {n: [] for n in SCALE_NS}

    wall: dict[int, list[float]] = {n: [] for n in SCALE_NS}

    def once(n: int) -> float:
        # CPU time of the whole process (every job thread included): the cost of the jobs,
        # steady on a shared machine where wall time also counts waiting for a core.
        with LocalClient(echo_logs=False) as client:
            start, cpu0 = time.perf_counter(), time.process_time()
            jobs = [client.submit(request) for _ in range(n)]
            cpu1 = time.process_time()
            wait_all(jobs, timeout=300)
            done, cpu2 = time.perf_counter(), time.process_time()
        submit[n].append((cpu1 - cpu0) / n)
        waited[n].append((cpu2 - cpu1) / n)
        wall[n].append((done - start) / n)
        return done - start

    alternate({str(n): (lambda n=n: once(n)) for n in SCALE_NS}, repeats)
    rows: list[dict[str, Any]] = []
    for label, data in (("submit", submit), ("wait_all", waited)):
        # alternate() discarded the warm-up round's return value, not these lists: drop it here.
        per_job = {n: median(values[1:]) * 1e6 for n, values in data.items()}
        base = per_job[SCALE_NS[0]]
        for n in SCALE_NS:
            rows.append(
                at_most(
                    f"local job {label}, per job, N={n:,}",
                    per_job[n],
                    2 * base,
                    "us",
                    target=f"<= 2x per-job cost at N={SCALE_NS[0]} (linear)",
                    ratio=per_job[n] / base,
                    note=(
                        "process CPU time of N submit() calls / N"
                        if label == "submit"
                        else "process CPU time from the last submit() to wait_all() returning / N"
                    )
                    + f"; growth ratio vs N={SCALE_NS[0]}; wall submit->all done "
                    f"{median(wall[n][1:]) * 1e6:.0f} us per job",
                )
            )
    return rows


def run(repeats: int) -> list[dict[str, Any]]:
    """Every local benchmark; see the module docstring."""
    rows = bench_import(repeats)
    with LocalClient(echo_logs=False) as client:
        rows += bench_actor_sync(client, repeats)
        rows += bench_actor_remote(client, repeats)
        rows += bench_job_roundtrip(client, repeats)
        rows += bench_wait_all_last(client, repeats)
        rows += bench_actor_callers(client, repeats)
    rows += bench_job_scaling(repeats)
    return rows


if __name__ == "__main__":
    main(run)
