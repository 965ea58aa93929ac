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


def test_ray_takes_the_default_disk_and_refuses_any_other() -> None:
    ray = capabilities_of("ray")
    ray.check(_request(ResourceConfig()))
    ray.check(_request(ResourceConfig(disk="64g")))
    ray.check(_request(ResourceConfig.with_tpu("v4-8")))
    with pytest.raises(InvalidRequestError, match=r"the default on Ray \(64g; 50g"):
        ray.check(_request(ResourceConfig(disk="16g")))  # the default before 0.2.227's
    with pytest.raises(InvalidRequestError, match="Ray cannot reserve disk"):
        ray.check(_request(ResourceConfig.with_tpu("v4-8", disk="100g")))
    with pytest.raises(InvalidRequestError) as caught:
        ray.check_resources(ResourceConfig(disk="1g"))
    assert caught.value.field == "resources.disk"


def test_the_same_request_gets_each_backends_own_answer() -> None:
    request = _request(ResourceConfig(disk="10G"), environment=EnvironmentConfig(extras=("x",)))
    capabilities_of("iris").check(request)  # Iris reserves disk and installs extras
    with pytest.raises(InvalidRequestError, match="disk"):
        capabilities_of("ray").check(request)
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
