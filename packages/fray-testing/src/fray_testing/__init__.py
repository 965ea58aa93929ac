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
    name: module
    for module, names in {
        "_backends": ("REAL_BACKENDS", "RealBackendError", "forbid_real_backends"),
        "_fake": ("FakeActorFuture", "FakeActorGroup", "FakeActorHandle", "FakeActorMethod"),
        "_outcomes": ("Delay", "Fail", "Hang", "Outcome", "Preempt", "Run", "Succeed"),
        "_records": ("ActorCall", "ActorCreation", "JobSubmission", "Record"),
    }.items()
    for name in names
} | {"FakeClient": "_fake", "FakeJobHandle": "_fake", "SimulatedPreemption": "_outcomes"}


def __getattr__(name: str) -> typing.Any:
    module = _MODULES.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
