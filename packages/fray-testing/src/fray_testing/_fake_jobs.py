"""A FakeClient job: a record on the seam (``fray.backend.JobRecord``) moved on by its
script, in the caller's thread, and its handle (``fray.backend.BaseJobHandle``)."""

from __future__ import annotations

import contextvars
import itertools
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from fray import JobRequest, JobStatus
from fray.backend import BaseJobHandle, JobRecord, binding, capture_into
from fray_testing._outcomes import SimulatedPreemption, Step

if TYPE_CHECKING:
    from fray_testing._fake import FakeClient

__all__ = ["FakeJob", "FakeJobHandle", "running_job"]

running_job: contextvars.ContextVar[FakeJob | None] = contextvars.ContextVar(
    "fray_testing_running_job", default=None
)
# One counter for every log line of every fake job, so lines of parents and children
# interleave exactly in the order they were written.
_line_seq = itertools.count()


class FakeJob(JobRecord):
    """A job and its life. The script's fields are guarded by ``cond``, shared by the
    client's jobs; the record's by its own lock (always taken after ``cond``, never before).

    Nothing moves a job on in the background: :meth:`advance` runs it as far as it can go
    without waiting, in the caller's thread, and is called by submit() and by every look at
    the job.
    """

    __slots__ = (
        "attempt_deadline",
        "attempt_open",
        "children",
        "client",
        "cond",
        "created",
        "delay_until",
        "driving",
        "expires_as",
        "hanging",
        "lines",
        "parent_job",
        "partial",
        "prefix",
        "steps",
        "timer",
    )

    def __init__(
        self,
        client: FakeClient,
        cond: threading.Condition,
        job_id: str,
        request: JobRequest,
        parent: FakeJob | None,
        steps: Iterator[Step],
    ) -> None:
        super().__init__(job_id, request, parent.job_id if parent is not None else None)
        self.client = client
        self.cond = cond
        self.parent_job = parent
        self.children: list[FakeJob] = []
        self.steps = steps
        self.lines: list[tuple[int, str]] = []
        self.partial = ""
        self.prefix = ""  # "[i] " while replica i of several runs (see _attempt)
        self.hanging = False
        self.driving = False
        self.attempt_open = False
        self.delay_until: float | None = None
        self.created = time.monotonic()
        # When the current attempt runs past JobRequest.timeout (monotonic), and what a wait
        # that a deadline cut short ends in ("timeout", or "unplaced" for a job that never
        # started within JobRequest.scheduling_timeout).
        self.attempt_deadline: float | None = None
        self.expires_as: str | None = None
        self.timer: threading.Timer | None = None

    # -- output ------------------------------------------------------------------------------

    def write(self, text: str) -> None:
        """Appends output; complete lines become log lines."""
        with self.cond:
            *complete, self.partial = (self.partial + text).split("\n")
            self._add([self.prefix + line for line in complete] if self.prefix else complete)

    def add_lines(self, lines: Sequence[str]) -> None:
        with self.cond:
            self.flush()
            self._add(list(lines))

    def note(self, line: str) -> None:
        self.add_lines([line])

    def flush(self) -> None:
        with self.cond:
            if self.partial:
                partial, self.partial = self.partial, ""
                self._add([self.prefix + partial])

    def _add(self, lines: list[str]) -> None:
        if lines:
            self.lines.extend((next(_line_seq), line) for line in lines)
            self.cond.notify_all()

    def log_lines(self, include_children: bool) -> list[str]:
        """The lines so far, children's interleaved in write order and prefixed by id."""
        with self.cond:
            entries = list(self.lines)
            if include_children:
                for child in self.descendants():
                    entries.extend((seq, f"[{child.job_id}] {line}") for seq, line in child.lines)
        entries.sort(key=lambda entry: entry[0])
        return [line for _seq, line in entries]

    def descendants(self) -> list[FakeJob]:
        found: list[FakeJob] = []
        stack = list(self.children)
        while stack:
            child = stack.pop(0)
            found.append(child)
            stack.extend(child.children)
        return found

    # -- life --------------------------------------------------------------------------------

    def advance(self) -> None:
        """Moves the job on as far as it goes without waiting, in this thread."""
        while True:
            expired = None
            with self.cond:
                if self.ended or self.driving or self.hanging:
                    return
                if self.delay_until is not None:
                    if time.monotonic() < self.delay_until:
                        return
                    self.delay_until = None
                    expired, self.expires_as = self.expires_as, None
                    self.attempt_open = self.attempt_open and expired is None
            if expired is not None:  # a deadline cut the wait short
                if self._settle((expired,)):
                    continue
                return
            with self.cond:
                if self.ended or self.driving or self.hanging:
                    return
                step = next(self.steps)
                never_starts = step.kind == "hang" and step.value
                if self.started_at is None and not never_starts:
                    self.mark_running()
                if not self.attempt_open and not never_starts:
                    self.begin_attempt()
                    timeout = self.request.timeout
                    self.attempt_deadline = None if timeout is None else time.monotonic() + timeout
                self.attempt_open = False
                self.add_lines(step.logs)
                if step.kind == "delay":
                    # The delay is the start of an attempt, not an attempt of its own.
                    self.attempt_open = True
                    self._wait_until(time.monotonic() + step.value, self.attempt_deadline)
                    continue
                if step.kind == "hang":
                    if never_starts:
                        limit = self.request.scheduling_timeout
                        deadline = None if limit is None else self.created + limit
                    else:
                        deadline = self.attempt_deadline
                    if deadline is not None:  # it hangs until its deadline, then ends
                        self.attempt_open = not never_starts
                        self._wait_until(deadline, deadline, "unplaced" if never_starts else None)
                        continue
                    self.hanging = True
                    self.cond.notify_all()
                    return
                self.driving = True
            try:
                outcome = self._attempt(step)
            finally:
                with self.cond:
                    self.driving = False
            deadline = self.attempt_deadline
            if deadline is not None and time.monotonic() > deadline:
                outcome = ("timeout",)  # a real backend would have stopped it by now
            if not self._settle(outcome):
                return

    def _wait_until(
        self, end: float, deadline: float | None, expires_as: str | None = None
    ) -> None:
        """Under ``cond``: the job waits until ``end``, or ends at ``deadline`` if that comes
        first (as ``expires_as``, by default a timed-out attempt)."""
        if deadline is not None and deadline <= end:
            end, self.expires_as = deadline, expires_as or "timeout"
        self.delay_until = end
        self.arm_timer()
        self.cond.notify_all()

    def _attempt(self, step: Step) -> tuple[Any, ...]:
        if step.kind == "succeed":
            return ("ok", step.value)
        if step.kind == "fail":
            return ("failed", step.value)
        if step.kind == "preempt":
            return ("preempted", step.value)
        if self.request.entrypoint.callable is None:
            return ("ok", None)
        values: list[Any] = []
        count = self.request.replica_count
        for replica in range(count):
            self.prefix = f"[{replica}] " if count > 1 else ""
            try:
                values.append(contextvars.copy_context().run(self._run_in_process))
            except SimulatedPreemption as exc:
                return ("preempted", str(exc) or "simulated preemption")
            except (KeyboardInterrupt, GeneratorExit):
                # Ctrl-C in the test run must not turn into a job failure, nor leave it hanging.
                with self.cond:
                    self.error = "interrupted"
                self.finish(JobStatus.FAILED)
                raise
            except BaseException as exc:
                return ("failed", exc)
        return ("ok", values[0] if len(values) == 1 else values)

    def _run_in_process(self) -> Any:
        entry = self.request.entrypoint
        assert entry.callable is not None
        running_job.set(self)
        with binding(client=self.client), capture_into(self, echo=False):
            try:
                return entry.callable(*entry.args, **entry.kwargs)
            finally:
                self.flush()

    def _settle(self, outcome: tuple[Any, ...]) -> bool:
        """Records an attempt's outcome; returns whether another attempt follows."""
        kind = outcome[0]
        with self.cond:
            if self.ended:  # terminated while the callable ran: its outcome no longer counts
                return False
            if kind == "ok":
                self.value = outcome[1]
                final = JobStatus.SUCCEEDED
            elif kind == "timeout":
                self.on_timeout()
                final = JobStatus.FAILED
            elif kind == "unplaced":
                self.error = self.unplaced_error("FakeClient: scripted Hang(pending=True)")
                final = JobStatus.FAILED
            elif kind == "failed":
                exc: BaseException = outcome[1]
                if self.on_failure(exc, f"{type(exc).__name__}: {exc}"):
                    return True
                final = JobStatus.FAILED
            else:
                if self.on_preemption(outcome[1]):
                    return True
                final = JobStatus.FAILED
        self.finish(final)
        return False

    def _on_end(self) -> None:
        with self.cond:
            self.hanging = False
            self.delay_until = None
            self.flush()
            if self.timer is not None:
                self.timer.cancel()
                self.timer = None
            self.client._job_finished(self.job_id)  # pyright: ignore[reportPrivateUsage]
            self.cond.notify_all()

    def _after_end(self) -> None:
        with self.cond:
            children = [child for child in self.children if not child.ended]
        for child in children:  # children do not outlive their parent
            child.terminate()

    def terminate(self) -> None:
        for child in list(self.children):
            child.terminate()
        # A callable running in another thread cannot be interrupted; the job is STOPPED
        # anyway and whatever the callable returns is dropped.
        self.finish(JobStatus.STOPPED)

    def arm_timer(self) -> None:
        """Starts a timer for a delayed job that someone waits on by callback."""
        with self.cond:
            if self.timer is not None or self.delay_until is None or not self.callbacks:
                return
            timer = threading.Timer(max(self.delay_until - time.monotonic(), 0.0), self._on_timer)
            timer.daemon = True
            self.timer = timer
            timer.start()

    def _on_timer(self) -> None:
        with self.cond:
            self.timer = None
        self.advance()
        self.arm_timer()


class FakeJobHandle(BaseJobHandle):
    """Handle to a :class:`FakeClient` job; satisfies ``fray.JobHandle``.

    Looking at the job (``status``, ``wait``, ``logs``, ``info``) first moves it on: a
    delayed job whose time has come runs then.
    """

    __slots__ = ()
    _job: FakeJob

    def _refresh(self) -> None:
        self._job.advance()

    def _poll_interval(self) -> float | None:
        wake = self._job.delay_until
        return None if wake is None else max(wake - time.monotonic(), 0.0)

    def _terminate(self) -> None:
        self._job.terminate()

    def _lines(self, include_children: bool) -> list[str]:
        return self._job.log_lines(include_children)

    def _output_done(self, include_children: bool) -> bool:
        job = self._job
        return job.ended and (not include_children or all(d.ended for d in job.descendants()))

    def _await_output(self, seen: int, include_children: bool, timeout: float) -> None:
        job = self._job
        with job.cond:
            if len(job.log_lines(include_children)) > seen or self._output_done(include_children):
                return
            wake = self._poll_interval()
            job.cond.wait(timeout if wake is None else min(timeout, wake))

    def _children(self) -> Sequence[str]:
        with self._job.cond:
            return [child.job_id for child in self._job.children]

    def add_done_callback(self, callback: Callable[[Any], None]) -> None:
        """Calls ``callback(handle)`` once the job is finished (at once if it already is).

        ``fray.wait_all`` uses this to wait without polling. For a job in a ``Delay``, this
        starts one timer thread that moves the job on when the delay ends.
        """
        job = self._job
        job.advance()
        if job.add_done_callback(lambda: callback(self)):
            job.arm_timer()
        else:
            callback(self)
