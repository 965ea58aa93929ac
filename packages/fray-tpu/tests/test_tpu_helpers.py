"""fray-tpu helpers that need no Ray: multislice env, lockfile, metadata check, errors."""

from __future__ import annotations

import os
import pickle
import socket
import subprocess
import sys
from pathlib import Path

import pytest

import fray_tpu
from fray import JobFailedError, JobStatus
from fray_testing.gce_metadata import FakeGceMetadataServer
from fray_tpu import (
    LockfileOutcome,
    TpuJobFailedError,
    TpuSchedulingError,
    is_preempted,
    metadata_base_url,
    multislice_env,
    remove_libtpu_lockfile,
)


def test_multislice_env_for_each_slice() -> None:
    envs = [multislice_env("10.0.0.5", 3, i) for i in range(3)]
    assert [e["MEGASCALE_SLICE_ID"] for e in envs] == ["0", "1", "2"]
    for env in envs:
        assert env["MEGASCALE_COORDINATOR_ADDRESS"] == "10.0.0.5:8081"
        assert env["MEGASCALE_NUM_SLICES"] == "3"
        assert env["MEGASCALE_PORT"] == "8081"
    assert multislice_env("10.0.0.5", 1, 0) == {}
    assert multislice_env("h", 2, 1, port=9000)["MEGASCALE_COORDINATOR_ADDRESS"] == "h:9000"


@pytest.mark.parametrize(
    ("ip", "n", "i"), [("h", 0, 0), ("h", 2, 2), ("h", 2, -1), ("", 2, 0), ("h", True, 0)]
)
def test_multislice_env_rejects_bad_values(ip: str, n: int, i: int) -> None:
    with pytest.raises(ValueError):
        multislice_env(ip, n, i)


def test_lockfile_removed_missing_and_failed(tmp_path: Path) -> None:
    lock = tmp_path / "libtpu_lockfile"
    lock.write_text("")
    assert remove_libtpu_lockfile(str(lock)).outcome is LockfileOutcome.REMOVED
    assert not lock.exists()
    assert remove_libtpu_lockfile(str(lock)).outcome is LockfileOutcome.MISSING
    # A path that cannot be unlinked (a directory) is reported, never raised.
    blocked = tmp_path / "dir"
    blocked.mkdir()
    result = remove_libtpu_lockfile(str(blocked))
    assert result.outcome is LockfileOutcome.FAILED
    assert result.error and "could not remove" in result.describe()


def test_lockfile_path_from_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lock = tmp_path / "lock"
    lock.write_text("")
    monkeypatch.setenv("FRAY_TPU_LIBTPU_LOCKFILE", str(lock))
    assert remove_libtpu_lockfile().path == str(lock)
    assert not lock.exists()


def test_metadata_preempted_answers() -> None:
    with FakeGceMetadataServer() as server:
        assert is_preempted(server.host) is False
        server.set_preempted(True)
        assert is_preempted(server.host) is True
        assert is_preempted(server.host) is True
        server.set_preempted(False)
        assert is_preempted(server.host) is False
        server.preempt_next(2)
        assert [is_preempted(server.host) for _ in range(3)] == [True, True, False]
        assert server.queries == 7


def test_metadata_host_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    with FakeGceMetadataServer() as server:
        monkeypatch.setenv("GCE_METADATA_HOST", server.host)
        assert metadata_base_url() == server.url
        server.set_preempted(True)
        assert is_preempted() is True


def test_metadata_unreachable_is_not_preempted() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    # Nothing listens on the port: a quick False, and later questions are not even sent.
    assert is_preempted(f"127.0.0.1:{port}", timeout=2) is False
    assert is_preempted(f"127.0.0.1:{port}", timeout=2) is False


def test_fake_metadata_server_requires_the_flavor_header() -> None:
    import urllib.error
    import urllib.request

    with FakeGceMetadataServer() as server:
        with pytest.raises(urllib.error.HTTPError) as info:
            urllib.request.urlopen(server.url + "instance/preempted", timeout=5)
        assert info.value.code == 403
        info.value.close()


def test_errors_are_fray_errors_and_pickle() -> None:
    err = TpuSchedulingError(
        "job-1", JobStatus.FAILED, "asked for 3", attempts=0, reason="scheduling"
    )
    assert isinstance(err, TpuJobFailedError) and isinstance(err, JobFailedError)
    copy = pickle.loads(pickle.dumps(err))
    assert type(copy) is TpuSchedulingError
    assert (copy.job_id, copy.reason, str(copy)) == ("job-1", "scheduling", str(err))


def test_import_stays_free_of_ray_and_jax() -> None:
    code = (
        "import sys, fray_tpu; fray_tpu.is_preempted; fray_tpu.multislice_env;"
        "print([m for m in ('ray', 'jax') if m in sys.modules])"
    )
    env = {**os.environ, "GCE_METADATA_HOST": "127.0.0.1:9"}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
    )
    assert out.stdout.strip() == "[]"
    assert "ray" not in fray_tpu.__all__


def test_remote_function_options_are_read_and_fall_back(caplog: pytest.LogCaptureFixture) -> None:
    """fray_tpu.ray's one private Ray name, against the pinned Ray, and its fallback."""
    import logging

    ray = pytest.importorskip("ray")
    from fray_tpu.ray._adapter import unwrap_remote_function

    def plain() -> str:
        return "plain"

    remote = ray.remote(num_cpus=3, runtime_env={"env_vars": {"A": "1"}})(plain)
    fn, options = unwrap_remote_function(remote)
    assert fn is plain
    assert options["num_cpus"] == 3 and options["runtime_env"]["env_vars"] == {"A": "1"}
    assert unwrap_remote_function(plain) == (plain, {})
    object.__setattr__(remote, "_default_options", None)  # a Ray that keeps them elsewhere
    with caplog.at_level(logging.WARNING, logger="fray_tpu.ray"):
        fn, options = unwrap_remote_function(remote)
    assert fn is plain and options == {}
    assert "runs with Fray's defaults" in caplog.text
