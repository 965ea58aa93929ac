"""Testing tools for Fray: a scripted FakeClient, pytest fixtures and the backend
conformance suite.

    from fray_testing import Fail, FakeClient

    client = FakeClient()
    client.script("train", Fail(ValueError("out of memory")))

The pytest plugin (loaded automatically once this package is installed) provides the
``fake_client`` and ``no_real_backends`` fixtures; ``fray_testing.conformance`` holds the
test classes every backend must pass.

Names load on first use, so the plugin costs pytest sessions that do not use Fray nothing.
"""

from __future__ import annotations

import importlib
import typing

if typing.TYPE_CHECKING:
    from fray_testing._backends import REAL_BACKENDS, RealBackendError, forbid_real_backends
    from fray_testing._fake import (
        FakeActorFuture,
        FakeActorGroup,
        FakeActorHandle,
        FakeActorMethod,
        FakeClient,
        FakeJobHandle,
    )
    from fray_testing._outcomes import (
        Delay,
        Fail,
        Hang,
        Outcome,
        Preempt,
        Run,
        SimulatedPreemption,
        Succeed,
    )
    from fray_testing._records import ActorCall, ActorCreation, JobSubmission, Record

__version__ = "0.1.0"

__all__ = [
    "REAL_BACKENDS",
    "ActorCall",
    "ActorCreation",
    "Delay",
    "Fail",
    "FakeActorFuture",
    "FakeActorGroup",
    "FakeActorHandle",
    "FakeActorMethod",
    "FakeClient",
    "FakeJobHandle",
    "Hang",
    "JobSubmission",
    "Outcome",
    "Preempt",
    "RealBackendError",
    "Record",
    "Run",
    "SimulatedPreemption",
    "Succeed",
    "forbid_real_backends",
]

_MODULES = {
    "FakeActorFuture": "_fake",
    "FakeActorGroup": "_fake",
    "FakeActorHandle": "_fake",
    "FakeActorMethod": "_fake",
    "REAL_BACKENDS": "_backends",
    "RealBackendError": "_backends",
    "forbid_real_backends": "_backends",
    "FakeClient": "_fake",
    "FakeJobHandle": "_fake",
    "Delay": "_outcomes",
    "Fail": "_outcomes",
    "Hang": "_outcomes",
    "Outcome": "_outcomes",
    "Preempt": "_outcomes",
    "Run": "_outcomes",
    "SimulatedPreemption": "_outcomes",
    "Succeed": "_outcomes",
    "ActorCall": "_records",
    "ActorCreation": "_records",
    "JobSubmission": "_records",
    "Record": "_records",
}


def __getattr__(name: str) -> typing.Any:
    module = _MODULES.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
