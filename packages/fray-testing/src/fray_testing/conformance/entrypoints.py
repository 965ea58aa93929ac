"""Job callables and actor classes the conformance tests run.

They live at module level in an installed module, so they pickle by reference and load in
job processes of any backend. This module must stay cheap to import (no pytest): every
process job of the suite imports it.

Some jobs only make sense where a job can keep running; a backend that runs callables
inside ``submit()`` (FakeClient) scripts :func:`run_until_terminated` with ``Hang()``.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from fray import Entrypoint, JobRequest, current_actor, current_client
from fray_testing._outcomes import SimulatedPreemption

# -- exceptions --------------------------------------------------------------------------------


class ConformanceError(Exception):
    """A user exception type of our own: backends must keep its type, not just its text."""


class UnpicklableError(Exception):
    """An exception that cannot be pickled (it holds a lock)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.lock = threading.Lock()


# -- values ------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Point:
    """A user-defined class returned by a job."""

    x: int
    y: int


def add(a: int, b: int) -> int:
    """Returns ``a + b``."""
    return a + b


def echo(value: Any) -> Any:
    """Returns its argument."""
    return value


def join_words(*words: str, sep: str = " ") -> str:
    """Joins ``words`` with ``sep`` (checks args and kwargs arrive)."""
    return sep.join(words)


def make_point(x: int, y: int) -> Point:
    """Returns a ``Point``."""
    return Point(x, y)


def sleep_then_return(seconds: float, value: Any) -> Any:
    """Works (sleeps) for ``seconds``, then returns ``value``."""
    time.sleep(seconds)
    return value


def return_none() -> None:
    """Returns nothing."""


# -- output ------------------------------------------------------------------------------------


def print_lines(*lines: str) -> int:
    """Prints each line to stdout; returns how many."""
    for line in lines:
        print(line)
    return len(lines)


def print_to_stderr(line: str) -> None:
    """Prints a line to stderr."""
    print(line, file=sys.stderr)


def write_unterminated(text: str) -> None:
    """Writes text without a final newline."""
    sys.stdout.write(text)
    sys.stdout.flush()


def print_then_fail(line: str, message: str) -> None:
    """Prints a line, then raises ``ConformanceError(message)``."""
    print(line, flush=True)
    raise ConformanceError(message)


# -- failures ----------------------------------------------------------------------------------


def raise_value_error(message: str) -> None:
    """Raises ``ValueError(message)``."""
    raise ValueError(message)


def raise_conformance_error(message: str) -> None:
    """Raises ``ConformanceError(message)``."""
    raise ConformanceError(message)


def raise_unpicklable(message: str) -> None:
    """Raises an exception that cannot be pickled."""
    raise UnpicklableError(message)


def exit_with(code: int) -> None:
    """Raises ``SystemExit(code)``."""
    raise SystemExit(code)


# -- long-running ------------------------------------------------------------------------------


def run_until_terminated() -> None:
    """Runs until the job is terminated (never returns on its own)."""
    while True:
        time.sleep(0.02)


def record_pids_then_block(path: str) -> None:
    """Starts a grandchild process, writes ``"<own pid> <grandchild pid>"`` to ``path``, and
    runs until terminated: terminate() must end both processes."""
    grandchild = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(600)"],
        stdin=subprocess.DEVNULL,
    )
    tmp = f"{path}.tmp"
    with open(tmp, "w") as out:
        out.write(f"{os.getpid()} {grandchild.pid}")
    os.replace(tmp, path)
    run_until_terminated()


# -- environment -------------------------------------------------------------------------------


def read_env(*names: str) -> dict[str, str | None]:
    """Returns the values of the named environment variables in the job."""
    return {name: os.environ.get(name) for name in names}


# -- retries -----------------------------------------------------------------------------------


def _count_attempt(counter_path: str) -> int:
    with open(counter_path, "ab") as counter:
        counter.write(b".")
    return os.path.getsize(counter_path)


def follow_plan(counter_path: str, plan: str, driver_pid: int) -> int:
    """Does what ``plan`` says for this attempt and returns the attempt number.

    Attempt ``k`` (counted in ``counter_path``) follows ``plan[k-1]``, the last letter
    repeating: ``S`` returns ``k``; ``F`` raises ``ConformanceError``; ``P`` is preempted:
    the job's own process is killed, or, when the job runs inside the driver (``driver_pid``),
    where a kill would end the test run, it raises :class:`fray_testing.SimulatedPreemption`.
    The kill is SIGKILL (a lost node) on a cluster and SIGTERM on the local backend, where a
    SIGKILL that Fray did not send is the out-of-memory killer: a failure, not a preemption.
    """
    attempt = _count_attempt(counter_path)
    action = plan[min(attempt, len(plan)) - 1]
    if action == "S":
        return attempt
    if action == "F":
        raise ConformanceError(f"attempt {attempt} failed as planned")
    if os.getpid() == driver_pid:
        raise SimulatedPreemption(f"attempt {attempt} preempted as planned")
    sys.stdout.flush()
    local = getattr(current_client(), "scheme", None) == "local"
    os.kill(os.getpid(), signal.SIGTERM if local else signal.SIGKILL)
    raise AssertionError("unreachable: the process was killed")


# -- nested jobs -------------------------------------------------------------------------------


def _child(name: str, fn: Callable[..., Any], args: tuple[Any, ...]) -> JobRequest:
    return JobRequest(name=name, entrypoint=Entrypoint.from_callable(fn, args))


def spawn_and_wait(child_name: str, fn: Callable[..., Any], *args: Any) -> tuple[str, Any]:
    """Submits ``fn(*args)`` as a child job, waits for it; returns ``(child id, its result)``."""
    child = current_client().submit(_child(child_name, fn, args))
    return child.job_id, child.result()


def spawn_and_return(child_name: str, fn: Callable[..., Any], *args: Any) -> str:
    """Submits ``fn(*args)`` as a child job and returns its id without waiting."""
    return current_client().submit(_child(child_name, fn, args)).job_id


def spawn_then_block(child_name: str) -> None:
    """Submits a child that runs until terminated, then runs until terminated itself."""
    current_client().submit(_child(child_name, run_until_terminated, ()))
    run_until_terminated()


def spawn_chain(depth: int, name: str) -> list[str]:
    """Submits a chain of ``depth`` nested jobs; returns their ids, outermost first."""
    if depth == 0:
        return []
    child = current_client().submit(_child(name, spawn_chain, (depth - 1, name)))
    return [child.job_id, *child.result()]


def print_and_spawn(line: str, child_name: str, child_line: str) -> str:
    """Prints ``line``, runs a child printing ``child_line``, waits; returns the child id."""
    print(line, flush=True)
    child = current_client().submit(_child(child_name, print_lines, (child_line,)))
    child.wait()
    return child.job_id


def client_scheme() -> str:
    """The scheme of ``fray.current_client()`` inside the job."""
    return current_client().scheme


# -- actors ------------------------------------------------------------------------------------


class Counter:
    """A stateful actor."""

    def __init__(self, start: int = 0, *, step: int = 1) -> None:
        self.count = start
        self.step = step

    def incr(self, by: int | None = None) -> int:
        """Adds ``by`` (default: the step) and returns the new count."""
        self.count += self.step if by is None else by
        return self.count

    def value(self) -> int:
        """The current count."""
        return self.count

    def fail(self, message: str) -> None:
        """Raises ``ConformanceError(message)``."""
        raise ConformanceError(message)

    def exit(self, code: int) -> None:
        """Raises ``SystemExit(code)``: the actor ends, as its process would."""
        raise SystemExit(code)

    def identity(self) -> tuple[str, int]:
        """``(group name, index)`` from ``fray.current_actor()``."""
        ctx = current_actor()
        return ctx.group_name, ctx.index

    def call(self, handle: Any, method: str, *args: Any) -> Any:
        """Calls ``method`` on another actor through its handle."""
        return getattr(handle, method)(*args)


class FailingInit:
    """An actor whose constructor raises ``ConformanceError(message)``."""

    def __init__(self, message: str) -> None:
        raise ConformanceError(message)


class FailOnIndex:
    """An actor whose constructor fails for one index of its group."""

    def __init__(self, bad_index: int) -> None:
        if current_actor().index == bad_index:
            raise ConformanceError(f"actor {bad_index} refuses to start")

    def ping(self) -> str:
        """Returns ``"pong"``."""
        return "pong"


def call_actor(handle: Any, method: str, *args: Any) -> Any:
    """A job that calls ``method`` on an actor passed to it as an argument."""
    return getattr(handle, method)(*args)


class Ender:
    """An actor that ends itself through ``fray.current_actor()``."""

    def __init__(self) -> None:
        self.count = 0

    def incr(self, by: int = 1) -> int:
        """Adds ``by`` and returns the new count (0 after a restart: a fresh instance)."""
        self.count += by
        return self.count

    def end(self) -> str:
        """Sets this actor's ``shutdown_event``: it ends cleanly."""
        event = current_actor().shutdown_event
        assert event is not None, "every backend gives an actor a shutdown_event"
        event.set()
        return "ending"

    def fail_with(self, message: str) -> str:
        """``current_actor().fail(ConformanceError(message))``: it ends as failed."""
        current_actor().fail(ConformanceError(message))
        return "failing"

    def slow_echo(self, value: Any, seconds: float) -> Any:
        """Returns ``value`` after ``seconds``."""
        time.sleep(seconds)  # the work being timed out, not synchronisation
        return value


# -- hosting an actor inside a job (see hosted.host_in_job) ------------------------------------


class Mailbox:
    """An actor between a test and the job hosting an actor for it: the job posts the
    outcome of ``host_actor`` (its handle or its error); the test waits for it, and later
    tells the job to stop hosting."""

    def __init__(self) -> None:
        self._outcome: tuple[Any, ...] | None = None
        self._posted = threading.Event()
        self._stop = threading.Event()

    def post(self, outcome: tuple[Any, ...]) -> None:
        """Stores the hosting job's outcome."""
        self._outcome = outcome
        self._posted.set()

    def outcome(self, wait: float) -> tuple[Any, ...] | None:
        """The posted outcome, waiting up to ``wait`` seconds for it (``None``: not yet)."""
        self._posted.wait(wait)
        return self._outcome

    def stop(self) -> None:
        """Tells the hosting job to stop hosting."""
        self._stop.set()

    def stopped(self, wait: float) -> bool:
        """Whether the test said stop, waiting up to ``wait`` seconds for it."""
        return self._stop.wait(wait)


def serve_hosted(
    mailbox: Any,
    actor_class: type[Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    name: str,
) -> None:
    """A job that hosts ``actor_class`` with ``current_client().host_actor`` and posts the
    outcome to ``mailbox``: ``("ok", handle)``, or ``("error", exc, exc.__cause__)`` (a
    pickled exception loses its cause). It serves until the mailbox says stop, then shuts
    the hosted actor down."""
    try:
        hosted = current_client().host_actor(actor_class, *args, name=name, **kwargs)
    except Exception as exc:
        mailbox.post(("error", exc, exc.__cause__))
        return
    try:
        mailbox.post(("ok", hosted.handle))
        while not mailbox.stopped(10.0):
            pass  # each wait is bounded: a lost test leaves its client to stop this job
    finally:
        hosted.shutdown()
