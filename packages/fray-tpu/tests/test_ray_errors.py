"""How Ray's exceptions read (fray_tpu.ray.errors): preemption or failure, the user's cause,
and what an actor's caller sees. Exceptions are built directly; no cluster."""

# pyright: standard
# Ray is untyped: this module is an adapter over it.

from __future__ import annotations

import pytest
from ray import exceptions as rx

from fray.errors import ActorDiedError, ActorError, JobTimeoutError
from fray_tpu.ray.errors import (
    PREEMPTION_ERRORS,
    actor_error,
    cause_line,
    error_text,
    is_preemption,
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
    assert is_preemption(exc)
    reading = read_ray_error(exc)
    assert (reading.kind, reading.cause) == ("preemption", None)
    assert reading.error.startswith(f"{type(exc).__name__}: ")
    assert "\n" not in reading.error


@pytest.mark.parametrize("exc", NOT_LOST, ids=lambda e: type(e).__name__)
def test_errors_that_can_repeat_are_failures(exc: BaseException) -> None:
    assert not is_preemption(exc)
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
    assert not is_preemption(exc)
    assert isinstance(read_ray_error(exc).cause, TimeoutError)


def test_user_code_that_lost_an_actor_it_called_was_preempted() -> None:
    exc = task_error(rx.ActorDiedError())
    assert is_preemption(exc)


def test_runtime_env_failure_says_so() -> None:
    reading = read_ray_error(rx.RuntimeEnvSetupError("could not install torch==0.0.1"))
    assert reading.error.startswith("runtime environment setup failed: ")
    assert "torch==0.0.1" in reading.error


def test_ray_error_text_is_one_short_line() -> None:
    exc = rx.NodeDiedError("first line\n" + "x" * 2000)
    assert error_text(exc) == "NodeDiedError: first line"
    assert len(error_text(rx.NodeDiedError("y" * 2000))) == 500


def test_actor_error_gives_the_caller_fray_errors() -> None:
    what = "actor trainer-0"
    assert type(actor_error(task_error(KeyError("k")), what)) is KeyError
    died = actor_error(rx.ActorDiedError(), what)
    assert isinstance(died, ActorDiedError) and str(died).startswith("actor trainer-0 died")
    assert isinstance(actor_error(rx.GetTimeoutError("slow"), what), JobTimeoutError)
    assert isinstance(actor_error(rx.ObjectLostError("ab" * 28, None, ""), what), ActorError)
    plain = ValueError("not Ray's")
    assert actor_error(plain, what) is plain


def test_an_actor_that_could_not_start_keeps_its_worker_side_cause() -> None:
    creation = rx.RayActorError(
        error_msg="The actor died because of an error raised in its creation task, "
        'ray::FrayWorker.__init__() (pid=1)\n  File "x.py", line 1, in <module>\n'
        "ModuleNotFoundError: No module named 'shipped_elsewhere'",
        actor_init_failed=True,
    )
    died = actor_error(creation, "actor worker-0")
    assert isinstance(died, ActorDiedError)
    assert "ModuleNotFoundError: No module named 'shipped_elsewhere'" in str(died)
    assert "EnvironmentConfig(workspace=...)" in str(died)  # how to ship the code
    assert cause_line(rx.RayActorError(error_msg="no cause here")) is None


def test_fray_ray_reads_ray_errors_the_same_way() -> None:
    convert = pytest.importorskip("fray_ray._convert")
    assert convert.is_preemption is is_preemption
