"""Every conformance class, and one class that holds them all."""

from __future__ import annotations

from fray_testing.conformance._base import ConformanceTests
from fray_testing.conformance.actor_groups import ActorGroupTests
from fray_testing.conformance.actors import ActorTests
from fray_testing.conformance.failures import FailureTests
from fray_testing.conformance.hosted import ActorLifecycleTests, HostedActorTests
from fray_testing.conformance.jobs import JobTests
from fray_testing.conformance.logs import LogTests
from fray_testing.conformance.nested import NestedJobTests
from fray_testing.conformance.pickling import PicklingTests
from fray_testing.conformance.pools import PoolTests
from fray_testing.conformance.resources import ResourceValidationTests
from fray_testing.conformance.results import ResultTests
from fray_testing.conformance.retries import RetryTests
from fray_testing.conformance.termination import TerminationTests

__all__ = ["ALL_TEST_CLASSES", "BackendConformance"]


class BackendConformance(
    JobTests,
    FailureTests,
    TerminationTests,
    LogTests,
    ResultTests,
    NestedJobTests,
    ActorTests,
    ActorGroupTests,
    HostedActorTests,
    ActorLifecycleTests,
    PicklingTests,
    RetryTests,
    ResourceValidationTests,
    PoolTests,
):
    """The whole suite in one class, for backends that adopt everything at once."""


ALL_TEST_CLASSES: tuple[type[ConformanceTests], ...] = BackendConformance.__bases__
"""The topic classes, in the order the suite presents them."""
