"""The stand-in for ``sys.stdout``/``sys.stderr`` that routes a job thread's ``print`` into its
job's output (``fray.backend._output._Router``): what reaches the real stream is whole lines,
one thread's unfinished line is never split by another's, and writes outside any job (a Ray
worker's own task-name markers, before every task) pass straight through."""

from __future__ import annotations

import io
import threading

from fray.backend._output import (
    _Router,  # pyright: ignore[reportPrivateUsage]
    restore_output,
    route_output,
)


class Sink:
    def __init__(self) -> None:
        self.texts: list[str] = []

    def write(self, text: str) -> None:
        self.texts.append(text)


def in_thread(fn: object) -> None:
    thread = threading.Thread(target=fn)  # pyright: ignore[reportArgumentType]
    thread.start()
    thread.join()


def test_whole_lines_and_empty_writes_outside_a_job_pass_straight_through() -> None:
    target = io.StringIO()
    router = _Router(target)
    assert router.write(":task_name:run\n") == len(":task_name:run\n")
    assert router.write("") == 0
    assert target.getvalue() == ":task_name:run\n"
    assert not router._partial  # pyright: ignore[reportPrivateUsage]


def test_an_unfinished_line_waits_for_its_end_and_no_other_line_splits_it() -> None:
    target = io.StringIO()
    router = _Router(target)
    router.write("part")
    router.write("")  # an empty write neither ends nor flushes the line
    in_thread(lambda: router.write("another thread's line\n"))
    assert target.getvalue() == "another thread's line\n"
    router.write("-end\nnext")
    assert target.getvalue() == "another thread's line\npart-end\n"
    router.write("\n")
    assert target.getvalue() == "another thread's line\npart-end\nnext\n"
    assert not router._partial  # pyright: ignore[reportPrivateUsage]


def test_a_routed_thread_writes_into_its_sink_and_echoes_whole_lines_only_if_asked() -> None:
    target = io.StringIO()
    router = _Router(target)
    quiet, echoed = Sink(), Sink()

    def job(sink: Sink, echo: bool) -> None:
        previous = route_output(sink, echo)
        try:
            router.write("line one\n")
            router.write("")
            router.write("two\n")
        finally:
            restore_output(previous)

    in_thread(lambda: job(quiet, False))
    assert quiet.texts == ["line one\n", "", "two\n"]
    assert target.getvalue() == ""
    in_thread(lambda: job(echoed, True))
    assert echoed.texts == ["line one\n", "", "two\n"]
    assert target.getvalue() == "line one\ntwo\n"
