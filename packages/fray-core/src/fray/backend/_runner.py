"""Running a job's callable and turning what happened into an outcome that can travel: the
same on every backend (a local process, a Ray task, an Iris task)."""

from __future__ import annotations

import traceback
from collections.abc import Callable
from typing import Any

__all__ = ["call_outcome", "exit_code_of", "portable_error"]


def portable_error(exc: BaseException) -> BaseException:
    """``exc`` if it survives pickling; otherwise a ``RuntimeError`` with its type and text."""
    import cloudpickle

    try:
        cloudpickle.loads(cloudpickle.dumps(exc))
    except Exception:
        return RuntimeError(f"{type(exc).__name__}: {exc}")
    return exc


def call_outcome(
    fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[Any, ...]:
    """Calls ``fn``; returns ``("ok", value)`` or ``("error", exception, traceback_text)``
    (the exception made portable). Every exception is caught, ``SystemExit`` included."""
    try:
        return ("ok", fn(*args, **kwargs))
    except BaseException as exc:
        return ("error", portable_error(exc), traceback.format_exc())


def exit_code_of(outcome: tuple[Any, ...]) -> int:
    """The process exit code that goes with an outcome: 0, ``SystemExit``'s code, or 1."""
    if outcome[0] == "ok":
        return 0
    exc = outcome[1]
    if isinstance(exc, SystemExit) and isinstance(exc.code, int):
        return exc.code or 1
    return 1
