"""Bad input, fuzzed: every public constructor, helper and spec either gives a valid object or
raises ``InvalidRequestError`` naming the field — never another exception type."""

from __future__ import annotations

import math
import types
from collections.abc import Callable
from typing import Annotated, Any, Union, get_args, get_origin

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fray import (
    ActorConfig,
    CpuConfig,
    Entrypoint,
    EnvironmentConfig,
    GpuConfig,
    InvalidRequestError,
    JobInfo,
    JobRequest,
    LocalClient,
    ResourceConfig,
    TpuConfig,
)
from fray._types import GPU_TYPES, BinaryEntrypoint, create_environment, parse_memory
from fray.backend import client_from_spec, parse_client_spec

FUZZ = settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None
)

# Values of every shape a caller might pass by mistake.
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20),
    st.binary(max_size=8),
)
anything = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.tuples(inner, inner),
        st.dictionaries(st.one_of(st.text(max_size=8), st.integers()), inner, max_size=4),
        st.frozensets(st.integers(), max_size=3),
    ),
    max_leaves=8,
)
names = st.one_of(
    st.sampled_from(["train", "a", "job-1", "x.y_z", "", " ", "a/b", "-lead", "ü", "a" * 129]),
    st.text(max_size=12),
)
memory_text = st.one_of(
    st.from_regex(r"\A\s?[0-9]{0,400}(\.[0-9]{0,3})?\s?[kmgtpKMGTP]?[iI]?[bB]?\s?\Z"),
    st.text(max_size=12),
    st.sampled_from(["16g", "512Mi", "1.5GB", "1e5", "-1g", "9" * 400, "１６g", ".5t", "gb"]),
)
tpu_names = st.one_of(
    st.sampled_from(["v4-8", "v4-16", "v5e-16", "v5litepod-16", "v5p-8", "v6e-4", "v4-7", "tpu"]),
    st.text(max_size=12),
)
gpu_names = st.one_of(st.sampled_from([*GPU_TYPES, "h100", "a100", "K80"]), st.text(max_size=8))
some = st.one_of(anything, memory_text, tpu_names, gpu_names)


def accepts_or_names_field(build: Callable[[], Any]) -> Any:
    """Runs ``build``: it may succeed, or raise InvalidRequestError with a named field."""
    try:
        return build()
    except InvalidRequestError as err:
        assert err.field, f"no field named in {err!r}"
        assert err.field in str(err), f"{err.field!r} not in the message {str(err)!r}"
        assert err.allowed, f"no 'allowed' text in {err!r}"
        return None


def optional_kwargs(**fields: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    """Dicts holding any subset of ``fields``."""
    return st.fixed_dictionaries({}, optional=fields)


# ---------------------------------------------------------------------------------------------
# Memory strings and devices


@FUZZ
@given(value=st.one_of(memory_text, anything))
def test_parse_memory(value: Any) -> None:
    size = accepts_or_names_field(lambda: parse_memory(value, field="ResourceConfig.ram"))
    if size is not None:
        assert isinstance(size, int) and size >= 0


@FUZZ
@given(data=optional_kwargs(kind=some, variant=some))
def test_cpu_config(data: dict[str, Any]) -> None:
    accepts_or_names_field(lambda: CpuConfig(**data))


@FUZZ
@given(data=optional_kwargs(kind=some, variant=some, count=some))
def test_gpu_config(data: dict[str, Any]) -> None:
    config = accepts_or_names_field(lambda: GpuConfig(**data))
    if config is not None:
        assert config.variant in GPU_TYPES and config.count >= 1


@FUZZ
@given(data=optional_kwargs(kind=some, variant=some, topology=some))
def test_tpu_config(data: dict[str, Any]) -> None:
    config = accepts_or_names_field(lambda: TpuConfig(**data))
    if config is not None:
        assert config.vm_count() >= 1 and config.chip_count() >= 1


devices = st.one_of(
    st.builds(CpuConfig),
    st.builds(GpuConfig, variant=st.sampled_from(GPU_TYPES), count=st.integers(1, 8)),
    st.builds(TpuConfig, variant=st.sampled_from(["v4-8", "v4-16", "v5e-16", "v5p-8"])),
    st.fixed_dictionaries({"kind": st.sampled_from(["cpu", "gpu", "tpu", "npu"]), "variant": some}),
    anything,
)
resource_fields = {
    "cpu": some,
    "ram": st.one_of(memory_text, anything),
    "disk": st.one_of(memory_text, anything),
    "device": devices,
    "preemptible": some,
    "regions": some,
    "zone": some,
    "replicas": st.one_of(st.integers(-2, 64), some),
    "device_alternatives": st.one_of(st.lists(st.one_of(tpu_names, gpu_names), max_size=3), some),
}


@FUZZ
@given(data=optional_kwargs(**resource_fields, bogus=some))
def test_resource_config(data: dict[str, Any]) -> None:
    config = accepts_or_names_field(lambda: ResourceConfig(**data))
    if config is not None:
        assert config.ram_bytes >= 0 and config.disk_bytes >= 0
        assert math.isfinite(config.cpu) and config.cpu >= 0
        assert config.replicas >= 1 and config.chip_count() >= 0


@FUZZ
@given(
    tpu_type=st.one_of(tpu_names, st.lists(tpu_names, max_size=3), anything),
    slice_count=st.one_of(st.integers(-1, 4), some),
    extra=optional_kwargs(**resource_fields),
)
def test_with_tpu(tpu_type: Any, slice_count: Any, extra: dict[str, Any]) -> None:
    config = accepts_or_names_field(
        lambda: ResourceConfig.with_tpu(tpu_type, slice_count=slice_count, **extra)
    )
    if config is not None:
        assert isinstance(config.device, TpuConfig)
        assert config.replicas == config.slice_count * config.device.vm_count()


@FUZZ
@given(
    gpu_type=st.one_of(gpu_names, anything),
    count=st.one_of(st.integers(-1, 9), some),
    extra=optional_kwargs(**resource_fields),
)
def test_with_gpu(gpu_type: Any, count: Any, extra: dict[str, Any]) -> None:
    config = accepts_or_names_field(lambda: ResourceConfig.with_gpu(gpu_type, count, **extra))
    if config is not None:
        assert isinstance(config.device, GpuConfig)


@FUZZ
@given(extra=optional_kwargs(**resource_fields))
def test_with_cpu(extra: dict[str, Any]) -> None:
    config = accepts_or_names_field(lambda: ResourceConfig.with_cpu(**extra))
    if config is not None:
        assert isinstance(config.device, CpuConfig)


# ---------------------------------------------------------------------------------------------
# Environments, entrypoints, requests, actors


env_maps = st.one_of(
    st.dictionaries(
        st.one_of(st.from_regex(r"\A[A-Za-z_][A-Za-z0-9_]{0,8}\Z"), st.text(max_size=6)),
        st.one_of(st.none(), st.text(max_size=8), st.integers()),
        max_size=4,
    ),
    anything,
)
environment_fields = {
    "workspace": some,
    "docker_image": some,
    "pip_packages": st.one_of(st.lists(st.text(max_size=8), max_size=3), some),
    "env_vars": env_maps,
    "extras": st.one_of(st.lists(st.text(max_size=8), max_size=3), some),
}


@FUZZ
@given(data=optional_kwargs(**environment_fields))
def test_environment_config(data: dict[str, Any]) -> None:
    env = accepts_or_names_field(lambda: EnvironmentConfig(**data))
    if env is not None:
        assert all(isinstance(v, str) for v in env.env_vars.values())


@FUZZ
@given(data=optional_kwargs(**environment_fields))
def test_create_environment(data: dict[str, Any]) -> None:
    accepts_or_names_field(lambda: create_environment(**data))


@FUZZ
@given(argv=st.one_of(st.lists(st.one_of(st.text(max_size=8), anything), max_size=4), anything))
def test_entrypoint_from_command(argv: Any) -> None:
    accepts_or_names_field(lambda: Entrypoint.from_command(argv))
    if isinstance(argv, list):
        accepts_or_names_field(lambda: Entrypoint.from_command(*argv))  # pyright: ignore[reportUnknownArgumentType]


@FUZZ
@given(script=st.one_of(st.text(max_size=20), anything))
def test_entrypoint_from_shell(script: Any) -> None:
    entry = accepts_or_names_field(lambda: Entrypoint.from_shell(script))
    if entry is not None:
        assert entry.command == ("bash", "-c", script)


@FUZZ
@given(
    fn=st.one_of(st.just(print), st.just(len), anything),
    args=st.one_of(st.lists(anything, max_size=3), anything),
    kwargs=st.one_of(st.dictionaries(st.text(max_size=5), anything, max_size=3), anything),
)
def test_entrypoint_from_callable(fn: Any, args: Any, kwargs: Any) -> None:
    accepts_or_names_field(lambda: Entrypoint.from_callable(fn, args, kwargs))


@FUZZ
@given(data=optional_kwargs(callable=some, args=some, kwargs=some, command=some))
def test_entrypoint_fields(data: dict[str, Any]) -> None:
    accepts_or_names_field(lambda: Entrypoint(**data))


entrypoints = st.one_of(
    st.just(Entrypoint.from_shell("true")),
    st.just(Entrypoint.from_callable(print)),
    anything,
)


@FUZZ
@given(
    name=names,
    entrypoint=entrypoints,
    data=optional_kwargs(
        resources=st.one_of(st.just(ResourceConfig.with_tpu("v4-16")), anything),
        environment=st.one_of(st.just(EnvironmentConfig(env_vars={"A": "b"})), anything),
        replicas=st.one_of(st.integers(-1, 5), some),
        max_retries_failure=st.one_of(st.integers(-1, 5), some),
        max_retries_preemption=st.one_of(st.integers(-1, 5), some),
        isolation=st.one_of(st.sampled_from(["auto", "thread", "process", "fork"]), some),
    ),
)
def test_job_request(name: Any, entrypoint: Any, data: dict[str, Any]) -> None:
    request = accepts_or_names_field(lambda: JobRequest(name=name, entrypoint=entrypoint, **data))
    if request is not None:
        assert request.replica_count >= 1
        assert request.max_retries_failure >= 0 and request.max_retries_preemption >= 0


@FUZZ
@given(
    data=optional_kwargs(
        max_concurrency=st.one_of(st.integers(-2, 64), some),
        max_restarts=st.one_of(st.integers(-2, 5), some),
        max_task_retries=st.one_of(st.integers(-2, 5), some),
    )
)
def test_actor_config(data: dict[str, Any]) -> None:
    config = accepts_or_names_field(lambda: ActorConfig(**data))
    if config is not None:
        assert config.max_concurrency >= 1


@FUZZ
@given(
    job_id=names,
    name=names,
    status=st.one_of(st.sampled_from(["pending", "running", "succeeded", "bogus"]), some),
    data=optional_kwargs(attempts=some, error=some, children=some, submitted_at=some),
)
def test_job_info(job_id: Any, name: Any, status: Any, data: dict[str, Any]) -> None:
    accepts_or_names_field(lambda: JobInfo(job_id=job_id, name=name, status=status, **data))


@FUZZ
@given(data=anything)
def test_model_validate_of_junk(data: Any) -> None:
    for model in (ResourceConfig, JobRequest, EnvironmentConfig, ActorConfig, TpuConfig):
        accepts_or_names_field(lambda model=model: model.model_validate(data))


# ---------------------------------------------------------------------------------------------
# No silent coercion: True is not a number, bytes are not text, a string is not a list, a
# mapping is not its keys, an empty name is not "unset". Over every field of every public type.

MODELS = (CpuConfig, GpuConfig, TpuConfig, ResourceConfig, EnvironmentConfig, Entrypoint)
MODELS += (JobRequest, ActorConfig, JobInfo)
NEEDS: dict[type, dict[str, Any]] = {  # the least each needs, so one field at a time is wrong
    GpuConfig: {"variant": "H100"},
    TpuConfig: {"variant": "v4-8"},
    Entrypoint: {"command": ["true"]},
    JobRequest: {"name": "j", "entrypoint": Entrypoint.from_shell("true")},
    JobInfo: {"job_id": "j", "name": "j", "status": "pending"},
}


def _kinds(annotation: Any) -> set[Any]:
    """``Int | None`` -> ``{int}``: the field's types without ``None`` and metadata."""
    union = get_origin(annotation) in (Union, types.UnionType)
    found = {
        get_args(a)[0] if get_origin(a) is Annotated else a
        for a in (get_args(annotation) if union else (annotation,))
    }
    return found - {type(None)}


def _fields(*kinds: Any) -> list[tuple[type, str]]:
    return [
        (model, name)
        for model in MODELS
        for name, info in model.model_fields.items()
        if _kinds(info.annotation) in [{kind} for kind in kinds]
    ]


NUMBER_FIELDS = _fields(int, float)
TEXT_FIELDS = _fields(str)
LIST_FIELDS = _fields(tuple[str, ...], tuple[Any, ...])
OPTIONAL_NAMES = [
    (m, n) for m, n in TEXT_FIELDS if m is not JobInfo and m.model_fields[n].default is None
]


def refused_naming(model: type, name: str, value: Any) -> None:
    """``value`` in field ``name`` is refused, at construction and (where the model may be
    changed) on assignment, with an error naming that field."""
    builds = [lambda: model(**{**NEEDS.get(model, {}), name: value})]
    if not model.model_config.get("frozen"):
        builds.append(lambda: setattr(model(**NEEDS.get(model, {})), name, value))
    for build in builds:
        with pytest.raises(InvalidRequestError) as info:
            build()
        assert info.value.field == f"{model.__name__}.{name}"


def test_the_walk_finds_the_fields_of_each_kind() -> None:
    assert {(ResourceConfig, "cpu"), (JobRequest, "replicas"), (JobInfo, "exit_code")} <= set(
        NUMBER_FIELDS
    )
    assert (ActorConfig, "max_concurrency") in NUMBER_FIELDS and (JobRequest, "name") in TEXT_FIELDS
    assert {(ResourceConfig, "regions"), (Entrypoint, "args")} <= set(LIST_FIELDS)
    assert {(ResourceConfig, "zone"), (EnvironmentConfig, "workspace")} <= set(OPTIONAL_NAMES)


@FUZZ
@given(
    field=st.sampled_from(NUMBER_FIELDS),
    value=st.one_of(st.booleans(), st.text(max_size=4), st.binary(max_size=4)),
)
def test_true_or_text_is_never_a_number(field: tuple[type, str], value: Any) -> None:
    refused_naming(*field, value)


@FUZZ
@given(field=st.sampled_from(TEXT_FIELDS), value=st.binary(max_size=8))
def test_bytes_are_never_text(field: tuple[type, str], value: bytes) -> None:
    refused_naming(*field, value)


not_lists = st.one_of(
    st.text(min_size=1, max_size=6),
    st.dictionaries(st.text(min_size=1, max_size=4), anything, min_size=1, max_size=3),
)


@FUZZ
@given(field=st.sampled_from(LIST_FIELDS), value=not_lists)
def test_a_string_or_a_mapping_is_never_a_list(field: tuple[type, str], value: Any) -> None:
    refused_naming(*field, value)


@FUZZ
@given(args=not_lists)
def test_entrypoint_helpers_never_split_a_string_or_keep_a_mappings_keys(args: Any) -> None:
    for build in (
        lambda: Entrypoint.from_binary("ls", args),
        lambda: Entrypoint.from_callable(print, args),
        lambda: Entrypoint(binary_entrypoint=BinaryEntrypoint("ls", args)),
    ):
        with pytest.raises(InvalidRequestError) as info:
            build()
        assert info.value.field in ("Entrypoint.args", "Entrypoint")


@FUZZ
@given(field=st.sampled_from(OPTIONAL_NAMES), value=st.text(alphabet=" \t\n", max_size=3))
def test_an_empty_name_is_refused_not_read_as_unset(field: tuple[type, str], value: str) -> None:
    refused_naming(*field, value)


TRUE = Entrypoint.from_shell("true")


@pytest.mark.parametrize(
    ("build", "field"),
    [
        (lambda: Entrypoint.from_binary("ls", args="-l"), "Entrypoint.args"),  # pyright: ignore[reportArgumentType]
        (lambda: ResourceConfig(cpu=True), "ResourceConfig.cpu"),
        (lambda: ResourceConfig(replicas=True), "ResourceConfig.replicas"),
        (lambda: JobRequest(name="j", entrypoint=TRUE, replicas=True), "JobRequest.replicas"),  # pyright: ignore[reportArgumentType]
        (lambda: ActorConfig(max_concurrency=True), "ActorConfig.max_concurrency"),
        (lambda: JobRequest(name=b"bytes", entrypoint=TRUE), "JobRequest.name"),  # pyright: ignore[reportArgumentType]
        (lambda: ResourceConfig(regions={"us-central1": 1}), "ResourceConfig.regions"),  # pyright: ignore[reportArgumentType]
        (lambda: ResourceConfig(zone=""), "ResourceConfig.zone"),
    ],
)
def test_inputs_that_were_silently_coerced(build: Callable[[], Any], field: str) -> None:
    with pytest.raises(InvalidRequestError) as info:
        build()
    assert info.value.field == field


# ---------------------------------------------------------------------------------------------
# FRAY_CLIENT_SPEC

spec_params = st.tuples(
    st.sampled_from(["threads", "namespace", "ws", "x", ""]),
    st.just("="),
    st.one_of(st.integers(-3, 10**20).map(str), st.text(max_size=5)),
).map("".join)
specs = st.one_of(
    st.text(max_size=30),
    st.tuples(
        st.sampled_from(["local", "ray", "iris", "fake", "LOCAL", "", "1x", "zz"]),
        st.sampled_from(["", "://", ":/", "?"]),
        st.text(max_size=10),
        st.one_of(
            st.just(""),
            st.lists(spec_params, max_size=3).map(lambda pairs: "?" + "&".join(pairs)),
            st.text(max_size=8).map(lambda t: "?" + t),
        ),
    ).map("".join),
    anything,
)


@FUZZ
@given(spec=specs)
def test_parse_client_spec(spec: Any) -> None:
    parsed = accepts_or_names_field(lambda: parse_client_spec(spec))
    if parsed is not None:
        assert parsed.scheme.isidentifier() and parsed.raw == spec


@FUZZ
@given(
    query=st.lists(
        st.tuples(
            st.sampled_from(["threads", "namespace", "x"]),
            st.one_of(st.integers(-3, 10**6).map(str), st.text(max_size=5)),
        ),
        max_size=3,
    )
)
def test_local_client_from_spec(query: list[tuple[str, str]]) -> None:
    from urllib.parse import urlencode

    spec = "local" + ("?" + urlencode(query) if query else "")
    client = accepts_or_names_field(lambda: client_from_spec(spec))
    if client is not None:
        assert isinstance(client, LocalClient)
        client.shutdown()


@pytest.mark.parametrize(
    ("build", "field"),
    [
        (lambda: parse_memory("9" * 400, field="ResourceConfig.ram"), "ResourceConfig.ram"),
        (lambda: ResourceConfig(ram="9" * 400 + "p"), "ResourceConfig.ram"),
        (lambda: ResourceConfig(ram="１６g"), "ResourceConfig.ram"),
        (lambda: ResourceConfig(regions=5), "ResourceConfig.regions"),  # pyright: ignore[reportArgumentType]
        (lambda: ResourceConfig.with_tpu(123), "ResourceConfig.with_tpu.tpu_type"),  # pyright: ignore[reportArgumentType]
        (lambda: ResourceConfig.with_tpu("v4-8", replicas=2), "ResourceConfig.with_tpu.replicas"),
        (
            lambda: ResourceConfig.with_gpu("H100", device=CpuConfig()),
            "ResourceConfig.with_gpu.device",
        ),
        (lambda: ResourceConfig.with_cpu(device=CpuConfig()), "ResourceConfig.with_cpu.device"),
        (lambda: Entrypoint.from_callable(print, 5), "Entrypoint.args"),  # pyright: ignore[reportArgumentType]
        (lambda: Entrypoint.from_callable(print, (), 5), "Entrypoint.kwargs"),  # pyright: ignore[reportArgumentType]
        (lambda: Entrypoint(command=5), "Entrypoint.command"),  # pyright: ignore[reportArgumentType]
        (lambda: EnvironmentConfig(pip_packages=5), "EnvironmentConfig.pip_packages"),  # pyright: ignore[reportArgumentType]
        (lambda: create_environment(env_vars=5), "EnvironmentConfig.env_vars"),  # pyright: ignore[reportArgumentType]
        (lambda: create_environment(extras=5), "EnvironmentConfig.extras"),  # pyright: ignore[reportArgumentType]
        (lambda: ResourceConfig.model_validate({0: None}), "ResourceConfig"),
        (
            lambda: JobRequest(name="a", entrypoint=Entrypoint.from_shell("x"), resources={0: 1}),  # pyright: ignore[reportArgumentType]
            "JobRequest.resources",
        ),
    ],
)
def test_inputs_the_fuzzer_found(build: Callable[[], Any], field: str) -> None:
    """Each of these once escaped as OverflowError, TypeError or AttributeError (or, for the
    full-width digits, was accepted and handed on to backends verbatim)."""
    with pytest.raises(InvalidRequestError) as info:
        build()
    assert info.value.field == field
