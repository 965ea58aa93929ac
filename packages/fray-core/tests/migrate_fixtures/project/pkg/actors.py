# ruff: noqa
import ray
from ray.exceptions import RayActorError


@ray.remote(max_restarts=-1, max_concurrency=4)
class Counter:
    def __init__(self) -> None:
        self.n = 0

    def incr(self) -> int:
        self.n += 1
        return self.n


def main() -> int:
    counter = Counter.remote()
    shared = Counter.options(
        name="global-counter", get_if_exists=True, lifetime="detached"
    ).remote()
    again = ray.get_actor("global-counter")
    try:
        value = ray.get(counter.incr.remote())
    except RayActorError:
        value = -1
    ray.kill(again)
    return value + ray.get(shared.incr.remote())
