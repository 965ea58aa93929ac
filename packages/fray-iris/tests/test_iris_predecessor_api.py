"""The predecessor's ``fray.iris_backend`` helpers, against the installed marin-iris types
(no cluster: they are conversions). Runs on both lines; the pieces only 0.2.227 has are
checked there, and their errors on 0.2.20."""

from __future__ import annotations

import pytest
from iris.cluster.constraints import (
    Constraint,
    ConstraintOp,
    device_variant_constraint,
    preemptible_constraint,
    region_constraint,
    zone_constraint,
)
from iris.cluster.types import Entrypoint as IrisEntrypoint
from iris.cluster.types import EnvironmentSpec, ResourceSpec, gpu_device, tpu_device
from iris.rpc import job_pb2

import fray.iris_backend as ib
import fray_iris
from fray import (
    ANY_REGION,
    CpuConfig,
    Entrypoint,
    EnvironmentConfig,
    GpuConfig,
    JobRequest,
    JobStatus,
    ResourceConfig,
    TpuConfig,
)
from fray.errors import BackendUnavailableError, InvalidRequestError
from fray_iris._convert import line, to_iris_request

NEW_IRIS = line.FAILURE_BUDGET  # 0.2.227 (Python 3.12+); False on 0.2.20
only_new = pytest.mark.skipif(not NEW_IRIS, reason="needs marin-iris 0.2.227")
only_old = pytest.mark.skipif(NEW_IRIS, reason="checks marin-iris 0.2.20's refusal")


def test_fray_iris_backend_serves_these_helpers() -> None:
    for name in set(fray_iris.__all__) & set(ib.__all__):
        assert getattr(ib, name) is getattr(fray_iris, name)
    assert ib.NSYS_TASKS_ENV == "IRIS_NSYS_TASKS"


# --- convert_resources ----------------------------------------------------------------------


def test_resources_are_the_bytes_the_predecessor_sent_as_strings() -> None:
    resources = ResourceConfig(cpu=2, ram="16g", disk="100g")
    ours = ib.convert_resources(resources).to_proto()
    theirs = ResourceSpec(cpu=2, memory="16g", disk="100g").to_proto()
    assert (ours.cpu_millicores, ours.memory_bytes, ours.disk_bytes) == (
        theirs.cpu_millicores,
        theirs.memory_bytes,
        theirs.disk_bytes,
    )
    assert not ours.HasField("device")


def test_tpu_and_gpu_devices() -> None:
    tpu = ib.convert_resources(ResourceConfig.with_tpu("v5p-16"))
    assert isinstance(tpu, ResourceSpec)
    assert tpu.device == tpu_device("v5p-16")  # the chips per VM, as Iris infers them
    gpu = ib.convert_resources(ResourceConfig.with_gpu("H100", 8))
    assert gpu.device == gpu_device("H100", 8)


# --- convert_constraints --------------------------------------------------------------------


def test_constraints_for_placement_fields() -> None:
    resources = ResourceConfig.with_gpu(
        "H100",
        preemptible=False,
        regions=["us-east5"],
        zone="us-east5-a",
        device_alternatives=["A100-80G"],
    )
    assert ib.convert_constraints(resources) == [
        preemptible_constraint(False),
        region_constraint(["us-east5"]),
        zone_constraint("us-east5-a"),
        device_variant_constraint(["H100", "A100-80G"]),
    ]
    assert ib.convert_constraints(ResourceConfig()) == []


@only_new
def test_any_region_and_target_cluster_on_0_2_227() -> None:
    from iris.cluster.constraints import CLUSTER_CONSTRAINT_KEY, any_region_constraint

    resources = ResourceConfig(regions=[ANY_REGION], target_cluster="cw-east")
    assert ib.convert_constraints(resources) == [
        any_region_constraint(),
        Constraint.create(key=CLUSTER_CONSTRAINT_KEY, op=ConstraintOp.EQ, value="cw-east"),
    ]
    # Fray's own submissions place the same way.
    request = to_iris_request(_job(resources))
    assert request["constraints"] == ib.convert_constraints(resources)


@only_old
def test_any_region_and_target_cluster_are_refused_on_0_2_20() -> None:
    with pytest.raises(InvalidRequestError, match=r"ResourceConfig\.regions.*0\.2\.227"):
        ib.convert_constraints(ResourceConfig(regions=[ANY_REGION]))
    with pytest.raises(InvalidRequestError, match=r"target_cluster.*0\.2\.227"):
        to_iris_request(_job(ResourceConfig(target_cluster="cw-east")))


# --- convert_container_profile --------------------------------------------------------------


def test_no_container_profile_is_unspecified() -> None:
    assert ib.convert_container_profile(ResourceConfig()) == 0


@only_new
def test_container_profile_by_enum_name_on_0_2_227() -> None:
    gvisor = ResourceConfig(container_profile="CONTAINER_PROFILE_GVISOR")
    profile = ib.convert_container_profile(gvisor)
    assert profile == job_pb2.ContainerProfile.Value("CONTAINER_PROFILE_GVISOR")
    with pytest.raises(InvalidRequestError, match="CONTAINER_PROFILE_SANDBOX") as err:
        ib.convert_container_profile(ResourceConfig(container_profile="gvisor"))
    assert err.value.field == "ResourceConfig.container_profile"


@only_old
def test_container_profiles_are_refused_on_0_2_20() -> None:
    with pytest.raises(InvalidRequestError, match=r"container_profile.*0\.2\.227"):
        ib.convert_container_profile(ResourceConfig(container_profile="CONTAINER_PROFILE_GVISOR"))


# --- convert_entrypoint ---------------------------------------------------------------------


def _add(a: int, b: int = 0) -> int:
    return a + b


def test_callable_entrypoint_runs_the_callable_itself() -> None:
    converted = ib.convert_entrypoint(Entrypoint.from_callable(_add, [1], {"b": 2}))
    assert isinstance(converted, IrisEntrypoint)
    fn, args, kwargs = converted.resolve()
    assert fn(*args, **kwargs) == 3


def test_command_entrypoint_and_the_predecessor_shape() -> None:
    assert ib.convert_entrypoint(Entrypoint.from_command("echo", "hi")).command == ["echo", "hi"]
    binary = Entrypoint.from_binary("python", ["-c", "pass"])
    assert ib.convert_entrypoint(binary).command == ["python", "-c", "pass"]


# --- convert_environment --------------------------------------------------------------------


def test_no_environment_and_no_device_is_none() -> None:
    assert ib.convert_environment(None) is None
    cpu = ib.convert_environment(None, CpuConfig())  # the CPU device's own defaults
    assert cpu is not None and cpu.env_vars == CpuConfig().default_env_vars()


def test_environment_env_vars_override_device_defaults() -> None:
    device = TpuConfig(variant="v5p-8")
    default_key = next(iter(device.default_env_vars()))
    env = EnvironmentConfig(
        env_vars={default_key: "mine", "A": "1"}, pip_packages=["numpy"], extras=["tpu"]
    )
    spec = ib.convert_environment(env, device)
    assert isinstance(spec, EnvironmentSpec)
    assert spec.env_vars == {**device.default_env_vars(), default_key: "mine", "A": "1"}
    assert list(spec.pip_packages or ()) == ["numpy"]
    assert list(spec.extras or ()) == ["tpu"]
    device_only = ib.convert_environment(None, device)
    assert device_only is not None and device_only.env_vars == device.default_env_vars()


# --- map_iris_job_state ---------------------------------------------------------------------

_EXPECTED = {
    "JOB_STATE_UNSPECIFIED": JobStatus.PENDING,
    "JOB_STATE_PENDING": JobStatus.PENDING,
    "JOB_STATE_BUILDING": JobStatus.PENDING,
    "JOB_STATE_RUNNING": JobStatus.RUNNING,
    "JOB_STATE_SUCCEEDED": JobStatus.SUCCEEDED,
    "JOB_STATE_FAILED": JobStatus.FAILED,
    "JOB_STATE_KILLED": JobStatus.STOPPED,
    "JOB_STATE_WORKER_FAILED": JobStatus.FAILED,
    "JOB_STATE_UNSCHEDULABLE": JobStatus.FAILED,
}


def test_job_states_as_proto_numbers_and_names() -> None:
    for name, number in job_pb2.JobState.items():
        assert ib.map_iris_job_state(number) is _EXPECTED[name], name
        lowered = name.removeprefix("JOB_STATE_").lower()
        assert ib.map_iris_job_state(lowered) is _EXPECTED[name], lowered
    assert ib.map_iris_job_state("no-such-state") is JobStatus.PENDING


@only_new
def test_job_states_as_0_2_227_enum() -> None:
    from iris.resources.state import JobState

    for state in JobState:
        assert ib.map_iris_job_state(state) is _EXPECTED[f"JOB_STATE_{state.name}"], state


# --- resolve_coscheduling -------------------------------------------------------------------


@pytest.mark.parametrize("shape", ["resources", "device"])
def test_coscheduling_takes_resources_or_a_device(shape: str) -> None:
    def given(resources: ResourceConfig) -> object:
        return resources if shape == "resources" else resources.device

    tpu = ResourceConfig.with_tpu("v5p-16")
    assert ib.resolve_coscheduling(given(tpu), 1) is None  # type: ignore[arg-type]
    group = ib.resolve_coscheduling(given(tpu), 2)  # type: ignore[arg-type]
    assert group is not None and group.group_by == "tpu-name"
    single_vm = ResourceConfig.with_tpu("v5p-8")
    assert ib.resolve_coscheduling(given(single_vm), 4) is None  # type: ignore[arg-type]
    assert ib.resolve_coscheduling(given(ResourceConfig()), 4) is None  # type: ignore[arg-type]
    gpu = ib.resolve_coscheduling(given(ResourceConfig.with_gpu("H100", 8)), 2)  # type: ignore[arg-type]
    assert gpu is not None and gpu.group_by == "leafgroup"


def test_coscheduling_refuses_other_types() -> None:
    with pytest.raises(InvalidRequestError, match="a ResourceConfig, or a CpuConfig"):
        ib.resolve_coscheduling("v5p-16", 2)  # type: ignore[arg-type]


@only_new
def test_gpu_gangs_follow_iris_topology_levels_on_0_2_227() -> None:
    rack = ib.resolve_coscheduling(GpuConfig(variant="GB200", count=4), 2)
    assert rack is not None and rack.group_by == "nvlink.domain"
    mixed = ResourceConfig.with_gpu("GB200", 4, device_alternatives=["H100"])
    with pytest.raises(InvalidRequestError, match="GB200=nvlink.domain, H100=leafgroup") as err:
        ib.resolve_coscheduling(mixed, 2)
    assert err.value.field == "ResourceConfig.device_alternatives"


# --- wrap_nsys ------------------------------------------------------------------------------


def test_nsys_unset_leaves_the_entrypoint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ib.NSYS_TASKS_ENV, raising=False)
    entry = IrisEntrypoint.from_command("python", "train.py")
    assert ib.wrap_nsys(entry) is entry


def test_nsys_task_spec_is_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ib.NSYS_TASKS_ENV, "first; rm -rf /")
    with pytest.raises(InvalidRequestError, match="IRIS_NSYS_TASKS"):
        ib.wrap_nsys(IrisEntrypoint.from_command("python"))


@only_new
def test_nsys_wraps_commands_and_callables_on_0_2_227(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ib.NSYS_TASKS_ENV, "0,3")
    command = ib.wrap_nsys(IrisEntrypoint.from_command("python", "train.py"))
    hook = ["$IRIS_PYTHON", "-m", "iris.hooks.nsys_main", "--tasks", "0,3", "--"]
    assert command.command == [*hook, "python", "train.py"]
    callable_entry = IrisEntrypoint.from_callable(_add, 1)
    wrapped = ib.wrap_nsys(callable_entry)
    inner = callable_entry.command[2].removeprefix("exec ")
    assert wrapped.command == ["bash", "-c", f"exec {' '.join(hook)} {inner}"]
    assert wrapped.workdir_files == callable_entry.workdir_files


@only_old
def test_nsys_is_refused_on_0_2_20(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ib.NSYS_TASKS_ENV, "all")
    with pytest.raises(BackendUnavailableError, match=r"iris\.hooks\.nsys_main.*0\.2\.227"):
        ib.wrap_nsys(IrisEntrypoint.from_command("python"))


# --- wrap_multiprocess ----------------------------------------------------------------------


@only_new
def test_multiprocess_supervisor_on_0_2_227() -> None:
    from iris.jax.multigpu import build_multigpu_hook

    entry = IrisEntrypoint.from_callable(_add, 1)
    gpus = ResourceConfig.with_gpu("H100", 8)
    spec = ib.convert_resources(gpus)
    wrapped = ib.wrap_multiprocess(entry, spec, 4)
    assert wrapped.command == build_multigpu_hook(spec, 4).wrap(entry.command)
    assert wrapped.workdir_files == entry.workdir_files
    assert ib.wrap_multiprocess(entry, gpus, 4).command == wrapped.command  # a ResourceConfig
    with pytest.raises(InvalidRequestError, match="processes_per_task.*divide") as err:
        ib.wrap_multiprocess(entry, spec, 3)
    assert err.value.field == "processes_per_task"
    with pytest.raises(InvalidRequestError, match="GPU"):
        ib.wrap_multiprocess(entry, ResourceConfig(), 2)


@only_old
def test_multiprocess_is_refused_on_0_2_20() -> None:
    entry = IrisEntrypoint.from_command("python")
    with pytest.raises(BackendUnavailableError, match=r"iris\.jax\.multigpu.*0\.2\.227"):
        ib.wrap_multiprocess(entry, ResourceConfig.with_gpu("H100", 8), 4)


def _job(resources: ResourceConfig) -> JobRequest:
    return JobRequest(name="conv", entrypoint=Entrypoint.from_command("true"), resources=resources)
