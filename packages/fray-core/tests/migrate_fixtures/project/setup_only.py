# ruff: noqa
"""Ray is only set up and torn down here: the whole import can go."""

import os

import ray

ADDRESS = os.environ.get("RAY_ADDRESS", "auto")


def main() -> None:
    ray.init(address=ADDRESS)
    print("hello")
    ray.shutdown()
