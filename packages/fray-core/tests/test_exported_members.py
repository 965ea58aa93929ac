"""The public surfaces are small and pinned: ``fray`` (what users import) and
``fray.backend`` (what backend authors import). A name added or dropped fails here first."""

from __future__ import annotations

import importlib

import pytest

import fray
import fray.backend

FRAY = {
    "ANY_REGION", "ActorConfig", "ActorContext", "ActorDiedError", "ActorError", "ActorFuture",
    "ActorGroup", "ActorHandle", "ActorMethod", "ActorPool", "ActorUnavailableError",
    "BackendUnavailableError", "Client", "CpuConfig", "DeviceConfig", "Entrypoint",
    "EnvironmentConfig", "FrayError", "GpuConfig", "HostedActor", "InvalidRequestError",
    "JobAlreadyExistsError", "JobFailedError", "JobHandle", "JobInfo", "JobNotFoundError",
    "JobRequest", "JobStatus", "JobTimeoutError", "LocalClient", "MemberResult", "MemberState",
    "PoolState", "PoolStatus", "ResourceConfig", "TpuConfig",
    "current_actor", "current_client", "current_job_id", "set_current_client", "task_index",
    "wait_all",
}  # fmt: skip

BACKEND = {
    "ActorMember", "BaseActorGroup", "BaseClient", "BaseJobHandle", "CallFuture", "Capabilities",
    "ClientSpec", "HostedActorHandle", "JobRecord", "LogBuffer", "Observed", "Outcome", "Phase",
    "PrefixedSink", "ShutdownEvent", "binding", "capabilities_of", "capture_into",
    "client_from_spec", "isolated_backends", "masker", "parse_client_spec", "register_backend",
    "resource_limit", "restart_allowed",
}  # fmt: skip


def test_fray_exports_exactly_its_public_names() -> None:
    assert set(fray.__all__) == FRAY
    assert len(fray.__all__) <= 42  # 37, and the five names of actor pools
    for name in fray.__all__:
        assert getattr(fray, name) is not None


def test_the_backend_seam_exports_exactly_its_public_names() -> None:
    assert set(fray.backend.__all__) == BACKEND
    assert len(fray.backend.__all__) <= 25
    for name in fray.backend.__all__:
        assert getattr(fray.backend, name) is not None
    public = {n for n in vars(fray.backend) if not n.startswith("_")} - {"annotations"}
    assert public == BACKEND


@pytest.mark.parametrize("name", sorted(fray._MOVED))  # pyright: ignore[reportPrivateUsage]
def test_a_moved_name_still_works_with_a_warning_naming_its_place(name: str) -> None:
    place = fray._MOVED[name]  # pyright: ignore[reportPrivateUsage]
    with pytest.warns(DeprecationWarning, match=rf"fray\.{name} moved to {place}\.{name}"):
        value = getattr(fray, name)
    assert value is getattr(importlib.import_module(place), name)


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        fray.nope  # noqa: B018  # pyright: ignore[reportAttributeAccessIssue]
