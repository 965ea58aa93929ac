"""A request's path from ``submit`` to the backend's attempt start passes through few of
Fray's modules (``tools/trace_submit.py`` records them)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

from fray import Entrypoint, JobRequest, LocalClient
from fray_testing import FakeClient

TOOL = Path(__file__).resolve().parents[3] / "tools" / "trace_submit.py"


def _tracer() -> ModuleType:
    spec = importlib.util.spec_from_file_location("trace_submit", TOOL)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def noop() -> None:
    """The traced job."""


@pytest.mark.parametrize("make", [lambda: LocalClient(echo_logs=False), FakeClient])
def test_submit_reaches_the_attempt_start_through_at_most_five_modules(make: type) -> None:
    request = JobRequest(name="traced", entrypoint=Entrypoint.from_callable(noop))
    with make() as client:
        modules = _tracer().trace(lambda: client.submit(request))
    assert modules[0] == "fray/backend/_client.py"  # the engine's submit, written once
    assert len(modules) <= 5, modules


def test_the_tracer_sees_the_modules_past_the_hook_and_fails_if_it_is_never_reached() -> None:
    tracer = _tracer()
    request = JobRequest(name="traced", entrypoint=Entrypoint.from_callable(noop))
    with FakeClient() as client:
        until_report = tracer.trace(lambda: client.submit(request), stop_at="_finished")
        assert "fray_testing/_fake.py" in until_report and len(until_report) > 5
        with pytest.raises(RuntimeError, match="never reached no-such-function"):
            tracer.trace(lambda: client.submit(request), stop_at="no-such-function")
