"""LocalClient runs the whole conformance suite."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import fray
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


class LocalBackend:
    """The fixture every topic shares: a fresh LocalClient per test."""

    @pytest.fixture
    def client(self, monkeypatch: pytest.MonkeyPatch) -> Iterator[fray.LocalClient]:
        monkeypatch.delenv("FRAY_JOB_ID", raising=False)  # jobs here have no enclosing job
        client = fray.LocalClient(echo_logs=False)
        yield client
        client.shutdown()


class TestLocalJobs(LocalBackend, JobTests):
    pass


class TestLocalFailures(LocalBackend, FailureTests):
    pass


class TestLocalTermination(LocalBackend, TerminationTests):
    pass


class TestLocalLogs(LocalBackend, LogTests):
    pass


class TestLocalResults(LocalBackend, ResultTests):
    pass


class TestLocalNestedJobs(LocalBackend, NestedJobTests):
    pass


class TestLocalActors(LocalBackend, ActorTests):
    pass


class TestLocalActorGroups(LocalBackend, ActorGroupTests):
    pass


class TestLocalHostedActors(LocalBackend, HostedActorTests):
    pass


class TestLocalActorLifecycle(LocalBackend, ActorLifecycleTests):
    capabilities = BackendCapabilities(ended_actors_refuse_calls=False)


class TestLocalPickling(LocalBackend, PicklingTests):
    pass


class TestLocalRetries(LocalBackend, RetryTests):
    pass


class TestLocalResourceValidation(LocalBackend, ResourceValidationTests):
    pass


class TestLocalPools(LocalBackend, PoolTests):
    pass
