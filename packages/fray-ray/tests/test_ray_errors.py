"""How Ray's exceptions read (fray_ray.errors): preemption or failure, and the user's
cause. Exceptions are built directly; no cluster."""

# pyright: standard
# Ray is untyped: this module is an adapter over it.

from __future__ import annotations

import pytest
from ray import exceptions as rx

from fray_ray.errors import (
    PREEMPTION_ERRORS,
    error_text,
    read_ray_error,
    user_cause,
)


def task_error(cause: BaseException) -> BaseException:
    """What ``ray.get`` raises when a task's code raised ``cause``."""
    trace = f"Traceback (most recent call last):\n  ...\n{type(cause).__name__}: {cause}"
    return rx.RayTaskError("fn", trace, cause).as_instanceof_cause()


LOST = [
    rx.ActorDiedError(),
    rx.ActorUnavailableError("the actor's node is unreachable", None),
    rx.NodeDiedError("node 1 died"),
    rx.WorkerCrashedError(),
    rx.LocalRayletDiedError(),
    rx.OwnerDiedError("ab" * 28, None, ""),
    rx.ObjectReconstructionFailedError("ab" * 28),
    rx.TaskUnschedulableError("the node it was pinned to is dead"),
    rx.ActorUnschedulableError("the node it was pinned to is dead"),
    rx.OutOfMemoryError("the memory monitor killed the worker"),
]

NOT_LOST = [
    rx.RaySystemError("cannot deserialize the value"),
    rx.TaskCancelledError(error_message="cancelled by an operator"),
    rx.RuntimeEnvSetupError("pip failed"),
    ValueError("not a Ray error at all"),
]


@pytest.mark.parametrize("exc", LOST, ids=lambda e: type(e).__name__)
def test_a_lost_process_node_or_object_is_a_preemption(exc: BaseException) -> None:
    assert read_ray_error(exc).kind == "preemption"
    reading = read_ray_error(exc)
    assert (reading.kind, reading.cause) == ("preemption", None)
    assert reading.error.startswith(f"{type(exc).__name__}: ")
    assert "\n" not in reading.error


@pytest.mark.parametrize("exc", NOT_LOST, ids=lambda e: type(e).__name__)
def test_errors_that_can_repeat_are_failures(exc: BaseException) -> None:
    assert read_ray_error(exc).kind != "preemption"
    assert read_ray_error(exc).kind == "failure"


def test_every_named_preemption_error_exists_in_this_ray() -> None:
    assert all(isinstance(getattr(rx, name, None), type) for name in PREEMPTION_ERRORS)


def test_user_exception_is_a_failure_with_its_cause_and_text() -> None:
    exc = task_error(ValueError("bad shape (3, 4)"))
    reading = read_ray_error(exc)
    assert reading.kind == "failure"
    assert type(reading.cause) is ValueError
    assert reading.error == "ValueError: bad shape (3, 4)"
    assert user_cause(exc) is reading.cause
    assert error_text(exc) == reading.error


def test_user_timeout_error_is_a_failure_not_a_preemption() -> None:
    exc = task_error(TimeoutError("my own deadline; the step timed out"))
    assert read_ray_error(exc).kind != "preemption"
    assert isinstance(read_ray_error(exc).cause, TimeoutError)


def test_user_code_that_lost_an_actor_it_called_was_preempted() -> None:
    exc = task_error(rx.ActorDiedError())
    assert read_ray_error(exc).kind == "preemption"


def test_runtime_env_failure_says_so() -> None:
    reading = read_ray_error(rx.RuntimeEnvSetupError("could not install torch==0.0.1"))
    assert reading.error.startswith("runtime environment setup failed: ")
    assert "torch==0.0.1" in reading.error


def test_ray_error_text_is_one_short_line() -> None:
    exc = rx.NodeDiedError("first line\n" + "x" * 2000)
    assert error_text(exc) == "NodeDiedError: first line"
    assert len(error_text(rx.NodeDiedError("y" * 2000))) == 500
