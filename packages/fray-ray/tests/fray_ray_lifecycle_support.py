"""A driver for ``test_ray_lifecycle``: run as ``python -m fray_ray_lifecycle_support`` with
``FRAY_CLIENT_SPEC=ray`` and no Ray around, it lets a short-lived thread start Ray through
``fray.current_client()``, uses it after that thread is gone, then shuts the client down
with a job, an actor call and a pending actor in flight, and prints what it saw as JSON.
(Ray's workers import this module's functions by name.)"""

from __future__ import annotations

import json
import threading
import time
from typing import Any


def add(a: int, b: int) -> int:
    return a + b


def sleep_for(seconds: float) -> None:
    time.sleep(seconds)


class Slow:
    def wait(self, seconds: float) -> str:
        time.sleep(seconds)
        return "waited"


def main() -> dict[str, Any]:
    import ray

    import fray
    from fray import Entrypoint, JobRequest, JobStatus, ResourceConfig

    seen: dict[str, Any] = {}
    found: list[Any] = []
    starter = threading.Thread(target=lambda: found.append(fray.current_client()))
    starter.start()
    starter.join()
    client = found[0]
    seen["client"] = type(client).__name__
    job = client.submit(JobRequest(name="after", entrypoint=Entrypoint.from_callable(add, (1, 2))))
    seen["after_the_thread_ended"] = job.result(timeout=300)

    slow = client.create_actor(Slow, name="slow")
    in_flight = slow.wait.remote(600)
    running = client.submit(
        JobRequest(name="long", entrypoint=Entrypoint.from_callable(sleep_for, (600,)))
    )
    deadline = time.monotonic() + 120
    while running.status() is not JobStatus.RUNNING and time.monotonic() < deadline:
        time.sleep(0.05)  # polls a bounded wait
    cpus = int(ray.cluster_resources()["CPU"])  # the job holds one of them
    waiting = client.create_actor_group(
        Slow, name="waiting", count=1, resources=ResourceConfig(cpu=cpus)
    )
    seen["pending_actor"] = waiting.statuses()[0].value
    start = time.monotonic()
    client.shutdown()
    seen["shutdown_s"] = time.monotonic() - start
    seen["job_status"] = running.status().value
    try:
        in_flight.result(timeout=30)
    except Exception as exc:
        seen["future_error"] = f"{type(exc).__module__}.{type(exc).__name__}"
    try:
        slow.wait(0)
    except Exception as exc:
        seen["call_error"] = f"{type(exc).__module__}.{type(exc).__name__}"
    seen["ray_initialized_after"] = ray.is_initialized()
    return seen


if __name__ == "__main__":
    print("RESULT " + json.dumps(main()), flush=True)
