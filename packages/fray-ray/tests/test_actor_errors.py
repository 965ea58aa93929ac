"""What a caller of a Ray actor sees for Ray's errors (``fray_ray._actors.actor_error``):
Fray's errors, the method's own exception, a restarting actor told from a dead one.
Exceptions are built directly; no cluster."""

# pyright: standard
# Ray is untyped: this module is an adapter over it.

from __future__ import annotations

from ray import exceptions as rx

from fray.errors import ActorDiedError, ActorError, ActorUnavailableError, JobTimeoutError
from fray_ray._actors import actor_error, cause_line


def task_error(cause: BaseException) -> BaseException:
    """What ``ray.get`` raises when a task's code raised ``cause``."""
    trace = f"Traceback (most recent call last):\n  ...\n{type(cause).__name__}: {cause}"
    return rx.RayTaskError("fn", trace, cause).as_instanceof_cause()


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


def test_a_restarting_actor_is_unavailable_not_dead() -> None:
    restarting = actor_error(rx.ActorUnavailableError("the actor is restarting", None), "actor a-0")
    assert type(restarting) is ActorUnavailableError
    assert str(restarting).startswith("actor a-0 is unavailable (restarting")
    assert type(actor_error(rx.ActorDiedError(), "actor a-0")) is ActorDiedError
