# pyright: standard
"""Ray's exceptions, read the Fray way: the one place that says which are preemptions.

Every Fray layer that runs work on Ray (fray-ray's RayClient, fray-tpu's gangs) asks here
what a Ray error means, so a lost node, worker or actor is charged to
``max_retries_preemption`` and the user's own exception to ``max_retries_failure`` the same
way everywhere:

- ``RayTaskError(cause)``: a failure of the user's code, with ``cause`` (a preemption if
  ``cause`` is one of those below: the code was calling something that was lost);
- :data:`PREEMPTION_ERRORS` (a lost actor, node, worker or object, a task or actor that can
  no longer be scheduled, the memory monitor's kill): a preemption, through no fault of the
  code, so running it again can succeed;
- ``RuntimeEnvSetupError``, ``RaySystemError``, ``TaskCancelledError`` and anything else: a
  failure. Each can be deterministic (a bad runtime env, a value that cannot be
  deserialised, an operator's cancel), and the preemption budget is large (100 or 10,000).

A user ``TimeoutError`` is a failure like any other exception. Preemption that Ray cannot see
(a TPU VM told by the GCE metadata server that it is being preempted) is the caller's to add:
the gang asks its hosts.

Importing this module does not import ray; ``ray.exceptions`` is loaded on the first
question (by then the exception asked about has loaded it).
"""

from __future__ import annotations

from typing import Literal, NamedTuple

__all__ = [
    "PREEMPTION_ERRORS",
    "RayErrorReading",
    "error_text",
    "first_line",
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


def user_cause(exc: BaseException) -> BaseException | None:
    """The exception the user's code raised on the worker, inside a ``RayTaskError``;
    ``None`` for any other exception."""
    from ray.exceptions import RayTaskError

    return exc.cause if isinstance(exc, RayTaskError) else None


def first_line(exc: BaseException) -> str:
    """The first line of an error's text (Ray's messages run on for many lines)."""
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else ""


def error_text(exc: BaseException) -> str:
    """One line for an error: ``Type: text`` of the user's exception inside a
    ``RayTaskError`` (all of its text), else of the error itself (its first line: Ray's
    messages run on for many lines), at most 500 characters."""
    cause = user_cause(exc)
    if cause is not None:
        return f"{type(cause).__name__}: {cause}"[:_MAX_TEXT]
    return f"{type(exc).__name__}: {first_line(exc)}"[:_MAX_TEXT]


class RayErrorReading(NamedTuple):
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
    from ray import exceptions as rx

    preemptions = tuple(getattr(rx, name) for name in PREEMPTION_ERRORS)
    cause = user_cause(exc)
    if isinstance(exc, rx.RayTaskError):
        # The user's code raised; if what it raised is a lost actor or node, the attempt
        # was lost with it.
        return RayErrorReading(
            "preemption" if isinstance(cause, preemptions) else "failure", error_text(exc), cause
        )
    if isinstance(exc, rx.RuntimeEnvSetupError):
        return RayErrorReading("failure", f"runtime environment setup failed: {exc}", None)
    if isinstance(exc, preemptions):
        return RayErrorReading("preemption", error_text(exc), None)
    return RayErrorReading("failure", error_text(exc), exc)
