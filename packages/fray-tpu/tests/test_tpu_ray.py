"""TPU gang orchestration on a local Ray cluster posing as two v4-16 slices (no TPUs).

One fake cluster serves the whole module (``fake_tpu_ray_cluster``: a head and slices
``slice-a`` and ``slice-b`` of two hosts each). Nothing here kills a host; node loss is in
``test_tpu_ray_faults.py`` on a cluster of its own.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import ray

from fray import (
    Entrypoint,
    EnvironmentConfig,
    JobHandle,
    JobRequest,
    JobStatus,
    ResourceConfig,
    wait_all,
)
from fray_testing.gce_metadata import FakeGceMetadataServer
from fray_testing.ray_cluster import LocalRayCluster
from fray_tpu.ray import (
    TpuJobFailedError,
    TpuSchedulingError,
    launch_on_pod,
    run_on_pod,
    run_on_pod_multislice,
    submit_tpu_job,
)
from fray_tpu.ray.gang import hub_name

pytestmark = [pytest.mark.integration, pytest.mark.slow]

FAST = {"scheduling_timeout": 60.0, "health_interval": 0.5}
TPU_KEYS = (
    "TPU_NAME",
    "TPU_WORKER_ID",
    "TPU_VISIBLE_CHIPS",
    "MEGASCALE_COORDINATOR_ADDRESS",
    "MEGASCALE_NUM_SLICES",
    "MEGASCALE_SLICE_ID",
    "MEGASCALE_PORT",
    "FRAY_TASK_INDEX",
    "FRAY_NUM_TASKS",
    "JAX_PLATFORMS",
)


def host_env() -> dict[str, str | None]:
    return {key: os.environ.get(key) for key in TPU_KEYS}


def raise_value_error() -> None:
    raise ValueError("boom on purpose")


def raise_timeout_error() -> None:
    raise TimeoutError("the user's own timeout")


def fail_first_attempt(marker: str) -> str:
    """Fails the first time (any host); succeeds once the marker exists."""
    if not os.path.exists(marker):
        with open(marker, "a"):
            pass
        raise RuntimeError("first attempt fails")
    return "ok"


def wait_for_release(release: str, started_dir: str) -> str:
    Path(started_dir, f"{os.environ['TPU_NAME']}-{os.environ['TPU_WORKER_ID']}").touch()
    deadline = time.monotonic() + 120
    while not os.path.exists(release):
        if time.monotonic() > deadline:
            raise RuntimeError("never released")
        time.sleep(0.05)
    return "released"


def print_around_release(release: str, started_dir: str) -> None:
    """Prints a line, waits for the test's release, prints its last line."""
    where = f"{os.environ['TPU_NAME']}-{os.environ['TPU_WORKER_ID']}"
    print(f"before {where}", flush=True)
    wait_for_release(release, started_dir)
    print(f"after {where}", flush=True)


def host_env_and_lockfile(lockfile: str) -> dict[str, Any]:
    return {**host_env(), "lockfile_seen": os.path.exists(lockfile)}


def read_from_remote() -> str | None:
    return os.environ.get("FROM_REMOTE")


def fail_after_go(marker_dir: str) -> str:
    """First attempt: says it started, waits for the test's go, then fails."""
    started = Path(marker_dir, f"started-{os.environ['TPU_WORKER_ID']}")
    if started.exists():
        return "ok"
    started.touch()
    deadline = time.monotonic() + 120
    while not Path(marker_dir, "go").exists():
        if time.monotonic() > deadline:
            raise RuntimeError("never got the go")
        time.sleep(0.05)
    raise RuntimeError("first attempt fails")


def say_hello(greeting: str, *, who: str) -> str:
    print(f"{greeting} {who} from {os.environ['TPU_NAME']}/{os.environ['TPU_WORKER_ID']}")
    return f"{greeting}-{os.environ['FRAY_TASK_INDEX']}"


def jax_on_every_host(port: int) -> dict[str, Any]:
    import jax
    import numpy as np
    from jax.experimental import multihost_utils

    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(
        f"127.0.0.1:{port}",
        num_processes=int(os.environ["FRAY_NUM_TASKS"]),
        process_id=int(os.environ["FRAY_TASK_INDEX"]),
    )
    try:
        gathered = multihost_utils.process_allgather(np.array([jax.process_index() + 1.0]))
        return {
            "process": jax.process_index(),
            "local_devices": jax.local_device_count(),
            "global_devices": jax.device_count(),
            "platform": jax.devices()[0].platform,
            "sum": float(np.sum(gathered)),
        }
    finally:
        jax.distributed.shutdown()


def main_thread_and_signal_handler() -> dict[str, Any]:
    """Installs (then restores) a SIGTERM handler, as checkpointing code does."""
    import signal

    previous = signal.signal(signal.SIGTERM, lambda _signum, _frame: None)
    signal.signal(signal.SIGTERM, previous)
    return {"main": threading.current_thread() is threading.main_thread(), "pid": os.getpid()}


def _free_resources_restored(expected: dict[str, float], timeout: float = 60) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        free = ray.available_resources()
        if all(free.get(k, 0) >= v for k, v in expected.items()):
            return True
        time.sleep(0.2)
    return False


ALL_TPU = {"TPU": 16.0, "TPU-v4-16-head": 2.0, "slice-a": 2.0, "slice-b": 2.0}


# -- run_on_pod -------------------------------------------------------------------------------


def test_single_slice_runs_on_every_host_and_reruns(
    fake_tpu_ray_cluster: LocalRayCluster, tmp_path: Path
) -> None:
    lock = tmp_path / "libtpu_lockfile"
    lock.write_text("held by a dead process")
    env = {"env_vars": {"FRAY_TPU_LIBTPU_LOCKFILE": str(lock)}}
    first = run_on_pod(host_env_and_lockfile, "v4-16", args=[str(lock)], runtime_env=env, **FAST)
    assert len(first) == 2
    assert {r["TPU_NAME"] for r in first} in ({"slice-a"}, {"slice-b"})
    assert [r["TPU_WORKER_ID"] for r in first] == ["0", "1"]
    assert [r["FRAY_TASK_INDEX"] for r in first] == ["0", "1"]
    assert all(r["TPU_VISIBLE_CHIPS"] == "0,1,2,3" for r in first)
    assert all(r["MEGASCALE_NUM_SLICES"] is None for r in first)  # one slice: no megascale
    assert all(r["JAX_PLATFORMS"] == "" for r in first)  # the device default env
    # libtpu's lockfile was removed on each host before the launch.
    assert [r["lockfile_seen"] for r in first] == [False, False]
    assert not lock.exists()
    # Rerun, this time as a @ray.remote function whose runtime_env is kept.
    remote = ray.remote(max_calls=1, runtime_env={"env_vars": {"FROM_REMOTE": "yes"}})(
        read_from_remote
    )
    assert run_on_pod(remote, "v4-16", **FAST) == ["yes", "yes"]
    assert _free_resources_restored(ALL_TPU)


def test_payload_runs_in_the_host_process_main_thread_and_the_process_ends(
    fake_tpu_ray_cluster: LocalRayCluster,
) -> None:
    import psutil

    first = run_on_pod(main_thread_and_signal_handler, "v4-16", max_retries_failure=0, **FAST)
    assert [r["main"] for r in first] == [True, True]
    second = run_on_pod(main_thread_and_signal_handler, "v4-16", max_retries_failure=0, **FAST)
    assert [r["main"] for r in second] == [True, True]
    pids = {r["pid"] for r in first + second}
    assert len(pids) == 4  # a fresh process on every host for every run
    # The processes that ran the code (and could hold libtpu's lock) are gone.
    deadline = time.monotonic() + 60
    while any(psutil.pid_exists(pid) for pid in pids):
        assert time.monotonic() < deadline, "a host process outlived its run"
        time.sleep(0.1)


def test_multislice_hosts_get_distinct_megascale_values(
    fake_tpu_ray_cluster: LocalRayCluster,
) -> None:
    results = run_on_pod_multislice(host_env, "v4-16", 2, **FAST)
    assert len(results) == 4
    assert [(r["TPU_NAME"], r["TPU_WORKER_ID"]) for r in results] == [
        ("slice-a", "0"),
        ("slice-a", "1"),
        ("slice-b", "0"),
        ("slice-b", "1"),
    ]
    assert [r["MEGASCALE_SLICE_ID"] for r in results] == ["0", "0", "1", "1"]
    assert [r["FRAY_TASK_INDEX"] for r in results] == ["0", "1", "2", "3"]
    assert {r["MEGASCALE_NUM_SLICES"] for r in results} == {"2"}
    assert {r["MEGASCALE_PORT"] for r in results} == {"8081"}
    coordinator = {r["MEGASCALE_COORDINATOR_ADDRESS"] for r in results}
    assert len(coordinator) == 1
    assert coordinator.pop().endswith(":8081")


def test_flexible_slice_count_takes_the_largest_available(
    fake_tpu_ray_cluster: LocalRayCluster,
) -> None:
    # The slices the last test let go are free again (Ray tells the cluster soon after).
    assert _free_resources_restored(ALL_TPU)
    results = run_on_pod(host_env, "v4-16", num_slices=[1, 2, 4], **FAST)
    assert len(results) == 4
    assert {r["MEGASCALE_NUM_SLICES"] for r in results} == {"2"}


def test_too_many_slices_fail_after_the_scheduling_timeout(
    fake_tpu_ray_cluster: LocalRayCluster,
) -> None:
    start = time.monotonic()
    with pytest.raises(TpuSchedulingError) as info:
        run_on_pod(host_env, "v4-16", num_slices=3, scheduling_timeout=2.0, health_interval=0.5)
    elapsed = time.monotonic() - start
    message = str(info.value)
    assert "asked for 3 slice(s) of v4-16" in message
    assert "2 complete v4-16 slice(s)" in message
    assert "slice-a" in message and "slice-b" in message
    assert 2.0 <= elapsed < 60
    assert info.value.attempts == 0
    assert _free_resources_restored(ALL_TPU)


def test_user_exception_uses_the_failure_budget(fake_tpu_ray_cluster: LocalRayCluster) -> None:
    handle = launch_on_pod(
        raise_value_error, "v4-16", max_retries_failure=1, max_retries_preemption=5, **FAST
    )
    with pytest.raises(TpuJobFailedError) as info:
        handle.wait(timeout=180)
    err = info.value
    assert (err.attempts, err.failures, err.preemptions) == (2, 2, 0)  # 1 retry = 2 attempts
    assert err.reason == "failure"
    assert "ValueError: boom on purpose" in str(err)
    assert isinstance(err.__cause__, ValueError)
    assert str(err.__cause__) == "boom on purpose"
    info_ = handle.info()
    assert (info_.status, info_.attempts, info_.failures) == (JobStatus.FAILED, 2, 2)
    # The hub is gone; the cause and output are the job's record's.
    assert _released(handle)
    with pytest.raises(TpuJobFailedError) as again:
        handle.result()
    assert isinstance(again.value.__cause__, ValueError)
    lines = list(handle.logs())
    # The retry notice is the one every backend writes (fray.backend.JobRecord).
    assert any(
        line.startswith("[fray] attempt 1 failed (") and "boom on purpose" in line for line in lines
    )


def test_user_timeout_error_is_a_failure_not_a_preemption(
    fake_tpu_ray_cluster: LocalRayCluster,
) -> None:
    with pytest.raises(TpuJobFailedError) as info:
        run_on_pod(
            raise_timeout_error, "v4-16", max_retries_failure=0, max_retries_preemption=3, **FAST
        )
    assert (info.value.attempts, info.value.failures, info.value.preemptions) == (1, 1, 0)
    assert isinstance(info.value.__cause__, TimeoutError)


def test_metadata_preempted_counts_as_preemption(
    fake_tpu_ray_cluster: LocalRayCluster, tmp_path: Path
) -> None:
    with FakeGceMetadataServer() as server:
        env = {"env_vars": {"GCE_METADATA_HOST": server.host}}
        # Control: without the metadata flag the same program is a plain failure.
        with pytest.raises(TpuJobFailedError) as info:
            run_on_pod(
                fail_first_attempt,
                "v4-16",
                kwargs={"marker": str(tmp_path / "control")},
                runtime_env=env,
                max_retries_failure=0,
                max_retries_preemption=1,
                **FAST,
            )
        assert info.value.reason == "failure"
        assert server.queries >= 1  # the classification asked the metadata server
        # Now the VM says it is being preempted while the program runs: a preemption.
        handle = launch_on_pod(
            fail_after_go,
            "v4-16",
            args=[str(tmp_path)],
            runtime_env=env,
            max_retries_failure=0,
            max_retries_preemption=1,
            **FAST,
        )
        deadline = time.monotonic() + 120
        while len(list(tmp_path.glob("started-*"))) < 2:
            assert time.monotonic() < deadline, "the hosts never started"
            time.sleep(0.05)
        server.preempt_next(1)
        (tmp_path / "go").touch()
        assert handle.result(timeout=180) == ["ok", "ok"]
        info_ = handle.info()
        assert (info_.attempts, info_.preemptions, info_.failures) == (2, 1, 0)
        assert "preempted" in "\n".join(handle.logs())


def test_broken_runtime_env_is_a_failure_of_the_attempt(
    fake_tpu_ray_cluster: LocalRayCluster,
) -> None:
    # The host actors cannot start: Ray fails to build the env (there is no such conda env).
    with pytest.raises(TpuJobFailedError) as info:
        run_on_pod(
            host_env,
            "v4-16",
            runtime_env={"conda": "fray-tpu-no-such-conda-env"},
            max_retries_failure=0,
            max_retries_preemption=3,
            **FAST,
        )
    err = info.value
    assert (err.attempts, err.failures, err.preemptions) == (1, 1, 0)
    assert err.reason == "failure"
    assert "runtime environment setup failed" in str(err)
    assert _free_resources_restored(ALL_TPU)


def test_preemption_budget_exhausted_says_so(
    fake_tpu_ray_cluster: LocalRayCluster,
) -> None:
    with FakeGceMetadataServer() as server:
        server.set_preempted(True)
        with pytest.raises(TpuJobFailedError) as info:
            run_on_pod(
                raise_value_error,
                "v4-16",
                runtime_env={"env_vars": {"GCE_METADATA_HOST": server.host}},
                max_retries_failure=5,
                max_retries_preemption=1,
                **FAST,
            )
    err = info.value
    assert (err.attempts, err.preemptions, err.failures) == (2, 2, 0)
    assert err.reason == "preemption"
    assert "preempted 2 times, more than max_retries_preemption=1" in str(err)
    assert _free_resources_restored(ALL_TPU)


def test_bad_arguments_are_rejected(fake_tpu_ray_cluster: LocalRayCluster) -> None:
    from fray import InvalidRequestError
    from fray_tpu import UnknownTpuTypeError

    with pytest.raises(InvalidRequestError, match="num_slices"):
        run_on_pod(host_env, "v4-16", num_slices=[])
    with pytest.raises(InvalidRequestError, match="num_slices"):
        run_on_pod(host_env, "v4-16", num_slices=0)
    with pytest.raises(InvalidRequestError, match="max_retries_failure"):
        run_on_pod(host_env, "v4-16", max_retries_failure=-1)
    with pytest.raises(UnknownTpuTypeError, match="v4-16"):
        run_on_pod(host_env, "v4-17")


# -- submit_tpu_job (the RayClient route) -----------------------------------------------------


def test_submit_tpu_job_handle(fake_tpu_ray_cluster: LocalRayCluster) -> None:
    request = JobRequest(
        name="hello",
        entrypoint=Entrypoint.from_callable(say_hello, args=["hi"], kwargs={"who": "fray"}),
        resources=ResourceConfig.with_tpu("v4-16", slice_count=2),
        environment=EnvironmentConfig(env_vars={"JAX_PLATFORMS": "cpu"}),
    )
    handle = submit_tpu_job(request, job_id="ray-tpu-hello-1", **FAST)
    assert isinstance(handle, JobHandle)
    assert handle.job_id == "ray-tpu-hello-1"
    done = threading.Event()
    handle.add_done_callback(lambda _h: done.set())
    assert wait_all([handle], timeout=180) == [JobStatus.SUCCEEDED]
    assert done.wait(30)
    assert handle.result() == ["hi-0", "hi-1", "hi-2", "hi-3"]
    info = handle.info()
    assert (info.status, info.attempts, info.replicas) == (JobStatus.SUCCEEDED, 1, 4)
    lines = list(handle.logs())
    for index, where in enumerate(("slice-a/0", "slice-a/1", "slice-b/0", "slice-b/1")):
        assert f"[{index}] hi fray from {where}" in lines  # each host's lines carry its index
    assert list(handle.logs(follow=True)) == lines  # a finished job: follow ends at once
    # The job's hub was released once the job ended: the handle answers from its record.
    assert _released(handle)
    assert handle.status() is JobStatus.SUCCEEDED
    assert handle.result() == ["hi-0", "hi-1", "hi-2", "hi-3"]
    assert handle.info().attempts == 1
    assert len(handle.placement()) == 4
    assert handle.wait_for_attempt(1, timeout=5)


def _released(handle: Any, timeout: float = 60) -> bool:
    """Whether the job's hub is gone within ``timeout`` (it is killed once the job ended,
    whoever waits on it)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            ray.get_actor(hub_name(handle.job_id))
        except ValueError:
            return True
        time.sleep(0.1)  # polls a bounded wait
    return False


def test_following_logs_reads_to_the_last_line_across_the_release_of_the_hub(
    fake_tpu_ray_cluster: LocalRayCluster, tmp_path: Path
) -> None:
    release = tmp_path / "release"
    request = JobRequest(
        name="follow",
        entrypoint=Entrypoint.from_callable(
            print_around_release, args=[str(release), str(tmp_path)]
        ),
        resources=ResourceConfig.with_tpu("v4-16"),
    )
    handle = submit_tpu_job(request, job_id="ray-tpu-follow-1", **FAST)
    followed: list[str] = []
    follower = threading.Thread(target=lambda: followed.extend(handle.logs(follow=True)))
    follower.start()
    deadline = time.monotonic() + 120
    while len(list(tmp_path.glob("slice-*"))) < 2:
        assert time.monotonic() < deadline, "the hosts never started"
        time.sleep(0.1)
    release.touch()
    assert handle.wait(timeout=180) is JobStatus.SUCCEEDED
    follower.join(timeout=60)
    assert not follower.is_alive()
    assert _released(handle)
    (name,) = {host["slice"] for host in handle.placement()}  # Ray's scheduler chose it
    for index, where in enumerate((f"{name}-0", f"{name}-1")):
        assert f"[{index}] before {where}" in followed
        assert f"[{index}] after {where}" in followed
    assert followed == list(handle.logs())


def test_submit_tpu_command_job(fake_tpu_ray_cluster: LocalRayCluster) -> None:
    ok = JobRequest(
        name="cmd",
        entrypoint=Entrypoint.from_shell('echo "host $TPU_WORKER_ID of $TPU_NAME"; printf tail'),
        resources=ResourceConfig.with_tpu("v4-16"),
    )
    handle = submit_tpu_job(ok, job_id="ray-tpu-cmd-1", **FAST)
    assert handle.wait(timeout=180) is JobStatus.SUCCEEDED
    lines = list(handle.logs())
    hosts = sorted(line.split(" of ")[0] for line in lines if " host " in line)
    assert hosts == ["[0] host 0", "[1] host 1"]  # each host's lines carry its index
    assert sorted(line for line in lines if line.endswith("tail")) == ["[0] tail", "[1] tail"]
    bad = JobRequest(
        name="cmd-bad",
        entrypoint=Entrypoint.from_shell("echo dying; exit 3"),
        resources=ResourceConfig.with_tpu("v4-16"),
    )
    handle = submit_tpu_job(bad, job_id="ray-tpu-cmd-2", **FAST)
    with pytest.raises(TpuJobFailedError, match="exited with code 3"):
        handle.wait(timeout=180)
    assert handle.status() is JobStatus.FAILED


def test_terminate_stops_the_gang(fake_tpu_ray_cluster: LocalRayCluster, tmp_path: Path) -> None:
    request = JobRequest(
        name="forever",
        entrypoint=Entrypoint.from_callable(
            wait_for_release, args=[str(tmp_path / "never"), str(tmp_path)]
        ),
        resources=ResourceConfig.with_tpu("v4-16"),
    )
    handle = submit_tpu_job(request, job_id="ray-tpu-forever-1", **FAST)
    deadline = time.monotonic() + 120
    while len(list(tmp_path.glob("slice-*"))) < 2:
        assert time.monotonic() < deadline, "the hosts never started"
        time.sleep(0.1)
    assert handle.status() is JobStatus.RUNNING
    handle.terminate()
    assert handle.status() is JobStatus.STOPPED
    assert handle.wait(timeout=10) is JobStatus.STOPPED
    assert _free_resources_restored(ALL_TPU)


def test_jax_runs_on_every_host(fake_tpu_ray_cluster: LocalRayCluster) -> None:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = {
        "env_vars": {
            "JAX_PLATFORMS": "cpu",
            "XLA_FLAGS": "--xla_force_host_platform_device_count=4",
        }
    }
    results = run_on_pod(
        jax_on_every_host, "v4-16", args=[port], runtime_env=env, max_retries_failure=0, **FAST
    )
    assert [r["process"] for r in results] == [0, 1]
    for r in results:
        assert (r["local_devices"], r["global_devices"], r["platform"]) == (4, 8, "cpu")
        assert r["sum"] == 3.0
