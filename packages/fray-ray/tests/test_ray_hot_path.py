"""What the per-job shortcuts of a callable job on Ray (issue 42) must not change for a user:
requests of one shape share what is worked out once per shape, yet each job runs its own
function with the arguments it had at its submission, and a shape with other resources
asks for them."""

# pyright: standard
# Ray is untyped: this module is an adapter over it.

from __future__ import annotations

from collections.abc import Iterator

import pytest

from fray import Entrypoint, JobRequest, ResourceConfig, wait_all
from fray_ray import RayClient

pytest.importorskip("ray")


@pytest.fixture
def client(ray_cluster: str) -> Iterator[RayClient]:
    client = RayClient(namespace="hot-path", echo_logs=False)
    yield client
    client.shutdown()


def first() -> str:
    return "first"


def second() -> str:
    return "second"


def items(values: list[int]) -> list[int]:
    return list(values)


def cpus() -> float:
    import ray

    return ray.get_runtime_context().get_assigned_resources().get("CPU", 0.0)


def request(fn: object, *args: object, cpu: float = 0.5) -> JobRequest:
    return JobRequest(
        name="hot",
        entrypoint=Entrypoint.from_callable(fn, args=args),  # pyright: ignore[reportArgumentType]
        resources=ResourceConfig(cpu=cpu, ram="0"),
    )


def test_a_batch_of_one_shape_runs_each_job_s_own_function(client: RayClient) -> None:
    # Without arguments a function is pickled once while it is submitted again and again:
    # a job of another function in between runs that one, and the first one's after it.
    one, two = request(first), request(second)
    handles = [client.submit(r) for r in (one, one, two, one, two)]
    assert [h.result(timeout=120) for h in handles] == [
        "first",
        "first",
        "second",
        "first",
        "second",
    ]


def test_arguments_are_the_ones_a_job_had_at_its_submission(client: RayClient) -> None:
    # One request submitted twice with a list that changes in between: each job gets the
    # list as it was when it was submitted (its arguments are pickled per job).
    values = [1]
    again = request(items, values)
    before = client.submit(again)
    values.append(2)
    after = client.submit(again)
    wait_all([before, after], timeout=120)
    assert (before.result(), after.result()) == ([1], [1, 2])


def test_a_request_of_other_resources_gets_what_it_asks_for(client: RayClient) -> None:
    # Jobs of one shape share their Ray options; one asking for more CPUs gets them.
    small = [client.submit(request(cpus, cpu=0.5)) for _ in range(2)]
    large = client.submit(request(cpus, cpu=1))
    assert [h.result(timeout=120) for h in small] == [0.5, 0.5]
    assert large.result(timeout=120) == 1.0
