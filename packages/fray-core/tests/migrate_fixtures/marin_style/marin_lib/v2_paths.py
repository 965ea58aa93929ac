# ruff: noqa
"""Imports through the fray.v2 paths of the predecessor."""

import fray.v2.local_backend as local_backend
from fray.v2 import ResourceConfig, current_client
from fray.v2.client import current_client as v2_current_client
from fray.v2.ray_backend.tpu import run_on_pod
from fray.v2.task_info import get_task_index
from fray.v2.types import TpuConfig, get_tpu_topology


def train() -> int:
    return get_task_index()


def flexible_slices() -> list[int]:
    return run_on_pod(train, "v5p-16", num_slices=[1, 2])


def defaults() -> tuple[object, ...]:
    client = current_client() or v2_current_client() or local_backend.LocalClient()
    return client, ResourceConfig(), TpuConfig(variant="v4-8"), get_tpu_topology("v4-8")
