# ruff: noqa
import ray
from ray.util import ActorPool


def add(a: int, b: int) -> int:
    return a + b
