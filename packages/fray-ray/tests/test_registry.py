"""The job registry as a plain class (no Ray): what it keeps of finished jobs, and replicas
saying they started."""

from __future__ import annotations

import asyncio
from typing import Any

from fray_ray._registry import JobRegistry


class Registry:
    """The registry's async methods, called one at a time as the actor would."""

    def __init__(self, limit: int) -> None:
        self._registry = JobRegistry(limit=limit)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        method = getattr(self._registry, name)
        return lambda *args: asyncio.run(method(*args))


def test_keeps_the_last_finished_jobs_whole_and_drops_older_ones() -> None:
    registry = Registry(limit=2)
    registry.put("p", {"status": "running"})
    for name in ("p/a", "p/b", "p/c"):
        registry.put(name, {"status": "running", "parent": "p"})
        registry.append_logs(name, [f"{name} started"])
    registry.put("p/a/x", {"status": "running", "parent": "p/a"})
    assert registry.children("p") == ["p/a", "p/b", "p/c"]

    registry.finish("p/a", {"status": "succeeded"}, "A", ["a1", "a2"])
    registry.finish("p/b", {"status": "failed", "error": "boom"}, None, ["b1"])
    assert registry.result("p/a") == (True, "A")
    registry.put("p/c", {"status": "stopped"})  # a third finished job: "p/a" goes
    assert registry.get("p/a") is None
    assert registry.result("p/a") == (False, None)
    assert registry.logs("p/a") == []
    assert registry.children("p") == ["p/b", "p/c"]
    assert registry.children("p/a") == []
    # Unfinished jobs always stay, whatever finished after them.
    assert registry.get("p") is not None and registry.get("p/a/x") is not None
    assert registry.get("p/b") == {
        "job_id": "p/b",
        "status": "failed",
        "error": "boom",
        "parent": "p",
        "children": (),
    }
    assert registry.logs("p/b") == ["b1"]
    assert [r["job_id"] for r in registry.list()] == ["p", "p/b", "p/c", "p/a/x"]


def test_a_late_batch_of_output_does_not_change_a_finished_job() -> None:
    registry = Registry(limit=10)
    registry.append_logs("j", ["one"])
    registry.finish("j", {"status": "succeeded"}, 1, ["one", "two"])
    registry.append_logs("j", ["two"])  # the worker's flusher, after the end
    assert registry.logs("j") == ["one", "two"]


def test_ended_drops_the_streamed_output_of_a_driver_job() -> None:
    registry = Registry(limit=10)
    registry.append_logs("driver-job", ["streamed"])
    assert registry.logs("driver-job") == ["streamed"]
    registry.ended("driver-job")
    assert registry.logs("driver-job") == []
    registry.append_logs("driver-job", ["late"])
    assert registry.logs("driver-job") == []
    assert registry.get("driver-job") is None


def test_a_stop_request_finishes_a_record_and_counts_against_the_limit() -> None:
    registry = Registry(limit=1)
    registry.put("a", {"status": "running"})
    registry.put("b", {"status": "running"})
    registry.request_stop(["a"])
    assert registry.get("a")["status"] == "stopped"  # pyright: ignore[reportOptionalSubscript]
    registry.request_stop(["b"])
    assert registry.get("a") is None
    assert registry.get("b")["status"] == "stopped"  # pyright: ignore[reportOptionalSubscript]


def test_waiting_for_replicas_to_start_answers_once_they_have_or_at_the_timeout() -> None:
    registry = JobRegistry(limit=10)

    async def scenario() -> tuple[list[int], list[int], list[str]]:
        waiting = asyncio.ensure_future(registry.wait_placed("job#1", 2, 30.0))
        await registry.placed("job#1", 1)
        await asyncio.sleep(0)  # the waiter looks, and waits on
        assert not waiting.done()
        await registry.placed("job#1", 0)
        both = await waiting
        late = await registry.wait_placed("job#2", 1, 0.05)  # nobody says it started
        return both, late, await registry.wait_placed("job#1", 0, 0.0)  # read, no waiting

    both, late, read = asyncio.run(scenario())
    assert (both, late, read) == ([0, 1], [], [0, 1])
