"""The capability tables: what they refuse, and the READMEs that carry them."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from fray import Entrypoint, EnvironmentConfig, JobRequest, ResourceConfig, TpuConfig
from fray.backend import capabilities_of
from fray.backend._capabilities import known_targets
from fray.errors import InvalidRequestError
from fray.types import create_environment

_ROOT = Path(__file__).resolve().parents[3]
_READMES = {"local": "fray-core", "ray": "fray-ray", "iris": "fray-iris"}


def _request(resources: ResourceConfig | None = None, **fields: object) -> JobRequest:
    return JobRequest(
        name="r",
        entrypoint=Entrypoint.from_callable(print),
        resources=resources or ResourceConfig(),
        **fields,  # pyright: ignore[reportArgumentType]
    )


@pytest.mark.parametrize("target", known_targets())
def test_each_readme_carries_its_backend_table(target: str) -> None:
    readme = _ROOT / "packages" / _READMES[target] / "README.md"
    found = re.search(
        rf"<!-- capabilities:{target} -->\n(.*?)<!-- /capabilities -->", readme.read_text(), re.S
    )
    assert found is not None, f"{readme} lacks the <!-- capabilities:{target} --> block"
    expected = capabilities_of(target).markdown()
    assert found.group(1) == expected, f"{readme}: the table is stale; it should read\n{expected}"


def test_a_refusal_names_the_field_the_value_and_what_is_allowed() -> None:
    with pytest.raises(InvalidRequestError) as caught:
        capabilities_of("ray").check(_request(environment=EnvironmentConfig(extras=("tpu",))))
    assert caught.value.field == "JobRequest.environment.extras"
    assert caught.value.value == ("tpu",)
    assert "pip_packages" in str(caught.value)


def test_ray_notes_disk_other_than_the_default_and_refuses_it_nowhere() -> None:
    ray = capabilities_of("ray")
    for resources in (
        ResourceConfig(),
        ResourceConfig(disk="64g"),
        ResourceConfig.with_tpu("v4-8"),
        ResourceConfig(disk="16g"),
        ResourceConfig.with_tpu("v4-8", disk="100g"),
    ):
        ray.check(_request(resources))
        ray.check_resources(resources)
    assert ray.noted(ResourceConfig()) == []
    assert ray.noted(ResourceConfig.with_tpu("v4-8")) == []  # with_tpu's 50g is a default
    (note,) = ray.noted(ResourceConfig(disk="10g"))
    warning = note.warning(ResourceConfig(disk="10g"), ray.title)
    assert warning.startswith("resources.disk='10g': Ray does not reserve disk")
    assert "custom resource 'disk'" in warning
    assert ray.noted(None) == []


def test_the_same_request_gets_each_backends_own_answer() -> None:
    request = _request(ResourceConfig(disk="10G"), environment=EnvironmentConfig(extras=("x",)))
    capabilities_of("iris").check(request)  # Iris reserves disk and installs extras
    with pytest.raises(InvalidRequestError, match="extras"):
        capabilities_of("ray").check(request)  # the disk is only noted
    capabilities_of("ray").check(_request(ResourceConfig(disk="10G")))
    capabilities_of("local").check(request)  # the table is silent; LocalClient checks installs


def test_an_unknown_backend_is_an_error_listing_the_known_ones() -> None:
    with pytest.raises(InvalidRequestError) as caught:
        capabilities_of("slurm")
    assert caught.value.field == "target"
    assert str(caught.value).endswith("one of local, ray, iris")


def test_a_tpu_made_without_with_tpu_keeps_the_plain_default_disk_on_ray() -> None:
    capabilities_of("ray").check(_request(ResourceConfig(device=TpuConfig(variant="v4-8"))))


def test_every_backend_takes_create_environments_defaults_as_it_took_an_empty_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name, value in create_environment().env_vars.items():
        monkeypatch.setenv(name, value)  # a driver that has them: no process needed
    for target in known_targets():
        for isolation in ("auto", "thread") if target == "local" else ("auto",):
            request = _request(environment=create_environment(), isolation=isolation)
            capabilities_of(target).check(request)
    with pytest.raises(InvalidRequestError, match="current directory"):
        capabilities_of("iris").check(_request(environment=create_environment(workspace="/")))


def test_a_thread_job_is_refused_env_vars_the_driver_does_not_have(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("FRAY_TEST_SAME", "1")
    local = capabilities_of("local")
    local.check(_request(environment=EnvironmentConfig(env_vars={"FRAY_TEST_SAME": "1"})))
    with pytest.raises(InvalidRequestError, match="unless the driver has the same"):
        env = EnvironmentConfig(env_vars={"FRAY_TEST_SAME": "2"})
        local.check(_request(environment=env, isolation="thread"))
