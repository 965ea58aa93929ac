"""Unit tests, no cluster: request conversion, state mapping, ids, the results store, exports."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import pytest

import fray_iris
from fray import Entrypoint, EnvironmentConfig, JobRequest, JobStatus, ResourceConfig
from fray.errors import InvalidRequestError
from fray_iris._convert import job_status, line, to_iris_request, to_resource_spec
from fray_testing.conformance import entrypoints as ep


def request(**fields: object) -> JobRequest:
    return JobRequest(name="conv", entrypoint=Entrypoint.from_callable(ep.add, [1, 2]), **fields)  # type: ignore[arg-type]


def test_exports_are_the_public_names() -> None:
    assert sorted(fray_iris.__all__) == [
        "FrayIrisClient",
        "IrisActorFuture",
        "IrisActorGroup",
        "IrisActorHandle",
        "IrisClient",
        "IrisJobHandle",
        "NSYS_TASKS_ENV",
        "convert_constraints",
        "convert_container_profile",
        "convert_entrypoint",
        "convert_environment",
        "convert_resources",
        "map_iris_job_state",
        "resolve_coscheduling",
        "wrap_multiprocess",
        "wrap_nsys",
    ]
    for name in fray_iris.__all__:
        assert getattr(fray_iris, name) is not None


def test_backend_is_registered_under_the_iris_entry_point() -> None:
    from importlib.metadata import entry_points

    [point] = [e for e in entry_points(group="fray.backends") if e.name == "iris"]
    assert point.load() is fray_iris.IrisClient


def test_cpu_memory_and_disk_convert() -> None:
    spec = to_resource_spec(ResourceConfig(cpu=2.5, ram="512m", disk="2g"))
    proto = spec.to_proto()
    assert proto.cpu_millicores == 2500
    assert proto.memory_bytes == 512 * 2**20
    assert proto.disk_bytes == 2 * 2**30
    assert not proto.device.HasField("tpu") and not proto.device.HasField("gpu")


def test_tpu_device_has_chips_per_vm_and_multi_vm_types_are_coscheduled() -> None:
    converted = to_iris_request(request(resources=ResourceConfig.with_tpu("v5p-16")))
    device = converted["resources"].to_proto().device
    assert (device.tpu.variant, device.tpu.count) == ("v5p-16", 4)
    assert converted["coscheduling"] is not None
    assert converted["coscheduling"].group_by == "tpu-name"
    assert converted["replicas"] == 2


def test_multislice_keeps_one_replica_per_vm_of_every_slice() -> None:
    resources = ResourceConfig.with_tpu("v5litepod-16", slice_count=2)
    converted = to_iris_request(request(resources=resources))
    assert converted["replicas"] == 8
    assert converted["coscheduling"] is not None


def test_single_vm_tpu_with_replicas_is_not_coscheduled() -> None:
    resources = ResourceConfig.with_tpu("v5litepod-4")
    converted = to_iris_request(request(resources=resources, replicas=3))
    assert converted.get("coscheduling") is None
    assert converted["replicas"] == 3


def test_gpu_device_and_alternatives() -> None:
    resources = ResourceConfig.with_gpu("H100", 8, device_alternatives=["A100-80G"])
    converted = to_iris_request(request(resources=resources))
    device = converted["resources"].to_proto().device
    assert (device.gpu.variant, device.gpu.count) == ("H100", 8)
    [constraint] = converted["constraints"]
    assert constraint.key == "device-variant"
    assert converted.get("coscheduling") is None


def test_placement_constraints() -> None:
    resources = ResourceConfig(preemptible=False, regions=["us-central1", "us-east1"], zone="z1")
    keys = [c.key for c in to_iris_request(request(resources=resources))["constraints"]]
    assert keys == ["preemptible", "region", "zone"]
    assert to_iris_request(request())["constraints"] == []


def test_environment_and_retry_budgets() -> None:
    environment = EnvironmentConfig(
        env_vars={"A": "1", "JAX_PLATFORMS": "tpu"}, pip_packages=["numpy"], extras=["x"]
    )
    converted = to_iris_request(
        request(environment=environment, max_retries_failure=2, max_retries_preemption=7)
    )
    env = converted["environment"].to_proto()
    assert env.env_vars["A"] == "1"
    assert env.env_vars["JAX_PLATFORMS"] == "tpu"  # the request beats the device default
    # 0.2.227 turns these into its setup script: compare what Fray asked for
    assert list(converted["environment"].pip_packages or ()) == ["numpy"]
    assert list(converted["environment"].extras or ()) == ["x"]
    assert (converted["max_retries_failure"], converted["max_retries_preemption"]) == (2, 7)


def test_job_wide_failure_budget_keeps_each_replica_its_retries() -> None:
    plain = request(max_retries_failure=2, replicas=3)
    capped = request(max_retries_failure=2, replicas=3, max_task_failures=4)
    if line.FAILURE_BUDGET:  # marin-iris 0.2.227: always passed (Iris's default is 0)
        assert to_iris_request(plain)["max_task_failures"] == 6
        assert to_iris_request(request())["max_task_failures"] == 0
        assert to_iris_request(capped)["max_task_failures"] == 4
    else:  # 0.2.20 has no such argument: a budget asked for is refused, naming the field
        assert "max_task_failures" not in to_iris_request(plain)
        with pytest.raises(InvalidRequestError) as caught:
            to_iris_request(capped)
        assert caught.value.field == "max_task_failures"
        assert "0.2.227" in str(caught.value)


def test_priority_is_an_iris_band_and_timeout_a_duration() -> None:
    kwargs = to_iris_request(request(priority=3, timeout=90))
    assert kwargs["priority_band"] == 3  # PRIORITY_BAND_BATCH on both lines
    assert kwargs["timeout"].to_seconds() == 90
    defaults = to_iris_request(request())
    assert "priority_band" not in defaults and "timeout" not in defaults
    with pytest.raises(InvalidRequestError) as caught:
        to_iris_request(request(priority=42))
    assert caught.value.field == "priority"
    assert "3 (batch)" in str(caught.value)


def test_unreachable_reasons_are_a_few_words() -> None:
    from connectrpc.code import Code
    from connectrpc.errors import ConnectError

    from fray_iris._convert import unreachable_reason

    refused = ConnectError(
        Code.UNAVAILABLE,
        "Request failed: error sending request for url (http://127.0.0.1:1/x): client error "
        "(Connect): tcp connect error: Connection refused (os error 111)",
    )
    dns = ConnectError(Code.UNAVAILABLE, "client error (Connect): dns error: no records found")
    assert unreachable_reason(refused) == "connection refused"
    assert unreachable_reason(dns) == "the host name does not resolve"
    assert unreachable_reason(ConnectError(Code.DEADLINE_EXCEEDED, "x")) == "no answer within 5 s"


def test_docker_image_is_the_task_image_and_workspace_is_refused() -> None:
    converted = to_iris_request(request(environment=EnvironmentConfig(docker_image="img:1")))
    assert converted["task_image"] == "img:1"
    with pytest.raises(InvalidRequestError) as caught:
        to_iris_request(request(environment=EnvironmentConfig(workspace="/tmp")))
    assert caught.value.field == "JobRequest.environment.workspace"


def test_states_map_to_fray_statuses() -> None:
    from iris.rpc import job_pb2

    expected = {
        job_pb2.JOB_STATE_PENDING: JobStatus.PENDING,
        job_pb2.JOB_STATE_BUILDING: JobStatus.PENDING,
        job_pb2.JOB_STATE_RUNNING: JobStatus.RUNNING,
        job_pb2.JOB_STATE_SUCCEEDED: JobStatus.SUCCEEDED,
        job_pb2.JOB_STATE_FAILED: JobStatus.FAILED,
        job_pb2.JOB_STATE_KILLED: JobStatus.STOPPED,
        job_pb2.JOB_STATE_WORKER_FAILED: JobStatus.FAILED,
        job_pb2.JOB_STATE_UNSCHEDULABLE: JobStatus.FAILED,
    }
    for state, status in expected.items():
        assert job_status(state) is status


def test_connect_errors_become_fray_errors() -> None:
    from connectrpc.code import Code
    from connectrpc.errors import ConnectError

    from fray.errors import FrayError, JobAlreadyExistsError, JobNotFoundError
    from fray_iris._convert import translate_errors

    cases = [
        (Code.NOT_FOUND, JobNotFoundError),
        (Code.ALREADY_EXISTS, JobAlreadyExistsError),
        (Code.FAILED_PRECONDITION, InvalidRequestError),
        (Code.UNAVAILABLE, FrayError),
    ]
    for code, expected in cases:
        with pytest.raises(expected) as caught, translate_errors("op", job_id="j"):
            raise ConnectError(code, "boom")
        assert isinstance(caught.value.__cause__, ConnectError)


def test_a_stale_client_gets_irises_text_and_what_to_do() -> None:
    from connectrpc.code import Code
    from connectrpc.errors import ConnectError

    from fray_iris._convert import translate_errors

    text = "marin-iris client is too old: your build is 2026-10-24, this controller runs ..."
    with pytest.raises(InvalidRequestError) as caught, translate_errors("submit j", job_id="j"):
        raise ConnectError(Code.FAILED_PRECONDITION, text)
    message = str(caught.value)
    assert text in message
    assert "install the marin-iris release this controller runs" in message


def test_fray_ids_drop_the_iris_user() -> None:
    from fray_iris._views import fray_job_id

    assert fray_job_id("/root/train") == "train"
    assert fray_job_id("/alice/train/child") == "train/child"


def test_results_store_round_trip_is_private(tmp_path: Path) -> None:
    from fray_iris._task import ResultStore

    store = ResultStore(f"file://{tmp_path}/results")
    path = store.task_path("/root/job/child", 2)
    assert store.read(path) is None
    store.write(path, ("ok", {"v": [1, 2]}))
    assert store.read(path) == ("ok", {"v": [1, 2]})
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(os.path.dirname(path)).st_mode) == 0o700
    store.remove(path)
    assert store.read(path) is None


def test_results_store_through_fsspec(tmp_path: Path) -> None:
    from fray_iris._task import ResultStore

    store = ResultStore("memory://fray-iris-test")
    path = store.task_path("/root/job", 0)
    store.write(path, ("error", ValueError("x"), "tb"))
    kind, exc, _ = store.read(path)
    assert kind == "error" and isinstance(exc, ValueError)
    store.remove(path)
    assert store.read(path) is None


def test_an_iris_context_set_in_scope_is_found_by_current_client() -> None:
    """Code that sets an Iris context itself (as Marin's tests and launchers do) gets an
    IrisClient wrapping that context's client; nothing is asked of the wrapped client."""
    from iris.client.client import IrisContext, iris_ctx_scope

    import fray
    from fray.iris_backend import FrayIrisClient

    stand_in = object()  # never called: wrapping is lazy
    with iris_ctx_scope(IrisContext(job_id=None, client=stand_in)):  # type: ignore[arg-type]
        client = fray.current_client()
        assert isinstance(client, FrayIrisClient)
        assert client.iris is stand_in
        assert fray.current_client() is client  # one client per wrapped Iris client
        explicit = fray.LocalClient()
        with fray.set_current_client(explicit):
            assert fray.current_client() is explicit
        explicit.shutdown()
    assert isinstance(fray.current_client(), fray.LocalClient)


def test_followed_logs_never_repeat_nor_lose_a_line() -> None:
    # Iris returns every line so far on each fetch, in time order: a child's line written
    # before lines already seen comes back in their midst, and a line printed twice in the
    # same millisecond has the same key twice.
    from iris.cluster.types import JobName

    from fray_iris._job import IrisJob

    a, b = (("stdout", 1, "a"), "a"), (("stdout", 3, "b"), "b")
    late = (("stdout", 2, "from kid"), "[job/kid] from kid")
    seen = IrisJob(wire=JobName.from_wire("/root/job"))
    assert seen.merge([a, b], children=True) == ["a", "b"]
    assert seen.merge([a, late, b], children=True) == ["a", "b", "[job/kid] from kid"]
    assert seen.merge([a, late, b, b], children=True) == ["a", "b", "[job/kid] from kid", "b"]
    assert seen.merge([a, late, b, b], children=True) == ["a", "b", "[job/kid] from kid", "b"]
    assert seen.merge([a], children=False) == ["a"]


def test_task_stores_an_error_that_does_not_pickle_as_its_text(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    from fray_iris._task import ResultStore, run_callable
    from fray_iris._views import END_OF_OUTPUT

    monkeypatch.setenv("IRIS_TASK_ID", "/root/unpicklable/0")
    for name in ("FRAY_JOB_ID", "FRAY_TASK_INDEX", "FRAY_NUM_TASKS", "FRAY_IRIS_RESULTS_URL"):
        monkeypatch.setenv(name, "")  # the task sets them; put back after the test
    url = f"file://{tmp_path}"
    with pytest.raises(SystemExit) as exited:  # the traceback printed, then the end marker
        run_callable(ep.raise_unpicklable, ("holds a lock",), {}, url)
    assert exited.value.code == 1 and isinstance(exited.value.__cause__, ep.UnpicklableError)
    out, err = capfd.readouterr()
    assert out.splitlines()[-1] == END_OF_OUTPUT
    *traceback, last = err.splitlines()
    assert traceback[-1].endswith("UnpicklableError: holds a lock")
    assert last == f"{END_OF_OUTPUT} UnpicklableError: holds a lock"
    store = ResultStore(url)
    kind, outcome = store.read(store.task_path("/root/unpicklable", 0))
    assert kind == "error"
    exc = outcome.cause
    assert isinstance(exc, RuntimeError) and str(exc) == "UnpicklableError: holds a lock"
    assert "raise_unpicklable" in outcome.trace


def test_a_program_under_tmp_runs_through_a_shell_and_others_as_they_are() -> None:
    # A local Iris worker rewrites arguments under its mount path (/tmp): a program really
    # there runs through /bin/sh -c "exec ...", whose one argument it leaves alone.
    import tempfile

    from fray_iris._convert import to_iris_entrypoint

    def command(*argv: str) -> list[str]:
        entry = Entrypoint.from_command(*argv)
        return list(to_iris_entrypoint(JobRequest(name="cmd", entrypoint=entry), None).command)

    with tempfile.NamedTemporaryFile(dir="/tmp", suffix=".sh") as program:
        assert command(program.name, "a b") == ["/bin/sh", "-c", f"exec {program.name} 'a b'"]
    assert command("echo", "/tmp/not-a-file-here") == ["echo", "/tmp/not-a-file-here"]


def test_image_and_container_profile_reach_iris_and_processes_per_task_is_refused() -> None:
    assert (
        to_iris_request(request(resources=ResourceConfig(image="img:1")))["task_image"] == "img:1"
    )
    with pytest.raises(InvalidRequestError) as caught:
        to_iris_request(
            request(
                resources=ResourceConfig(image="img:1"),
                environment=EnvironmentConfig(docker_image="img:2"),
            )
        )
    assert caught.value.field == "JobRequest.resources.image"
    with pytest.raises(InvalidRequestError) as caught:
        to_iris_request(request(processes_per_task=2))
    assert caught.value.field == "JobRequest.processes_per_task"
    profiled = request(resources=ResourceConfig(container_profile="CONTAINER_PROFILE_NOPE"))
    with pytest.raises(InvalidRequestError) as caught:  # unknown, or none on 0.2.20
        to_iris_request(profiled)
    assert caught.value.field == "ResourceConfig.container_profile"
    if line.CONTAINER_PROFILES:
        name, number = next((n, v) for n, v in line.CONTAINER_PROFILES.items() if v)
        chosen = request(resources=ResourceConfig(container_profile=name))
        assert to_iris_request(chosen)["container_profile"] == number


def _environment(**fields: Any) -> EnvironmentConfig:
    return EnvironmentConfig(**fields)


@pytest.mark.skipif(not line.FAILURE_BUDGET, reason="marin-iris 0.2.227 delivers secrets")
def test_secrets_and_setup_reach_iris_0_2_227_and_no_repr_shows_a_secret() -> None:
    from rigging.secrets import SecretBehavior

    config = _environment(
        secrets={"HF_TOKEN": "s3cr3t-value"}, secret_behavior="isolate", setup_scripts=[]
    )
    spec: Any = line.environment(None, {"A": "1"}, None, config)
    assert spec.secrets == {"HF_TOKEN": "s3cr3t-value"}
    assert spec.secret_behavior is SecretBehavior.ISOLATE
    assert spec.setup_scripts == []  # none: the image is used as it is
    assert "s3cr3t-value" not in repr(spec)
    default: Any = line.environment(None, {}, None, _environment())
    assert default.setup_scripts is None  # Iris's default uv sync
    assert default.secret_behavior is SecretBehavior.INHERIT
    with pytest.raises(InvalidRequestError) as caught:
        line.environment(None, {}, None, _environment(secret_behavior="share"))
    assert caught.value.field == "EnvironmentConfig.secret_behavior"


@pytest.mark.skipif(line.FAILURE_BUDGET, reason="marin-iris 0.2.20 refuses explicit secrets")
def test_explicit_secrets_are_refused_on_0_2_20_in_one_line_without_the_value() -> None:
    config = _environment(secrets={"HF_TOKEN": "s3cr3t-value"})
    with pytest.raises(InvalidRequestError) as caught:
        line.environment(None, {}, None, config)
    message = str(caught.value)
    assert caught.value.field == "EnvironmentConfig.secrets"
    assert "0.2.227" in message and "\n" not in message
    assert "s3cr3t-value" not in message
    assert line.environment(None, {}, None, _environment()).env_vars == {}
    with pytest.raises(InvalidRequestError) as caught:
        line.environment(None, {}, None, _environment(secret_behavior="isolate"))
    assert caught.value.field == "EnvironmentConfig.secret_behavior"


def test_a_request_too_big_for_every_vm_is_told_in_frays_fields_and_sizes() -> None:
    from fray_iris._convert import explain_unplaceable

    iris_says = (
        "submit big: Iris said FAILED_PRECONDITION: Job /root/big is unschedulable: no matching "
        "scaling group has enough per-VM capacity: small (disk: need 68719476736, available "
        "53687091200); gpu (memory: need 34359738368, available 17179869184); cpus (cpu: need "
        "64000, available 8000) (constraints: [])"
    )
    told = explain_unplaceable(iris_says, ResourceConfig(ram="32g"))
    assert told.startswith("submit big: Iris said FAILED_PRECONDITION: Job /root/big is unsch")
    disk = "disk: 64 GiB requested — ResourceConfig.disk defaults to 64g — its VMs have 50 GiB"
    assert f"small ({disk})" in told
    assert "gpu (ram: 32 GiB requested — ResourceConfig.ram — its VMs have 16 GiB)" in told
    assert "cpus (cpu: 64 cores requested — ResourceConfig.cpu — its VMs have 8 cores)" in told
    assert "68719476736" not in told and told.endswith("(constraints: [])")
    asked = explain_unplaceable(iris_says, ResourceConfig(disk="64g", ram="32g"))
    assert "disk: 64 GiB requested — ResourceConfig.disk — its VMs have 50 GiB" in asked
    other = "Job /root/x is unschedulable: no scaling group provides device tpu:v6e-8"
    assert explain_unplaceable(other, ResourceConfig()) == other
