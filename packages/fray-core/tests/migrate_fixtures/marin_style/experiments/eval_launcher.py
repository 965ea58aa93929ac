# ruff: noqa
"""An evaluation launcher written against fray.v1, the Cluster API of the predecessor."""

import os

from fray.v1.cluster import (
    Entrypoint,
    EnvironmentConfig,
    JobRequest,
    ResourceConfig,
    current_cluster,
)
from fray.v1.cluster.base import TpuConfig


def launch_eval(checkpoint: str, tpu_type: str) -> None:
    def evaluate() -> None:
        print("scoring", checkpoint)

    request = JobRequest(
        name="eval-" + os.path.basename(checkpoint),
        entrypoint=Entrypoint.from_callable(evaluate),
        resources=ResourceConfig(device=TpuConfig(variant=tpu_type)),
        environment=EnvironmentConfig.create(extras=["eval"]),
        max_retries_preemption=10,
    )
    cluster = current_cluster()
    job_id = cluster.launch(request)
    cluster.wait(job_id, raise_on_failure=True)
    info = cluster.poll(job_id)
    print(info.status, info.error_message)


def launch_sweep(requests: list[JobRequest]) -> None:
    cluster = current_cluster()
    job_ids = [cluster.launch(r) for r in requests]
    cluster.wait(job_ids)
