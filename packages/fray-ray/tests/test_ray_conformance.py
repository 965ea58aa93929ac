"""RayClient runs the whole conformance suite against a real local Ray."""

# pyright: standard
# Ray is untyped: this module is an adapter over it.

from __future__ import annotations

import secrets
from collections.abc import Iterator

import pytest

from fray_ray import RayClient
from fray_testing.conformance import (
    ActorGroupTests,
    ActorLifecycleTests,
    ActorTests,
    BackendCapabilities,
    FailureTests,
    HostedActorTests,
    JobTests,
    LogTests,
    NestedJobTests,
    PicklingTests,
    PoolTests,
    ResourceValidationTests,
    ResultTests,
    RetryTests,
    TerminationTests,
)


class RayBackend:
    """A fresh RayClient (own namespace, so names never clash) per test, one Ray per module."""

    capabilities = BackendCapabilities(
        simulates_tpu_slices=False,  # TPU gangs on Ray are tested on fake TPU nodes in fray-tpu
    )
    timeout = 90.0

    @pytest.fixture
    def client(self, ray_cluster: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[RayClient]:
        monkeypatch.delenv("FRAY_JOB_ID", raising=False)
        client = RayClient(namespace=f"conformance-{secrets.token_hex(4)}", echo_logs=False)
        yield client
        client.shutdown()


class TestRayJobs(RayBackend, JobTests):
    pass


class TestRayFailures(RayBackend, FailureTests):
    pass


class TestRayTermination(RayBackend, TerminationTests):
    pass


class TestRayLogs(RayBackend, LogTests):
    pass


class TestRayResults(RayBackend, ResultTests):
    pass


class TestRayNestedJobs(RayBackend, NestedJobTests):
    pass


class TestRayActors(RayBackend, ActorTests):
    pass


class TestRayActorGroups(RayBackend, ActorGroupTests):
    pass


class TestRayHostedActors(RayBackend, HostedActorTests):
    pass


class TestRayActorLifecycle(RayBackend, ActorLifecycleTests):
    pass


class TestRayPickling(RayBackend, PicklingTests):
    pass


class TestRayRetries(RayBackend, RetryTests):
    pass


class TestRayResourceValidation(RayBackend, ResourceValidationTests):
    pass


class TestRayPools(RayBackend, PoolTests):
    pass
