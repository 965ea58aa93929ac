"""Secrets: env var values whose names look secret never show in reprs, errors, job logs or job
records; payload files are private; nothing the core starts listens beyond loopback.

(The CLI's output and state files are covered by the CLI's own tests.)
"""

from __future__ import annotations

import ipaddress
import os
import stat
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fray import (
    Entrypoint,
    EnvironmentConfig,
    InvalidRequestError,
    JobFailedError,
    JobRequest,
    JobStatus,
    LocalClient,
    ResourceConfig,
)
from fray._types import create_environment

DEADLINE_S = 60.0
SECRET = "s3cr3t-Vfj29xQ"  # distinctive: appears nowhere by accident

secret_names = st.tuples(
    st.from_regex(r"\A([A-Z][A-Z0-9]{0,5}_)?\Z"),
    st.sampled_from(["TOKEN", "KEY", "SECRET", "PASSWORD", "token", "Api_Key", "PASSWD"]),
    st.from_regex(r"\A(_[A-Z0-9]{1,5})?\Z"),
).map("".join)
# Marked, so a value can never be text the message holds anyway (hypothesis also tries
# strings it finds in the code, such as the field name "docker_image").
secret_values = st.text(
    alphabet=st.characters(min_codepoint=33, max_codepoint=126), min_size=12, max_size=30
).map(lambda text: f"sv:{text}")


@settings(max_examples=60, deadline=None, database=None)
@given(name=secret_names, value=secret_values)
def test_reprs_hide_values_of_secret_looking_names(name: str, value: str) -> None:
    env = EnvironmentConfig(env_vars={name: value, "PLAIN_SETTING": "visible-value"})
    request = JobRequest(name="train", entrypoint=Entrypoint.from_command("true"), environment=env)
    copies = [
        env,
        request,
        create_environment(env_vars={name: value}),
        request.model_copy(update={"name": "other"}),
        [request],  # inside containers too
    ]
    for obj in copies:
        for text in (repr(obj), str(obj)):
            assert value not in text
    assert "visible-value" in repr(env)
    assert "***" in repr(env) and "***" in repr(request)
    # The value itself is kept: jobs need it.
    assert request.env_vars[name] == value


@settings(max_examples=40, deadline=None, database=None)
@given(name=secret_names, value=secret_values)
def test_validation_errors_hide_secret_values(name: str, value: str) -> None:
    """A rejected env mapping is quoted in the error (which ends up in logs): redacted."""
    bad_inputs: list[dict[str, Any]] = [
        {"env_vars": {name: value, "bad-name": "x"}},
        {"env_vars": {name: value, "NUMBER": 5}},
        {"env_vars": {name: value}, "workspace": "w", "docker_image": "d"},
    ]
    for fields in bad_inputs:
        with pytest.raises(InvalidRequestError) as info:
            EnvironmentConfig(**fields)
        assert value not in str(info.value) and value not in repr(info.value.value)
        with pytest.raises(InvalidRequestError) as info:
            JobRequest(name="j", entrypoint=Entrypoint.from_command("true"), environment=fields)  # pyright: ignore[reportArgumentType]
        assert value not in str(info.value) and value not in repr(info.value.value)


@settings(max_examples=40, deadline=None, database=None)
@given(name=secret_names, value=secret_values)
def test_wrongly_shaped_env_vars_and_secrets_never_show_a_value(name: str, value: str) -> None:
    """``env_vars`` as pairs or ``NAME=value`` text, and any bad ``secrets`` (whose values are
    all secret, whatever their names), are refused without the value in the error."""
    shapes: list[Any] = [
        [(name, value)],
        [[name, value]],
        (name, value),
        {(name, value)},
        f"{name}={value}",
        f"A=1 {name}={value} B=2",
        {f"{name}={value}": "x"},
        {(name, value): "x"},
    ]
    bad_secrets: list[Any] = [
        {"plain": value, "bad/name": "x"},
        {"plain": value, "N": 3},
        [("plain", value)],
        f"plain={value}",
    ]
    builds: list[Any] = []
    for env_vars in shapes:
        builds.append(lambda env_vars=env_vars: EnvironmentConfig(env_vars=env_vars))
        builds.append(lambda env_vars=env_vars: create_environment(env_vars=env_vars))
    for secrets in bad_secrets:
        builds.append(lambda secrets=secrets: EnvironmentConfig(secrets=secrets))
        builds.append(lambda secrets=secrets: create_environment(secrets=secrets))
    builds.append(lambda: Entrypoint.from_binary("run", f"{name}={value}"))
    builds.append(lambda: Entrypoint.from_command(f"{name}={value} run"))
    for build in builds:
        with pytest.raises(InvalidRequestError) as info:
            build()
        shown = f"{info.value} {info.value.value!r} {info.value.allowed}"
        assert value not in shown and value[3:] not in shown
    environment = {"env_vars": shapes[0]}
    with pytest.raises(InvalidRequestError) as info:
        JobRequest(name="j", entrypoint=Entrypoint.from_command("t"), environment=environment)  # pyright: ignore[reportArgumentType]
    assert value not in str(info.value)


def leaky_failure() -> None:
    token = os.environ["HF_TOKEN"]
    assert token == SECRET  # the job does get the real value
    raise RuntimeError("the model download failed")


def test_job_logs_and_records_hide_secrets(client: LocalClient) -> None:
    env = EnvironmentConfig(env_vars={"HF_TOKEN": SECRET, "WANDB_API_KEY": SECRET})
    job = client.submit(
        JobRequest(
            name="leaky",
            entrypoint=Entrypoint.from_callable(leaky_failure),
            environment=env,
            max_retries_failure=1,
        )
    )
    with pytest.raises(JobFailedError, match="the model download failed") as failure:
        job.wait(timeout=DEADLINE_S)
    info = job.info()
    assert (info.status, info.attempts) == (JobStatus.FAILED, 2)
    logs = list(job.logs())
    assert any("[fray] attempt 1 failed" in line for line in logs)  # the core wrote records
    records = [
        *logs,
        repr(info),
        str(info),
        repr(job),
        repr(client.list_jobs()),
        str(failure.value),
        repr(info.model_dump()),
    ]
    assert not [text for text in records if SECRET in text]


def wait_for_file(path: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            raise TimeoutError(path)
        time.sleep(0.02)


def held_open(gate: str, secret_arg: str) -> str:
    print("ready", flush=True)
    wait_for_file(gate)
    return secret_arg[:3]


@pytest.fixture
def open_umask() -> Iterator[None]:
    """umask 0 while the test runs: modes must be set explicitly, not left to the umask."""
    previous = os.umask(0)
    try:
        yield
    finally:
        os.umask(previous)


def mode(path: str | Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.mark.integration
@pytest.mark.usefixtures("open_umask")
def test_payload_files_are_private_and_removed(client: LocalClient, tmp_path: Path) -> None:
    gate = str(tmp_path / "gate")
    job = client.submit(
        JobRequest(
            name="private",
            entrypoint=Entrypoint.from_callable(held_open, [gate, SECRET]),
            environment=EnvironmentConfig(env_vars={"DB_PASSWORD": SECRET}),
        )
    )
    assert next(iter(job.logs(follow=True))) == "ready"
    runners = [
        p
        for p in psutil.Process().children(recursive=True)
        if p.cmdline()[1:3] == ["-m", "fray._runner"]
    ]
    assert len(runners) == 1
    argv = runners[0].cmdline()
    # Secrets travel in the environment and the private payload, never on a command line.
    everyone_sees = [p.cmdline() for p in psutil.Process().children(recursive=True)]
    assert not [line for line in everyone_sees if any(SECRET in arg for arg in line)]
    payload = Path(argv[argv.index("fray._runner") + 1])
    assert payload.exists()
    assert mode(payload) == 0o600
    assert mode(payload.parent) == 0o700  # the job's directory
    assert mode(payload.parent.parent) == 0o700  # the client's directory
    Path(gate).touch()
    assert job.result(timeout=DEADLINE_S) == SECRET[:3]
    # Removed once the job is finished (just after it is marked finished).
    deadline = time.monotonic() + DEADLINE_S
    while payload.parent.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not payload.parent.exists()
    root = payload.parent.parent
    client.shutdown()
    assert not root.exists()


@pytest.mark.usefixtures("open_umask")
def test_result_files_are_written_private(tmp_path: Path) -> None:
    from fray._runner import _write

    target = tmp_path / "result.pkl"
    _write(str(target), ("ok", SECRET))
    assert mode(target) == 0o600


def listeners(pids: set[int]) -> set[tuple[int, str, int]]:
    found: set[tuple[int, str, int]] = set()
    for pid in pids:
        try:
            conns = psutil.Process(pid).net_connections(kind="inet")
        except psutil.NoSuchProcess:
            continue
        for conn in conns:
            if conn.status == psutil.CONN_LISTEN:
                found.add((pid, conn.laddr.ip, conn.laddr.port))
    return found


def family_pids() -> set[int]:
    me = psutil.Process()
    return {me.pid, *(p.pid for p in me.children(recursive=True))}


def tpu_host(gate: str) -> str:
    print(f"coordinator {os.environ.get('MEGASCALE_COORDINATOR_ADDRESS')}", flush=True)
    wait_for_file(gate)
    return os.environ["TPU_WORKER_ID"]


class Echo:
    def f(self, x: int) -> int:
        return x


@pytest.mark.integration
def test_nothing_listens_beyond_loopback(client: LocalClient, tmp_path: Path) -> None:
    before = listeners(family_pids())
    gate = str(tmp_path / "gate")
    tpu = client.submit(
        JobRequest(
            name="gang",
            entrypoint=Entrypoint.from_callable(tpu_host, [gate]),
            resources=ResourceConfig.with_tpu("v4-16", slice_count=2, cpu=1, ram="1g"),
        )
    )
    command = client.submit(
        JobRequest(
            name="cmd",
            entrypoint=Entrypoint.from_command(
                sys.executable,
                "-c",
                f"import os, time\nwhile not os.path.exists({gate!r}): time.sleep(0.02)",
            ),
        )
    )
    actor = client.create_actor(Echo, name="echo")
    assert actor.f.remote(1).result(timeout=DEADLINE_S) == 1
    lines = iter(tpu.logs(follow=True))
    coordinators = {next(lines) for _ in range(4)}  # 2 slices x 2 VMs: "[i] coordinator A"
    assert len({line.split()[-1] for line in coordinators}) == 1
    (address,) = {line.split()[-1] for line in coordinators}
    assert address.startswith("127.0.0.1:")
    during = listeners(family_pids())
    Path(gate).touch()
    assert tpu.result(timeout=DEADLINE_S) == ["0", "1", "0", "1"]
    assert command.wait(timeout=DEADLINE_S) is JobStatus.SUCCEEDED
    new = during - before
    exposed = [(pid, ip, port) for pid, ip, port in new if not ipaddress.ip_address(ip).is_loopback]
    assert exposed == []


def read_secrets() -> dict[str, Any]:
    """What a job sees of its secrets: the folder's mode, each file's mode and value, and
    which forwarded credentials its environment holds."""
    folder = Path(os.environ["RIGGING_SECRETS_DIR"])
    files = {p.name: (mode(p), p.read_text()) for p in sorted(folder.iterdir())}
    return {
        "folder": str(folder),
        "mode": mode(folder),
        "files": files,
        "env": {n: os.environ.get(n) for n in ("HF_TOKEN", "WANDB_API_KEY")},
    }


def secrets_job(**environment: Any) -> JobRequest:
    return JobRequest(
        name="secrets",
        entrypoint=Entrypoint.from_callable(read_secrets),
        environment=EnvironmentConfig(**environment),
    )


@pytest.mark.integration
@pytest.mark.usefixtures("open_umask")
@pytest.mark.parametrize("behavior", ["inherit", "isolate"])
def test_explicit_secrets_reach_a_job_as_private_files_removed_with_it(
    client: LocalClient, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, behavior: str
) -> None:
    bundle = tmp_path / "bundle"  # the driver's own mounted secrets
    bundle.mkdir()
    (bundle / "GCS_KEY").write_text("from-the-bundle\n")
    monkeypatch.setenv("RIGGING_SECRETS_DIR", str(bundle))
    monkeypatch.setenv("HF_TOKEN", "hf-of-the-driver")
    job = client.submit(secrets_job(secrets={"API_TOKEN": SECRET}, secret_behavior=behavior))
    seen = job.result(timeout=DEADLINE_S)
    assert seen["mode"] == 0o700
    assert seen["files"]["API_TOKEN"] == (0o600, SECRET)
    if behavior == "inherit":  # the driver's bundle, then its forwarded keys, come too
        assert seen["files"]["GCS_KEY"] == (0o600, "from-the-bundle")
        assert seen["files"]["HF_TOKEN"] == (0o600, "hf-of-the-driver")
        assert seen["env"]["HF_TOKEN"] == "hf-of-the-driver"
    else:  # only the explicit map: not a file, not a variable of the driver's
        assert set(seen["files"]) == {"API_TOKEN"}
        assert seen["env"]["HF_TOKEN"] is None
    assert not Path(seen["folder"]).exists()  # removed with the job
    for text in (repr(job.info()), repr(job), "\n".join(job.logs())):
        assert SECRET not in text
    assert SECRET not in repr(secrets_job(secrets={"API_TOKEN": SECRET}))


def test_isolate_without_secrets_still_withholds_the_drivers_credentials(
    client: LocalClient, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("RIGGING_SECRETS_DIR", str(tmp_path))
    monkeypatch.setenv("HF_TOKEN", "hf-of-the-driver")
    seen = client.submit(secrets_job(secret_behavior="isolate")).result(timeout=DEADLINE_S)
    assert seen["files"] == {} and seen["env"]["HF_TOKEN"] is None


def test_inherit_without_secrets_runs_the_job_as_usual(client: LocalClient) -> None:
    request = secrets_job(secret_behavior="inherit")
    job = client.submit(
        JobRequest(
            name="plain",
            entrypoint=Entrypoint.from_callable(os.getpid),
            environment=request.environment,
        )
    )
    assert job.result(timeout=DEADLINE_S) == os.getpid()  # a thread of the driver


def test_setup_scripts_are_a_no_op_here_said_once_per_client(
    client: LocalClient, caplog: pytest.LogCaptureFixture
) -> None:
    scripts = EnvironmentConfig(setup_scripts=["uv sync"], sync_packages=["pkg"])
    for _ in range(2):
        request = JobRequest(
            name="setup", entrypoint=Entrypoint.from_callable(os.getpid), environment=scripts
        )
        assert client.submit(request).result(timeout=DEADLINE_S) == os.getpid()
    said = [r.getMessage() for r in caplog.records if "ignores EnvironmentConfig" in r.getMessage()]
    assert len(said) == 2  # one per field, once for this client
    assert any("setup_scripts" in text for text in said)
