"""Translation at the Ray boundary: Fray requests to Ray options, Ray errors to Fray's.

Everything in a :class:`~fray.ResourceConfig` either becomes a Ray option or is rejected with
an :class:`~fray.errors.InvalidRequestError` by :data:`RAY`, Ray's capability table (checked
before anything here runs); nothing is dropped on the way. Which Ray errors are preemptions
is decided in one place for every Fray layer on Ray, :mod:`fray_tpu.ray.errors`.
"""

from __future__ import annotations

from typing import Any

from fray import EnvironmentConfig, GpuConfig, JobRequest, ResourceConfig, TpuConfig
from fray.backend import capabilities_of
from fray.errors import InvalidRequestError
from fray_tpu.ray.runtime_env import environment_runtime_env

__all__ = [
    "HEAD_NODE_RESOURCE",
    "RAY",
    "REGION_LABEL",
    "ZONE_LABEL",
    "actor_options",
    "command_options",
    "runtime_env",
    "task_options",
]

RAY = capabilities_of("ray")
"""What Ray refuses in a request (fray-core declares each backend's table once)."""

HEAD_NODE_RESOURCE = "head_node"
"""The custom resource that marks the head node; ``preemptible=False`` work asks for it."""

REGION_LABEL = "ray.io/availability-region"
ZONE_LABEL = "ray.io/availability-zone"
ACCELERATOR_LABEL = "ray.io/accelerator-type"

# A tiny share of the head-node resource: pins the work there without using it up.
_HEAD_SHARE = 0.001

# Fray's GPU names -> Ray's accelerator_type names (ray.util.accelerators constants).
_RAY_GPU_NAMES = {
    "A100": "A100",
    "A100-40G": "A100-40G",
    "A100-80G": "A100-80G",
    "H100": "H100",
    "H200": "H200",
    "B200": "B200",
    "L4": "L4",
    "T4": "T4",
    "V100": "V100",
    "A10G": "A10G",
    "L40S": "L40S",
}


def _ray_gpu_name(variant: str) -> str:
    return _RAY_GPU_NAMES.get(variant, variant)


def _scheduling(resources: ResourceConfig, field: str) -> dict[str, Any]:
    """Options shared by tasks, actors: GPUs, custom resources, placement labels."""
    options: dict[str, Any] = {}
    custom: dict[str, float] = {}
    labels: dict[str, str] = {}
    device = resources.device
    if isinstance(device, GpuConfig):
        options["num_gpus"] = device.count
        if device.variant != "auto":
            options["accelerator_type"] = _ray_gpu_name(device.variant)
    elif isinstance(device, TpuConfig):  # routed to fray_tpu before we get here
        raise InvalidRequestError.for_field(
            f"{field}.device", device.variant, "TPU requests run through fray_tpu gangs"
        )
    if resources.device_alternatives and isinstance(device, GpuConfig):
        names = [_ray_gpu_name(v) for v in (device.variant, *resources.device_alternatives)]
        options.pop("accelerator_type", None)
        labels[ACCELERATOR_LABEL] = f"in({','.join(names)})"
    if not resources.preemptible:
        custom[HEAD_NODE_RESOURCE] = _HEAD_SHARE
    if resources.regions:
        labels[REGION_LABEL] = f"in({','.join(resources.regions)})"
    if resources.zone is not None:
        labels[ZONE_LABEL] = resources.zone
    if custom:
        options["resources"] = custom
    if labels:
        options["label_selector"] = labels
    return options


def task_options(request: JobRequest) -> tuple[dict[str, Any], dict[str, str]]:
    """``remote_function.options(...)`` for one replica of a callable job, and the env vars
    the job wrapper sets itself.

    The user's env vars go into Ray's runtime_env (the worker process starts with them).
    When there are none, the device defaults (e.g. ``JAX_PLATFORMS``) are set by the
    wrapper for the duration of the job instead: a runtime_env per task costs a fresh
    worker pool and about half a millisecond per call.
    """
    resources = request.resources
    options = _scheduling(resources, "JobRequest.resources")
    options["num_cpus"] = resources.cpu
    if resources.ram_bytes:  # ram="0": no memory reservation, like a plain Ray task
        options["memory"] = resources.ram_bytes
    user_env = request.environment.env_vars if request.environment is not None else {}
    env = runtime_env(request.environment, request.env_vars if user_env else {})
    if env:
        options["runtime_env"] = env
    return options, ({} if user_env else dict(request.env_vars))


def command_options(request: JobRequest) -> dict[str, Any]:
    """``JobSubmissionClient.submit_job`` keyword arguments (except the entrypoint)."""
    resources = request.resources
    scheduling = _scheduling(resources, "JobRequest.resources")  # no labels: RAY refuses them
    options: dict[str, Any] = {"entrypoint_num_cpus": resources.cpu}
    options["entrypoint_memory"] = resources.ram_bytes
    if "num_gpus" in scheduling:
        options["entrypoint_num_gpus"] = scheduling["num_gpus"]
        if "accelerator_type" in scheduling:
            custom = dict(scheduling.get("resources", {}))
            custom[f"accelerator_type:{scheduling['accelerator_type']}"] = _HEAD_SHARE
            scheduling["resources"] = custom
    if "resources" in scheduling:
        options["entrypoint_resources"] = scheduling["resources"]
    return options


def actor_options(resources: ResourceConfig | None) -> dict[str, Any]:
    """``ActorClass.options(...)`` for an actor. ``None`` reserves nothing (Ray's default for
    a running actor is zero CPUs)."""
    if resources is None:
        return {"num_cpus": 0}
    options = _scheduling(resources, "resources")
    options["num_cpus"] = resources.cpu
    if resources.ram_bytes:  # ram="0": no memory reservation, like a plain Ray task
        options["memory"] = resources.ram_bytes
    return options


def runtime_env(environment: EnvironmentConfig | None, env_vars: dict[str, str]) -> dict[str, Any]:
    """Ray's runtime_env for an :class:`~fray.EnvironmentConfig` (env vars already merged)."""
    env = environment_runtime_env(environment)
    if env_vars:
        env["env_vars"] = dict(env_vars)
    return env
