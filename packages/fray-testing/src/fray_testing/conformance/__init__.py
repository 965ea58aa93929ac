"""The backend conformance suite: abstract pytest classes every Fray backend must pass.

A backend adopts a topic by subclassing its class with one fixture, ``client``::

    import pytest
    from fray_testing.conformance import BackendCapabilities, JobTests

    class TestMyBackendJobs(JobTests):
        capabilities = BackendCapabilities(supports_command_jobs=False)

        @pytest.fixture
        def client(self):
            with MyClient() as client:
                yield client

``BackendConformance`` holds every topic. Tests a backend cannot pass because it lacks a
capability are skipped with the reason; any other standard test may only be replaced by a
function marked ``@pytest.mark.xfail(reason=...)``, which the guard test checks.

Job callables and actor classes are in :mod:`fray_testing.conformance.entrypoints`. This
package loads its test modules on first use, so job processes that unpickle those callables
do not import pytest.
"""

from __future__ import annotations

import importlib
import sys
import typing

if typing.TYPE_CHECKING:
    from fray_testing.conformance._base import (
        BackendCapabilities,
        ConformanceTests,
        capability_reasons,
        check_overrides,
    )
    from fray_testing.conformance.actor_groups import ActorGroupTests
    from fray_testing.conformance.actors import ActorTests
    from fray_testing.conformance.failures import FailureTests
    from fray_testing.conformance.hosted import ActorLifecycleTests, HostedActorTests, host_in_job
    from fray_testing.conformance.jobs import JobTests
    from fray_testing.conformance.logs import LogTests
    from fray_testing.conformance.nested import NestedJobTests
    from fray_testing.conformance.pickling import PicklingTests
    from fray_testing.conformance.pools import PoolTests
    from fray_testing.conformance.resources import ResourceValidationTests
    from fray_testing.conformance.results import ResultTests
    from fray_testing.conformance.retries import RetryTests
    from fray_testing.conformance.suite import ALL_TEST_CLASSES, BackendConformance
    from fray_testing.conformance.termination import TerminationTests

__all__ = [
    "ALL_TEST_CLASSES",
    "ActorGroupTests",
    "ActorLifecycleTests",
    "ActorTests",
    "BackendCapabilities",
    "BackendConformance",
    "ConformanceTests",
    "FailureTests",
    "HostedActorTests",
    "JobTests",
    "LogTests",
    "NestedJobTests",
    "PicklingTests",
    "PoolTests",
    "ResourceValidationTests",
    "ResultTests",
    "RetryTests",
    "TerminationTests",
    "capability_reasons",
    "check_overrides",
    "host_in_job",
]

_MODULES = {
    "BackendCapabilities": "_base",
    "ConformanceTests": "_base",
    "capability_reasons": "_base",
    "check_overrides": "_base",
    "ActorGroupTests": "actor_groups",
    "ActorTests": "actors",
    "FailureTests": "failures",
    "HostedActorTests": "hosted",
    "ActorLifecycleTests": "hosted",
    "host_in_job": "hosted",
    "JobTests": "jobs",
    "LogTests": "logs",
    "NestedJobTests": "nested",
    "PicklingTests": "pickling",
    "PoolTests": "pools",
    "ResourceValidationTests": "resources",
    "ResultTests": "results",
    "RetryTests": "retries",
    "ALL_TEST_CLASSES": "suite",
    "BackendConformance": "suite",
    "TerminationTests": "termination",
}

if "pytest" in sys.modules:
    # Plain asserts in the test modules get pytest's detailed failure messages. They must be
    # registered before they are imported, which is why they load lazily.
    import pytest

    pytest.register_assert_rewrite(
        *(f"{__name__}.{module}" for module in sorted(set(_MODULES.values())))
    )


def __getattr__(name: str) -> typing.Any:
    module = _MODULES.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
