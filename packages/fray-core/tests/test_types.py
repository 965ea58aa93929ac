"""Validation of every public type: good values build, bad ones name field, value and rule."""

from __future__ import annotations

import enum
import pickle
from pathlib import Path

import pytest

from fray import (
    ActorConfig,
    CpuConfig,
    Entrypoint,
    EnvironmentConfig,
    GpuConfig,
    InvalidRequestError,
    JobInfo,
    JobRequest,
    JobStatus,
    ResourceConfig,
    TpuConfig,
)
from fray._types import create_environment, parse_memory


def noop() -> None:
    return None


def request(**kw: object) -> JobRequest:
    kw.setdefault("name", "job")
    kw.setdefault("entrypoint", Entrypoint.from_callable(noop))
    return JobRequest(**kw)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("16g", 16 * 2**30),
        ("16gb", 16 * 2**30),
        ("16GB", 16 * 2**30),
        ("512Mi", 512 * 2**20),
        ("512m", 512 * 2**20),
        ("1.5GB", int(1.5 * 2**30)),
        ("1.5g", int(1.5 * 2**30)),
        ("2Ti", 2 * 2**40),
        ("100", 100),
        ("4k", 4096),
        (1024, 1024),
        ("  8G ", 8 * 2**30),
    ],
)
def test_memory_strings_parse(text: str | int, expected: int) -> None:
    assert parse_memory(text) == expected
    assert ResourceConfig(ram=text).ram_bytes == expected


@pytest.mark.parametrize("bad", ["16 potatoes", "", "g", "-1g", "1.2.3g", "16xb", "i", True, 1.5])
def test_bad_memory_names_field_and_units(bad: object) -> None:
    with pytest.raises(InvalidRequestError) as info:
        ResourceConfig(ram=bad)  # type: ignore[arg-type]
    err = info.value
    assert err.field == "ResourceConfig.ram"
    assert repr(bad) in str(err)
    assert "512Mi" in str(err)


def test_negative_counts_fail() -> None:
    for kwargs, field in [
        ({"cpu": -1}, "ResourceConfig.cpu"),
        ({"replicas": 0}, "ResourceConfig.replicas"),
        ({"replicas": -3}, "ResourceConfig.replicas"),
    ]:
        with pytest.raises(InvalidRequestError) as info:
            ResourceConfig(**kwargs)  # type: ignore[arg-type]
        assert info.value.field == field
        assert "greater than or equal" in str(info.value)
    with pytest.raises(InvalidRequestError, match=r"JobRequest.max_retries_failure: -1"):
        request(max_retries_failure=-1)
    with pytest.raises(InvalidRequestError, match=r"JobRequest.max_retries_preemption"):
        request(max_retries_preemption=-2)
    with pytest.raises(InvalidRequestError, match=r"JobRequest.replicas: 0"):
        request(replicas=0)
    with pytest.raises(InvalidRequestError, match=r"GpuConfig.count: 0"):
        GpuConfig(variant="H100", count=0)
    with pytest.raises(InvalidRequestError, match=r"ActorConfig.max_concurrency: 0"):
        ActorConfig(max_concurrency=0)
    with pytest.raises(InvalidRequestError, match=r"ActorConfig.max_restarts: -2"):
        ActorConfig(max_restarts=-2)


@pytest.mark.parametrize("name", ["has space", "", "x" * 257, "tab\there", "new\nline", "\x00"])
def test_bad_job_names(name: str) -> None:
    with pytest.raises(InvalidRequestError) as info:
        request(name=name)
    assert info.value.field == "JobRequest.name"
    assert "without spaces" in str(info.value)


@pytest.mark.parametrize(
    "name",
    [
        "train",
        "rollout-3",
        "a.b_c-d",
        "X" * 256,
        "0start",
        "-leading",
        "ü",
        # Names Marin's executor makes: steps and output paths.
        "tokenize:documents/fineweb-resiliparse",
        "gs://bucket/path/to/output-3f2a",
        "50%-sample",
    ],
)
def test_good_job_names(name: str) -> None:
    assert request(name=name).name == name


def test_unknown_field_is_named() -> None:
    with pytest.raises(InvalidRequestError) as info:
        ResourceConfig(gpus=2)  # type: ignore[call-arg]
    assert info.value.field == "ResourceConfig.gpus"
    assert "unknown field" in str(info.value)


def test_missing_field_is_named() -> None:
    with pytest.raises(InvalidRequestError, match=r"JobRequest.entrypoint: this field is required"):
        JobRequest(name="x")  # type: ignore[call-arg]


def test_models_are_frozen_but_requests_resources_and_actor_configs() -> None:
    # The predecessor's ResourceConfig, JobRequest and ActorConfig were mutable dataclasses
    # (Marin assigns fields before submitting): ours may be changed too, validated each time.
    res = ResourceConfig()
    res.cpu = 4
    assert res.cpu == 4
    with pytest.raises(InvalidRequestError, match=r"ResourceConfig.cpu: -1"):
        res.cpu = -1
    req = request()
    req.max_retries_failure = 3
    assert req.max_retries_failure == 3
    with pytest.raises(InvalidRequestError, match=r"JobRequest.name"):
        req.name = "has space"
    actor = ActorConfig()
    actor.max_concurrency = 4
    assert actor.max_concurrency == 4
    with pytest.raises(InvalidRequestError, match="frozen"):
        GpuConfig(variant="H100").count = 2  # type: ignore[misc]
    with pytest.raises(InvalidRequestError, match="frozen"):
        EnvironmentConfig().workspace = "/tmp"  # type: ignore[misc]


def test_resource_defaults_and_cpu_fraction() -> None:
    res = ResourceConfig(cpu=0.5)
    assert res.cpu == 0.5
    assert isinstance(res.device, CpuConfig)
    assert res.preemptible is True
    assert res.chip_count() == 0
    assert res.slice_count == 1
    with pytest.raises(InvalidRequestError, match="finite"):
        ResourceConfig(cpu=float("inf"))


def test_with_tpu_multislice() -> None:
    res = ResourceConfig.with_tpu("v4-16", slice_count=3)
    assert isinstance(res.device, TpuConfig)
    assert res.device.variant == "v4-16"
    assert res.replicas == 6  # 2 VMs per slice
    assert res.slice_count == 3
    assert res.chip_count() == 24
    # Half of a v4 host VM (240 cores, 400 GB), as the predecessor's 0.2.227 line sizes it.
    assert res.cpu == 120 and res.ram == "200g" and res.disk == "50g"
    assert request(resources=res).replicas == 6
    v5p = ResourceConfig.with_tpu("v5p-8")
    assert (v5p.cpu, v5p.ram) == (104, "224g")


def test_with_tpu_alias_and_alternatives() -> None:
    res = ResourceConfig.with_tpu(["v5e-16", "v5litepod-16"], slice_count=1, cpu=8)
    assert res.device.variant == "v5litepod-16"  # type: ignore[union-attr]
    assert res.device_alternatives == ("v5litepod-16",)
    assert res.cpu == 8
    with pytest.raises(InvalidRequestError, match="same shape"):
        ResourceConfig.with_tpu(["v4-16", "v4-8"])
    with pytest.raises(InvalidRequestError, match="at least one TPU type"):
        ResourceConfig.with_tpu([])
    with pytest.raises(InvalidRequestError, match="slice_count"):
        ResourceConfig.with_tpu("v4-8", slice_count=0)


def test_unknown_tpu_suggests_closest() -> None:
    with pytest.raises(InvalidRequestError) as info:
        ResourceConfig.with_tpu("v5litepod-12")
    assert info.value.field == "ResourceConfig.with_tpu.tpu_type" or "TpuConfig.variant" in str(
        info.value
    )
    assert "Did you mean" in str(info.value)
    assert "v5litepod-16" in str(info.value)


def test_tpu_replicas_must_match_vms() -> None:
    with pytest.raises(InvalidRequestError, match="multiple of the 2 VMs"):
        ResourceConfig(device=TpuConfig(variant="v4-16"), replicas=3)
    res = ResourceConfig.with_tpu("v4-16")
    with pytest.raises(InvalidRequestError, match="multiple of the 2 VMs"):
        request(resources=res, replicas=3)


def test_gpu_config() -> None:
    res = ResourceConfig.with_gpu("h100", count=8)
    assert res.device == GpuConfig(variant="H100", count=8)
    assert res.chip_count() == 8
    assert ResourceConfig.with_gpu().device.variant == "auto"  # type: ignore[union-attr]
    with pytest.raises(InvalidRequestError) as info:
        GpuConfig(variant="H1000")
    assert "Did you mean" in str(info.value) and "H100" in str(info.value)


def test_device_alternatives_only_for_accelerators() -> None:
    with pytest.raises(InvalidRequestError, match="only applies to GPU or TPU"):
        ResourceConfig(device_alternatives=("H100",))
    assert ResourceConfig.with_gpu("H100", device_alternatives=["A100-80G"]).device_alternatives


def test_regions_validation() -> None:
    assert ResourceConfig(regions=["us-central2"]).regions == ("us-central2",)
    with pytest.raises(InvalidRequestError, match="not a single string"):
        ResourceConfig(regions="us-central2")  # type: ignore[arg-type]
    with pytest.raises(InvalidRequestError, match="at least one"):
        ResourceConfig(regions=[])


def test_device_default_env() -> None:
    assert CpuConfig().default_env_vars() == {"JAX_PLATFORMS": "cpu"}
    assert GpuConfig(variant="H100").default_env_vars() == {"JAX_PLATFORMS": ""}
    v6e = TpuConfig(variant="v6e-8").default_env_vars()
    assert v6e["LIBTPU_INIT_ARGS"] == "--xla_tpu_scoped_vmem_limit_kib=98304"
    assert "LIBTPU_INIT_ARGS" not in TpuConfig(variant="v4-8").default_env_vars()
    req = request(
        resources=ResourceConfig.with_tpu("v5p-8"),
        environment=EnvironmentConfig(env_vars={"LIBTPU_INIT_ARGS": "mine"}),
    )
    assert req.env_vars["LIBTPU_INIT_ARGS"] == "mine"  # user values win


def test_environment_validation_and_redaction() -> None:
    env = create_environment(
        env_vars={"HF_TOKEN": "hf_abc", "WANDB_API_KEY": "k", "A": "1", "DROP": None}
    )
    assert {"HF_TOKEN": "hf_abc", "WANDB_API_KEY": "k", "A": "1"}.items() <= env.env_vars.items()
    assert "DROP" not in env.env_vars
    text = repr(env)
    assert "hf_abc" not in text and "'***'" in text and "'A': '1'" in text
    assert "hf_abc" not in str(request(environment=env))
    with pytest.raises(InvalidRequestError, match="must have a string value"):
        EnvironmentConfig(env_vars={"N": 3})  # type: ignore[dict-item]
    with pytest.raises(InvalidRequestError, match="env var name"):
        EnvironmentConfig(env_vars={"1BAD": "x"})
    with pytest.raises(InvalidRequestError, match="at most one of workspace and docker_image"):
        EnvironmentConfig(workspace=".", docker_image="img")
    with pytest.raises(InvalidRequestError, match="not a single string"):
        EnvironmentConfig(pip_packages="numpy")  # type: ignore[arg-type]
    assert EnvironmentConfig.create(pip_packages=["numpy"]).pip_packages == ("numpy",)


def test_entrypoints() -> None:
    ep = Entrypoint.from_callable(noop, args=[1], kwargs={"a": 2})
    assert ep.is_callable and ep.args == (1,) and ep.kwargs == {"a": 2}
    assert Entrypoint.from_command("echo", "hi").command == ("echo", "hi")
    assert Entrypoint.from_command(["echo", "hi"]).command == ("echo", "hi")
    assert Entrypoint.from_binary("echo", ["a", "b"]).command == ("echo", "a", "b")
    assert Entrypoint.from_shell("echo hi | wc -l").command == ("bash", "-c", "echo hi | wc -l")
    with pytest.raises(InvalidRequestError, match="from_shell"):
        Entrypoint.from_command("echo hi")
    with pytest.raises(InvalidRequestError, match="must be a callable"):
        Entrypoint.from_callable(42)  # type: ignore[arg-type]
    with pytest.raises(InvalidRequestError, match="exactly one of callable and command"):
        Entrypoint()
    with pytest.raises(InvalidRequestError, match="at least a program"):
        Entrypoint(command=())
    with pytest.raises(InvalidRequestError, match="every argument must be a string"):
        Entrypoint.from_command("echo", 3)  # type: ignore[arg-type]


def test_request_replicas_default_from_resources() -> None:
    assert request().replicas == 1
    assert request(resources=ResourceConfig(replicas=4)).replicas == 4
    assert request(resources=ResourceConfig(replicas=4), replicas=2).replicas == 2
    with pytest.raises(InvalidRequestError, match="JobRequest.isolation"):
        request(isolation="container")


def test_job_status() -> None:
    assert JobStatus.finished(JobStatus.SUCCEEDED)
    assert JobStatus.STOPPED.is_finished
    assert not JobStatus.RUNNING.is_finished
    assert JobStatus("pending") is JobStatus.PENDING
    assert str(JobStatus.FAILED) == "failed"


def test_job_info_and_pickling() -> None:
    info = JobInfo(job_id="a/b", name="b", status=JobStatus.RUNNING, parent="a")
    assert pickle.loads(pickle.dumps(info)) == info
    res = ResourceConfig.with_tpu("v4-16", slice_count=2)
    assert pickle.loads(pickle.dumps(res)) == res


def test_model_copy_revalidates() -> None:
    res = ResourceConfig()
    assert res.model_copy(update={"cpu": 4}).cpu == 4
    with pytest.raises(InvalidRequestError, match="ResourceConfig.cpu"):
        res.model_copy(update={"cpu": -4})


def test_create_environment_has_the_predecessors_defaults(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MARIN_CI_DISABLE_RUNTIME_ENVS", raising=False)
    env = create_environment()
    assert env.workspace == str(tmp_path)
    assert env.env_vars == {"HF_DATASETS_TRUST_REMOTE_CODE": "1", "TOKENIZERS_PARALLELISM": "false"}
    assert env.setup_scripts is None and env.secrets == {} and env.secret_behavior == "inherit"
    monkeypatch.setenv("MARIN_CI_DISABLE_RUNTIME_ENVS", "1")
    env = create_environment(docker_image="img:1", env_vars={"TOKENIZERS_PARALLELISM": None})
    assert env.workspace is None and env.docker_image == "img:1"
    assert env.env_vars == {
        "HF_DATASETS_TRUST_REMOTE_CODE": "1",
        "MARIN_CI_DISABLE_RUNTIME_ENVS": "1",
    }
    assert create_environment(setup_scripts=[]).setup_scripts == []


class SecretBehavior(enum.StrEnum):
    """Like ``rigging.secrets.SecretBehavior`` (Fray does not depend on marin-rigging)."""

    INHERIT = "inherit"
    ISOLATE = "isolate"


def test_secrets_setup_scripts_and_sync_packages_as_the_predecessor_takes_them() -> None:
    env = create_environment(
        setup_scripts=["uv sync"],
        sync_packages=["marin-core"],
        secrets={"HF_TOKEN": "hf_s3cr3t", "my.key-1": "other"},
        secret_behavior=SecretBehavior.ISOLATE,
    )
    assert env.secret_behavior == SecretBehavior.ISOLATE == "isolate"
    assert env.setup_scripts == ["uv sync"] and env.sync_packages == ["marin-core"]
    assert env.secrets == {"HF_TOKEN": "hf_s3cr3t", "my.key-1": "other"}
    shown = f"{env!r} {env} {request(environment=env)!r}"
    assert "hf_s3cr3t" not in shown and "other" not in shown and "'HF_TOKEN': '***'" in shown
    by_position = EnvironmentConfig(None, None, [], {}, {"K": "v"}, "isolate", ["x"], [], ["p"])
    assert by_position.secrets == {"K": "v"} and by_position.extras == ["x"]
    for bad in ({"../up": "v"}, {"K": 3}, ["K", "hunter2"], "K=hunter2"):
        with pytest.raises(InvalidRequestError) as info:
            EnvironmentConfig(secrets=bad)  # type: ignore[arg-type]
        assert info.value.field == "EnvironmentConfig.secrets"
        assert "hunter2" not in str(info.value)
    with pytest.raises(InvalidRequestError, match="EnvironmentConfig.secret_behavior"):
        create_environment(secret_behavior="forward")


def test_the_predecessors_call_shapes() -> None:
    assert Entrypoint.from_callable(c=noop) == Entrypoint.from_callable(fn=noop)
    assert Entrypoint.from_callable(noop, [1]).args == [1]
    with pytest.raises(InvalidRequestError, match="give the callable once"):
        Entrypoint.from_callable(noop, fn=noop)
    assert ResourceConfig().disk == "64g"
    a100 = ResourceConfig.with_gpu("A100", count=8)
    assert isinstance(a100.device, GpuConfig) and a100.device.variant == "A100"
    assert a100.device.device_flops() == GpuConfig("A100-80G").device_flops()
    assert GpuConfig("a100").variant == "A100"
