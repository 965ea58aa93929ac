# ruff: noqa
"""TPU work started through the predecessor's Ray TPU runners."""

import ray
from fray.cluster.ray.tpu import run_on_pod_multislice
from fray.v1.cluster.ray.tpu import run_on_pod_ray
from levanter.infra import ray_tpu


def train_step() -> int:
    return 0


def launch(config) -> list[int]:
    main = run_on_pod_ray.remote(
        train_step, config.tpu_type, num_slices=config.slices, max_retries_failure=3
    )
    probe = ray_tpu.run_on_pod_ray.remote(train_step, "v4-8")
    return ray.get([main, probe])


def smoke_test() -> list[int]:
    return run_on_pod_multislice(train_step, "v5litepod-16", 2)
