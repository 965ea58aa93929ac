"""Capability tables: each refusal is reached by a request at the limits, and a fake or local
client given a ``target`` refuses what that backend refuses, with its message."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from fray import (
    Entrypoint,
    EnvironmentConfig,
    JobRequest,
    LocalClient,
    ResourceConfig,
)
from fray.backend import capabilities_of, client_from_spec
from fray.backend._capabilities import known_targets
from fray.errors import InvalidRequestError
from fray_testing import FakeClient
from fray_testing.conformance import entrypoints as ep
from fray_testing.conformance.limits import requests_at_the_limits, resources_at_the_limits


def _refused_limit(check: Callable[[], object]) -> tuple[str, str] | None:
    try:
        check()
    except InvalidRequestError as refusal:
        return (refusal.field or "", refusal.allowed or "")
    return None


@pytest.mark.parametrize("target", known_targets())
def test_every_limit_is_reached_by_a_request_at_the_limits(target: str) -> None:
    table = capabilities_of(target)
    reached: set[tuple[str, str]] = set()
    for request in requests_at_the_limits():
        # The first refusal hides the others: check each limit on its own.
        for limit in table.limits:
            if limit.breaks(request):
                reached.add((limit.field, limit.allowed))
    missing = [
        (lim.field, lim.allowed) for lim in table.limits if (lim.field, lim.allowed) not in reached
    ]
    assert not missing, f"no request at the limits breaks these {target} limits: {missing}"


@pytest.mark.parametrize("target", known_targets())
def test_every_resource_limit_is_reached_by_resources_at_the_limits(target: str) -> None:
    table = capabilities_of(target)
    wanted = {lim.field for lim in table.limits if lim.on_resources is not None}
    reached = {
        lim.field
        for resources in resources_at_the_limits()
        for lim in table.limits
        if lim.on_resources is not None and lim.on_resources(resources)
    }
    assert wanted <= reached


@pytest.mark.parametrize("target", known_targets())
def test_a_fake_client_with_a_target_refuses_what_the_target_refuses(target: str) -> None:
    table = capabilities_of(target)
    with FakeClient(target=target) as fake:
        for request in requests_at_the_limits():
            expected = _refused_limit(lambda r=request: table.check(r))
            if expected is None:
                assert fake.submit(request).wait(timeout=30) is not None
                continue
            with pytest.raises(InvalidRequestError) as caught:
                fake.submit(request)
            assert (caught.value.field, caught.value.allowed) == expected
        assert fake.target is table


def test_a_fake_client_without_a_target_refuses_none_of_them() -> None:
    with FakeClient() as fake:
        for request in requests_at_the_limits():
            fake.submit(request)
        assert len(fake.submissions) == len(requests_at_the_limits())


def test_a_disk_size_runs_with_one_note_per_client_where_ray_only_notes_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    request = JobRequest(
        name="disk",
        entrypoint=Entrypoint.from_callable(ep.add, (2, 3)),
        resources=ResourceConfig(disk="10G"),
    )
    with LocalClient() as local:
        assert local.submit(request).result(timeout=30) == 5
    assert "resources.disk" not in caplog.text  # the local backend has nothing to note
    for client in (FakeClient(target="ray"), LocalClient(target="ray")):
        caplog.clear()
        with client:
            assert client.submit(request).result(timeout=30) == 5
            assert client.submit(request).result(timeout=30) == 5
        notes = [r.getMessage() for r in caplog.records if "resources.disk" in r.getMessage()]
        assert len(notes) == 1, notes  # once per client
        assert notes[0].startswith("resources.disk='10G': Ray")


def test_the_tpu_default_disk_is_not_a_refusal_on_ray() -> None:
    """``with_tpu`` sizes disk at 50g: a default Ray does not reserve, not the user's ask."""
    request = JobRequest(
        name="tpu",
        entrypoint=Entrypoint.from_callable(ep.add, (1, 1)),
        resources=ResourceConfig.with_tpu("v4-8"),
    )
    assert capabilities_of("ray").check(request) is request


def test_actor_resources_are_checked_against_the_target(caplog: pytest.LogCaptureFixture) -> None:
    with FakeClient(target="ray") as fake:
        group = fake.create_actor_group(
            ep.Counter, name="c", count=1, resources=ResourceConfig(disk="1t")
        )
        assert len(group.wait_ready()) == 1
    assert "resources.disk='1t': Ray" in caplog.text
    with FakeClient(target="iris") as fake:
        group = fake.create_actor_group(
            ep.Counter, name="c", count=1, resources=ResourceConfig(disk="1t")
        )
        assert len(group.wait_ready()) == 1


def test_an_unknown_target_names_the_field_and_the_choices() -> None:
    with pytest.raises(InvalidRequestError) as caught:
        FakeClient(target="slurm")
    assert caught.value.field == "FakeClient.target"
    assert "local, ray, iris" in str(caught.value)
    with pytest.raises(InvalidRequestError) as caught:
        LocalClient(target="kubernetes")
    assert caught.value.field == "LocalClient.target"


def test_the_target_comes_from_the_client_spec() -> None:
    fake = client_from_spec("fake?target=ray")
    assert isinstance(fake, FakeClient)
    assert fake.target is capabilities_of("ray")
    local = client_from_spec("local?target=iris&threads=2")
    assert isinstance(local, LocalClient)
    try:
        assert local.target is capabilities_of("iris")
    finally:
        local.shutdown()


def test_local_extras_must_be_installed_here(tmp_path: Path) -> None:
    project = tmp_path
    (project / "pyproject.toml").write_text(
        '[project]\nname = "p"\nversion = "0"\n'
        "[project.optional-dependencies]\n"
        'have = ["pytest>=1"]\n'
        'lack = ["surely-not-installed-fray-package"]\n'
    )

    def request(extra: str) -> JobRequest:
        return JobRequest(
            name="extras",
            entrypoint=Entrypoint.from_callable(ep.add, (1, 1)),
            environment=EnvironmentConfig(extras=(extra,), workspace=str(project)),
        )

    with LocalClient() as local:
        assert local.submit(request("have")).result(timeout=30) == 2
        with pytest.raises(InvalidRequestError) as caught:
            local.submit(request("lack"))
        assert "surely-not-installed-fray-package" in str(caught.value)
        with pytest.raises(InvalidRequestError) as caught:
            local.submit(request("other"))
        assert caught.value.field == "EnvironmentConfig.extras"
        assert "have, lack" in str(caught.value)
        # The project file is read again once it changes (it is kept between submits).
        with (project / "pyproject.toml").open("a") as f:
            f.write('other = ["pytest>=1"]\n')
        assert local.submit(request("other")).result(timeout=30) == 2
