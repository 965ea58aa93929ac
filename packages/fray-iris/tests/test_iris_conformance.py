"""IrisClient runs the whole conformance suite against the in-process Iris cluster."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from fray import Client, HostedActor
from fray_iris import IrisClient
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
    host_in_job,
)

pytestmark = pytest.mark.integration


class IrisBackend:
    """A fresh IrisClient per test, on the session's cluster."""

    capabilities = BackendCapabilities(
        # A SIGKILLed task is a failure on Iris; worker loss is the preemption, tested in
        # test_iris_integration.py with the controller's fault injection.
        supports_preemption_injection=False,
        unique_job_names=True,
    )
    timeout = 90.0

    @pytest.fixture
    def client(self, iris_cluster) -> Iterator[IrisClient]:
        client = IrisClient(iris_cluster.url, results_url=iris_cluster.results_url)
        yield client
        client.shutdown()


class TestIrisJobs(IrisBackend, JobTests):
    pass


class TestIrisFailures(IrisBackend, FailureTests):
    pass


class TestIrisTermination(IrisBackend, TerminationTests):
    pass


class TestIrisLogs(IrisBackend, LogTests):
    pass


class TestIrisResults(IrisBackend, ResultTests):
    pass


class TestIrisNestedJobs(IrisBackend, NestedJobTests):
    pass


class TestIrisActors(IrisBackend, ActorTests):
    pass


class TestIrisActorGroups(IrisBackend, ActorGroupTests):
    pass


class TestIrisPickling(IrisBackend, PicklingTests):
    pass


class TestIrisRetries(IrisBackend, RetryTests):
    pass


class TestIrisResourceValidation(IrisBackend, ResourceValidationTests):
    pass


class TestIrisHostedActors(IrisBackend, HostedActorTests):
    """On Iris an actor is hosted from inside a job (host_actor elsewhere is an error): each
    test's actor is hosted by a job of its own, which hands the handle back."""

    def host_actor(
        self, client: Client, actor_class: type[Any], *args: Any, name: str, **kwargs: Any
    ) -> HostedActor:
        return host_in_job(client, actor_class, *args, name=name, timeout=self.timeout, **kwargs)


class TestIrisActorLifecycle(IrisBackend, ActorLifecycleTests):
    pass


class TestIrisPools(IrisBackend, PoolTests):
    pass
