# ruff: noqa
"""The predecessor's current module paths: Fray serves all of them unchanged (no findings)."""

from fray.actor import ActorHandle, current_actor
from fray.client import JobHandle, wait_all
from fray.cluster import ResourceConfig as ClusterResources
from fray.current_client import current_client
from fray.device_flops import device_flops
from fray.iris_backend import FrayIrisClient
from fray.local_backend import LocalClient
from fray.types import Entrypoint, JobRequest, ResourceConfig, TpuConfig


class Tally:
    def __init__(self) -> None:
        self.total = 0

    def add(self, amount: int) -> int:
        self.total += amount
        return self.total


def peak_flops() -> float:
    return device_flops("v5p-8") or 0.0


def run(steps: list[int]) -> int:
    client = current_client()
    tally: ActorHandle = client.create_actor(Tally, name="tally")
    for step in steps:
        tally.add.remote(step).result()
    last = tally.add(0)  # a blocking call through the method: the same in Fray
    jobs: list[JobHandle] = [
        client.submit(JobRequest(name=f"step-{s}", entrypoint=Entrypoint.from_callable(print)))
        for s in steps
    ]
    wait_all(jobs)
    return last


def shapes() -> tuple[object, ...]:
    return (ClusterResources(), ResourceConfig.with_tpu("v5p-8"), TpuConfig(variant="v5p-8"))


def describe() -> str:
    return f"{LocalClient} {FrayIrisClient} {current_actor}"
