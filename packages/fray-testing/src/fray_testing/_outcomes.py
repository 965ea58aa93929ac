"""Scripted outcomes: what a :class:`~fray_testing.FakeClient` job does when submitted.

An outcome describes the job's attempts, in order. Outcomes that end after some attempts
(``Fail(times=2)``, ``Preempt(3)``, ``Delay(...)``) hand over to ``then``; ``then=None``
means the client's default (run the callable in-process, or succeed without running it).
Retry budgets of the request still apply: a scripted failure or preemption consumes an
attempt exactly as a real one would.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
from collections.abc import Iterator
from typing import Any, Literal

from fray.errors import InvalidRequestError

__all__ = ["Delay", "Fail", "Hang", "Outcome", "Preempt", "Run", "SimulatedPreemption", "Succeed"]


class SimulatedPreemption(Exception):
    """Raise inside a job that FakeClient runs in-process to have that attempt preempted.

    The attempt then counts against ``max_retries_preemption`` instead of
    ``max_retries_failure``, as a lost node would on a real cluster.
    """


StepKind = Literal["run", "succeed", "fail", "preempt", "hang", "delay"]


@dataclasses.dataclass(frozen=True)
class Step:
    """One attempt (or, for ``delay``, a pause before the next one) of a scripted job."""

    kind: StepKind
    value: Any = None
    logs: tuple[str, ...] = ()


def _check_times(owner: str, times: int | None) -> None:
    if times is not None and (isinstance(times, bool) or not isinstance(times, int) or times < 1):
        raise InvalidRequestError.for_field(
            f"{owner}.times", times, "must be an integer >= 1, or None for every attempt"
        )


class Outcome:
    """Base class of scripted outcomes."""

    def step(self) -> Step:
        """What each attempt does, for an outcome whose attempts are all alike."""
        raise NotImplementedError

    @functools.cached_property
    def _steps(self) -> Iterator[Step]:
        return itertools.repeat(self.step())

    def steps(self, default: Outcome) -> Iterator[Step]:
        """The job's attempts, one step each; never exhausted (the last step repeats). By
        default :meth:`step` repeated: one iterator, made once and shared by every job this
        outcome scripts (a repeat is never used up), so such a job holds none of its own
        (the benchmark row "fake: 10,000 jobs submitted + wait_all, per job")."""
        return self._steps


@dataclasses.dataclass(frozen=True)
class Run(Outcome):
    """Run the job's callable in-process; its return value or exception is the outcome.

    A command entrypoint is not run: the job succeeds without output.

    Attributes:
        logs: Lines added to the job's logs before each attempt runs.
    """

    logs: tuple[str, ...] = ()

    def step(self) -> Step:
        """Every attempt runs the callable."""
        return Step("run", logs=tuple(self.logs))


@dataclasses.dataclass(frozen=True)
class Succeed(Outcome):
    """Succeed at once without running anything; ``result()`` returns ``value``.

    Attributes:
        value: What ``result()`` returns (as given, also for jobs with several replicas).
        logs: Lines the job's logs show.
    """

    value: Any = None
    logs: tuple[str, ...] = ()

    def step(self) -> Step:
        """One attempt, which succeeds."""
        return Step("succeed", self.value, tuple(self.logs))


@dataclasses.dataclass(frozen=True)
class Fail(Outcome):
    """Fail attempts with ``error`` (the user's exception, chained to ``JobFailedError``).

    Attributes:
        error: An exception instance, an exception class (instantiated without arguments),
            or a message for a ``RuntimeError``.
        times: Attempts that fail before ``then`` takes over; ``None``: every attempt.
        then: What later attempts do; ``None``: the client's default.
        logs: Lines added to the logs by each failing attempt.
    """

    error: BaseException | type[BaseException] | str = "scripted failure"
    times: int | None = None
    then: Outcome | None = None
    logs: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        _check_times("Fail", self.times)

    def make_error(self) -> BaseException:
        """The exception one failing attempt raises."""
        if isinstance(self.error, BaseException):
            return self.error
        if isinstance(self.error, str):
            return RuntimeError(self.error)
        return self.error()

    def steps(self, default: Outcome) -> Iterator[Step]:
        """``times`` failing attempts, then ``then``'s."""
        for _ in itertools.repeat(None) if self.times is None else range(self.times):
            yield Step("fail", self.make_error(), tuple(self.logs))
        yield from (self.then or default).steps(default)


@dataclasses.dataclass(frozen=True)
class Preempt(Outcome):
    """Preempt attempts (they count against ``max_retries_preemption``).

    Attributes:
        times: Attempts preempted before ``then`` takes over; ``None``: every attempt.
        then: What later attempts do; ``None``: the client's default.
        logs: Lines added to the logs by each preempted attempt.
    """

    times: int | None = 1
    then: Outcome | None = None
    logs: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        _check_times("Preempt", self.times)

    def steps(self, default: Outcome) -> Iterator[Step]:
        """``times`` preempted attempts, then ``then``'s."""
        step = Step("preempt", "preempted (scripted by FakeClient)", tuple(self.logs))
        yield from itertools.repeat(step) if self.times is None else [step] * self.times
        yield from (self.then or default).steps(default)


@dataclasses.dataclass(frozen=True)
class Hang(Outcome):
    """Keep the job unfinished until it is terminated (or its client shut down).

    Attributes:
        pending: Stay PENDING (never scheduled) instead of RUNNING.
        logs: Lines the logs show while it hangs.
    """

    pending: bool = False
    logs: tuple[str, ...] = ()

    def step(self) -> Step:
        """One attempt that never ends."""
        return Step("hang", self.pending, tuple(self.logs))


@dataclasses.dataclass(frozen=True)
class Delay(Outcome):
    """Stay RUNNING for ``seconds``, then continue with ``then``.

    The job moves on from Fray's timer thread (one for every job) when the delay is over.

    Attributes:
        seconds: How long the first attempt runs before its outcome applies.
        then: What happens after the delay; ``None``: the client's default.
    """

    seconds: float
    then: Outcome | None = None

    def __post_init__(self) -> None:
        if (
            isinstance(self.seconds, bool)
            or not isinstance(self.seconds, int | float)
            or not (self.seconds >= 0)
        ):
            raise InvalidRequestError.for_field("Delay.seconds", self.seconds, "must be >= 0")

    def steps(self, default: Outcome) -> Iterator[Step]:
        """A pause, then ``then``'s attempts."""
        yield Step("delay", float(self.seconds))
        yield from (self.then or default).steps(default)
