# ruff: noqa
"""Zephyr-era code on the predecessor's job context."""

from fray.v1.job import get_default_job_ctx


class Cache:
    def __init__(self) -> None:
        self.items: dict[str, str] = {}


def double(x: int) -> int:
    return 2 * x


def main() -> list[int]:
    ctx = get_default_job_ctx()
    futures = [ctx.run(double, i) for i in range(4)]
    ready, _ = ctx.wait(futures, num_returns=len(futures))
    cache = ctx.create_actor(Cache, name="cache", get_if_exists=True, preemptible=False)
    return [ctx.get(f) for f in ready] + [len(str(cache))]
