# pyright: standard
"""Ray's exceptions, read the Fray way: the one place that says which are preemptions.

Every Fray layer that runs work on Ray (fray-tpu's gang supervisor, fray-ray's RayClient)
asks here what a Ray error means, so a lost node, worker or actor is charged to
``max_retries_preemption`` and the user's own exception to ``max_retries_failure`` the
same way everywhere::

    Ray's exception                           Fray reads it as
    RayTaskError(cause)                       a failure of the user's code, with ``cause``
                                              (a preemption if ``cause`` is one of those below:
                                              the code was calling something that was lost)
    RayActorError (ActorDiedError,            a preemption: the process, node or object the
      ActorUnavailableError), NodeDiedError,  attempt depended on is gone, through no fault of
      LocalRayletDiedError,                   the code, so running it again can succeed
      WorkerCrashedError, ObjectLostError
      (OwnerDiedError, ...),
      TaskUnschedulableError,
      ActorUnschedulableError,
      OutOfMemoryError
    RuntimeEnvSetupError, RaySystemError,     a failure: each can be deterministic (a bad
      TaskCancelledError, anything else       runtime env, a value that cannot be
                                              deserialised, an operator's cancel), and the
                                              preemption budget is large (100 or 10,000):
                                              charging them there could rerun a broken job
                                              thousands of times

A user ``TimeoutError`` is a failure like any other exception (it arrives as a
``RayTaskError``). Preemption that Ray cannot see (a TPU VM told by the GCE metadata server
that it is being preempted) is the caller's to add: the gang supervisor asks the hosts.

Importing this module does not import ray; ``ray.exceptions`` is loaded on the first
question (by then the exception asked about has loaded it).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Any, Literal

from fray.errors import ActorDiedError, ActorError, JobTimeoutError

__all__ = [
    "PREEMPTION_ERRORS",
    "RayErrorReading",
    "actor_error",
    "actor_is_dead",
    "cause_line",
    "error_text",
    "is_preemption",
    "read_ray_error",
    "user_cause",
]

PREEMPTION_ERRORS: tuple[str, ...] = (
    "RayActorError",
    "NodeDiedError",
    "LocalRayletDiedError",
    "WorkerCrashedError",
    "ObjectLostError",
    "TaskUnschedulableError",
    "ActorUnschedulableError",
    "OutOfMemoryError",
)
"""Names of the ``ray.exceptions`` classes (subclasses included) that mean preemption."""

_MAX_TEXT = 500


@functools.cache
def _preemption_types() -> tuple[type[BaseException], ...]:
    from ray import exceptions as rx

    found = (getattr(rx, name, None) for name in PREEMPTION_ERRORS)
    return tuple(t for t in found if isinstance(t, type) and issubclass(t, BaseException))


def _ray_exceptions() -> Any:
    from ray import exceptions as rx

    return rx


def user_cause(exc: BaseException) -> BaseException | None:
    """The exception the user's code raised on the worker, inside a ``RayTaskError``;
    ``None`` for any other exception."""
    if not isinstance(exc, _ray_exceptions().RayTaskError):
        return None
    cause = getattr(exc, "cause", None)
    return cause if isinstance(cause, BaseException) else None


def is_preemption(exc: BaseException) -> bool:
    """Whether a Ray error means the attempt was lost to the cluster, not to the user's code
    (see the module docstring)."""
    return read_ray_error(exc).kind == "preemption"


def error_text(exc: BaseException) -> str:
    """One line for an error: ``Type: text`` of the user's exception inside a
    ``RayTaskError`` (all of its text), else of the error itself (its first line: Ray's
    messages run on for many lines), at most 500 characters."""
    cause = user_cause(exc)
    if cause is not None:
        return f"{type(cause).__name__}: {cause}"[:_MAX_TEXT]
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0] if lines else ''}"[:_MAX_TEXT]


@dataclass(frozen=True)
class RayErrorReading:
    """What a Ray error means for the attempt it ended.

    Attributes:
        kind: ``"preemption"`` (charged to ``max_retries_preemption``) or ``"failure"``
            (charged to ``max_retries_failure``).
        error: One line saying what happened (:func:`error_text`).
        cause: The user's own exception, where there is one (the worker side of a
            ``RayTaskError``); a failure with no cause of the user's has the Ray error.
    """

    kind: Literal["preemption", "failure"]
    error: str
    cause: BaseException | None


def read_ray_error(exc: BaseException) -> RayErrorReading:
    """Reads an exception raised by a Ray call that ran an attempt (see the module
    docstring)."""
    rx = _ray_exceptions()
    preemptions = _preemption_types()
    cause = user_cause(exc)
    if isinstance(exc, rx.RayTaskError):
        # The user's code raised; if what it raised is a lost actor or node, the attempt
        # was lost with it.
        kind = "preemption" if isinstance(cause, preemptions) else "failure"
        return RayErrorReading(kind, error_text(exc), cause)
    if isinstance(exc, rx.RuntimeEnvSetupError):
        return RayErrorReading("failure", f"runtime environment setup failed: {exc}", None)
    if isinstance(exc, preemptions):
        return RayErrorReading("preemption", error_text(exc), None)
    return RayErrorReading("failure", error_text(exc), exc)


def actor_error(exc: BaseException, what: str) -> BaseException:
    """The exception a caller of an actor method should see for ``exc``: the user's own
    exception raised by the method, ``JobTimeoutError`` for a wait that ran out,
    ``ActorDiedError`` for an actor that is gone, ``ActorError`` for any other Ray error;
    anything else unchanged.

    Args:
        exc: What the Ray call raised.
        what: The actor, in words (e.g. ``"actor trainer-0"``).
    """
    rx = _ray_exceptions()
    cause = user_cause(exc)
    if cause is not None:
        return cause
    if isinstance(exc, rx.RayTaskError):
        return ActorError(f"{what}: {exc}")
    if isinstance(exc, rx.GetTimeoutError):
        return JobTimeoutError(f"{what} did not answer in time")
    if isinstance(exc, rx.RayActorError | rx.RaySystemError):
        lines = str(exc).splitlines()
        message = f"{what} died: {lines[0] if lines else ''}"
        cause = cause_line(exc)
        if cause is not None and cause not in message:
            message += f" ({cause})"
            if cause.startswith(("ModuleNotFoundError", "ImportError")):
                message += (
                    "; the worker cannot import the actor's code: install it on the workers, "
                    "or ship it with EnvironmentConfig(workspace=...) or pip_packages"
                )
        return ActorDiedError(message)
    if isinstance(exc, rx.RayError):
        return ActorError(f"{what}: {type(exc).__name__}: {exc}")
    return exc


_CAUSE_LINE = re.compile(r"^\s*((?:[A-Za-z_][\w.]*\.)?[A-Z]\w*(?:Error|Exception|Exit)): (.*)$")


def cause_line(exc: BaseException) -> str | None:
    """The last ``SomeError: text`` line in a Ray error's message: the worker-side cause
    Ray embeds in the text of, for example, an actor whose creation task failed."""
    found = None
    for line in str(exc).splitlines():
        match = _CAUSE_LINE.match(line)
        if match is not None:
            found = f"{match.group(1).rsplit('.', 1)[-1]}: {match.group(2).strip()}"
    return found[:_MAX_TEXT] if found is not None else None


def actor_is_dead(actor: Any) -> bool:
    """Whether Ray's GCS records the actor (a Ray actor handle) as dead for good, not
    restarting (``True`` too if Ray cannot say)."""
    try:
        from ray._private import state as ray_state  # a DeveloperAPI, stable since Ray 2.0

        info = ray_state.actors(actor_id=actor._actor_id.hex())
    except Exception:
        return True
    return not info or info.get("State") == "DEAD"
