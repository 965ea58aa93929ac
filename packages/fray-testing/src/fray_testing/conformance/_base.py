"""The base of every conformance class: the ``client`` fixture, capability flags, helpers and
the guard against silently dropped tests."""

from __future__ import annotations

import dataclasses
import inspect
import secrets
import sys
import time
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, cast

import pytest

from fray import Client, Entrypoint, JobRequest

__all__ = [
    "BackendCapabilities",
    "ConformanceTests",
    "capability_reasons",
    "check_overrides",
]


def _flag(default: bool, reason: str) -> Any:
    return dataclasses.field(default=default, metadata={"reason": reason})


@dataclasses.dataclass(frozen=True)
class BackendCapabilities:
    """What a backend can do. Every flag defaults to the full behaviour (``unique_job_names``
    to ``False``); a backend turns off what it cannot do, and the tests that need it are
    skipped with the flag's reason. The reasons are the field metadata
    (:func:`capability_reasons`).
    """

    runs_user_code: bool = _flag(
        True,
        "the backend runs the job's callable, so its return value, printed lines and "
        "exceptions are what the handle reports (a recording-only client does not)",
    )
    runs_jobs_concurrently: bool = _flag(
        True,
        "submit() returns while the job's callable keeps running, so a job can block while "
        "the test acts on it (FakeClient runs callables inside submit(); jobs that must keep "
        "running are scripted with Hang())",
    )
    supports_command_jobs: bool = _flag(
        True,
        "Entrypoint.from_command runs a real program whose output and exit code are reported "
        "(FakeClient records commands without running them)",
    )
    applies_env_vars: bool = _flag(
        True,
        "EnvironmentConfig.env_vars and TPU host variables are set in the job's own process "
        "(in-process backends cannot change one job's environment without changing the "
        "test's)",
    )
    process_isolation: bool = _flag(
        True,
        "jobs can run in processes of their own, and terminate() kills the job's whole "
        "process tree (in-process backends have no process to kill)",
    )
    supports_preemption_injection: bool = _flag(
        True,
        "a test can preempt an attempt: a job process killed by SIGKILL, or an in-process "
        "job raising fray_testing.SimulatedPreemption, counts against max_retries_preemption "
        "(a remote cluster may need node-level fault injection instead)",
    )
    simulates_tpu_slices: bool = _flag(
        True,
        "a TPU request runs here without TPU hardware, one replica per VM of each slice "
        "(a real cluster needs the TPUs)",
    )
    ended_actors_refuse_calls: bool = _flag(
        True,
        "a group actor that set its shutdown_event takes no more calls: its process is gone "
        "(in-process actors live until their group is shut down and keep answering, as a "
        "pipeline that stops its workers one by one expects)",
    )
    unique_job_names: bool = _flag(
        False,
        "a running job's name is taken: submitting it again returns that job or raises "
        "JobAlreadyExistsError, instead of starting a new job with a new id",
    )


def capability_reasons() -> dict[str, str]:
    """Each capability flag's name and what it means (the reason a backend may lack it)."""
    return {f.name: f.metadata["reason"] for f in dataclasses.fields(BackendCapabilities)}


class ConformanceTests:
    """Base of the conformance classes.

    A backend adopts a class by subclassing it (class name starting with ``Test``) and
    defining one fixture, ``client``, that yields a client of the backend and shuts it
    down afterwards. Optional class attributes: ``capabilities`` (what the backend lacks)
    and ``timeout`` (the longest any single wait may take on this backend).
    """

    capabilities: ClassVar[BackendCapabilities] = BackendCapabilities()
    timeout: ClassVar[float] = 30.0

    @pytest.fixture
    def client(self) -> Client:
        """Yields the backend's client; every backend overrides this."""
        raise NotImplementedError(
            f"{type(self).__name__} must define a `client` fixture that yields a client of "
            "the backend under test and shuts it down afterwards"
        )

    # -- helpers -----------------------------------------------------------------------------

    def require(self, *flags: str) -> None:
        """Skips the test unless the backend has every capability in ``flags``."""
        reasons = capability_reasons()
        for flag in flags:
            if not getattr(self.capabilities, flag):
                pytest.skip(f"{type(self).__name__} sets {flag}=False ({reasons[flag]})")

    def name(self, prefix: str) -> str:
        """A job or actor name no other test uses (backends may keep names unique)."""
        return f"{prefix}-{secrets.token_hex(3)}"

    def request(
        self,
        fn: Callable[..., Any],
        *args: Any,
        name: str = "conformance",
        fn_kwargs: Mapping[str, Any] | None = None,
        **fields: Any,
    ) -> JobRequest:
        """A request running ``fn(*args, **fn_kwargs)``; ``fields`` are JobRequest fields."""
        return JobRequest(
            name=self.name(name),
            entrypoint=Entrypoint.from_callable(fn, args, fn_kwargs),
            **fields,
        )

    def command(self, *argv: str, name: str = "command", **fields: Any) -> JobRequest:
        """A request running a command line."""
        return JobRequest(name=self.name(name), entrypoint=Entrypoint.from_command(*argv), **fields)

    def python_command(self, code: str, **fields: Any) -> JobRequest:
        """A command job running ``python -c code`` with this interpreter."""
        return self.command(sys.executable, "-c", code, **fields)

    def eventually(self, predicate: Callable[[], Any], what: str) -> Any:
        """Waits (up to ``timeout``) for ``predicate()`` to be truthy and returns its value."""
        deadline = time.monotonic() + self.timeout
        delay = 0.005
        while True:
            value = predicate()
            if value:
                return value
            if time.monotonic() > deadline:
                pytest.fail(f"timed out after {self.timeout}s waiting for {what}")
            time.sleep(delay)  # polling interval of a bounded wait, not synchronisation
            delay = min(delay * 2, 0.1)

    # -- the guard ---------------------------------------------------------------------------

    def test_conformance_guard_DO_NOT_OVERRIDE(self) -> None:
        """Fails when this class drops or overrides a standard test without an xfail reason."""
        problems = check_overrides(type(self))
        assert not problems, "\n".join(problems)


def _standard_tests(cls: type) -> dict[str, Callable[..., Any]]:
    """The tests that the conformance classes among ``cls``'s bases define."""
    tests: dict[str, Callable[..., Any]] = {}
    for base in reversed(cls.__mro__):
        if not (isinstance(base, type) and issubclass(base, ConformanceTests)):
            continue
        if not base.__module__.startswith(__package__ or "fray_testing.conformance"):
            continue
        for attr_name, value in vars(base).items():
            if attr_name.startswith("test_") and inspect.isfunction(value):
                tests[attr_name] = value
    return tests


def _xfail_reason(obj: object) -> str | None:
    marks: list[Any] = list(getattr(obj, "pytestmark", []))
    for mark in marks:
        if getattr(mark, "name", None) == "xfail":
            reason = mark.kwargs.get("reason") or ""
            if isinstance(reason, str) and reason.strip():
                return reason
    return None


def _skips(marks: object) -> list[str]:
    """The skip marks in a ``pytestmark`` value (one mark or a list of them)."""
    listed = cast("list[object]", marks) if isinstance(marks, list) else [marks]
    names = [str(getattr(mark, "name", "")) for mark in listed]
    return [name for name in names if name in ("skip", "skipif")]


def check_overrides(cls: type) -> list[str]:
    """What ``cls`` does to the standard tests it inherits that it should not.

    A standard test may only be replaced by a function marked
    ``@pytest.mark.xfail(reason="...")`` (with ``xfail_strict``, the xfail itself fails once
    the backend is fixed). Setting it to something else, overriding it without such a mark,
    or skipping the whole class or module are reported.

    Returns:
        One line per problem; empty when ``cls`` is a faithful adopter.
    """
    problems: list[str] = []
    for test_name, standard in sorted(_standard_tests(cls).items()):
        actual = getattr(cls, test_name, None)
        if actual is standard:
            continue
        if actual is None or not callable(actual):
            problems.append(f"{cls.__name__}.{test_name} is dropped (set to {actual!r})")
        elif _xfail_reason(actual) is None:
            problems.append(
                f"{cls.__name__}.{test_name} overrides a standard test without "
                '@pytest.mark.xfail(reason="...")'
            )
    class_skips = _skips(getattr(cls, "pytestmark", []))
    if class_skips:
        problems.append(
            f"{cls.__name__} is marked {class_skips[0]}: every standard test is dropped"
        )
    module = sys.modules.get(cls.__module__)
    module_skips = _skips(getattr(module, "pytestmark", []))
    if module_skips:
        problems.append(
            f"module {cls.__module__} is marked {module_skips[0]}: every standard test is dropped"
        )
    return problems
