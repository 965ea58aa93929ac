"""The job registry as a plain class (no Ray): what it keeps of finished jobs."""

from __future__ import annotations

from fray_ray._registry import JobRegistry


def test_keeps_the_last_finished_jobs_whole_and_drops_older_ones() -> None:
    registry = JobRegistry(limit=2)
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
    registry = JobRegistry(limit=10)
    registry.append_logs("j", ["one"])
    registry.finish("j", {"status": "succeeded"}, 1, ["one", "two"])
    registry.append_logs("j", ["two"])  # the worker's flusher, after the end
    assert registry.logs("j") == ["one", "two"]


def test_ended_drops_the_streamed_output_of_a_driver_job() -> None:
    registry = JobRegistry(limit=10)
    registry.append_logs("driver-job", ["streamed"])
    assert registry.logs("driver-job") == ["streamed"]
    registry.ended("driver-job")
    assert registry.logs("driver-job") == []
    registry.append_logs("driver-job", ["late"])
    assert registry.logs("driver-job") == []
    assert registry.get("driver-job") is None


def test_a_stop_request_finishes_a_record_and_counts_against_the_limit() -> None:
    registry = JobRegistry(limit=1)
    registry.put("a", {"status": "running"})
    registry.put("b", {"status": "running"})
    registry.request_stop(["a"])
    assert registry.get("a")["status"] == "stopped"  # pyright: ignore[reportOptionalSubscript]
    assert registry.stop_requested("a")
    registry.request_stop(["b"])
    assert registry.get("a") is None and not registry.stop_requested("a")
    assert registry.get("b")["status"] == "stopped"  # pyright: ignore[reportOptionalSubscript]
