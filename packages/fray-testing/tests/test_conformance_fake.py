"""FakeClient runs the whole conformance suite.

FakeClient runs callables inside ``submit()``, so a job cannot keep running by itself:
the suite's long-running entrypoint is scripted with ``Hang()`` (running until terminated,
which is what it does on a real backend). Preempted attempts raise ``SimulatedPreemption``
in-process, which the fake counts as preemptions.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from fray_testing import FakeClient, Hang
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
from fray_testing.conformance import entrypoints as ep


class FakeBackend:
    """The fixture every topic shares: a fresh FakeClient per test."""

    capabilities = BackendCapabilities(
        runs_jobs_concurrently=False,
        supports_command_jobs=False,
        applies_env_vars=False,
        process_isolation=False,
    )

    @pytest.fixture
    def client(self) -> Iterator[FakeClient]:
        client = FakeClient(outcomes={ep.run_until_terminated: Hang()})
        yield client
        client.shutdown()


class TestFakeJobs(FakeBackend, JobTests):
    pass


class TestFakeFailures(FakeBackend, FailureTests):
    pass


class TestFakeTermination(FakeBackend, TerminationTests):
    pass


class TestFakeLogs(FakeBackend, LogTests):
    pass


class TestFakeResults(FakeBackend, ResultTests):
    pass


class TestFakeNestedJobs(FakeBackend, NestedJobTests):
    pass


class TestFakeActors(FakeBackend, ActorTests):
    pass


class TestFakeActorGroups(FakeBackend, ActorGroupTests):
    pass


class TestFakeHostedActors(FakeBackend, HostedActorTests):
    pass


class TestFakeActorLifecycle(FakeBackend, ActorLifecycleTests):
    pass


class TestFakePickling(FakeBackend, PicklingTests):
    pass


class TestFakeRetries(FakeBackend, RetryTests):
    pass


class TestFakeResourceValidation(FakeBackend, ResourceValidationTests):
    pass


class TestFakePools(FakeBackend, PoolTests):
    pass
