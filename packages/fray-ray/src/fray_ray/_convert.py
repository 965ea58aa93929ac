"""Translation at the Ray boundary: Fray requests to Ray options, Ray errors to Fray's.

Everything in a :class:`~fray.ResourceConfig` either becomes a Ray option or is rejected with
an :class:`~fray.errors.InvalidRequestError` by :data:`RAY`, Ray's capability table (checked
before anything here runs); nothing is dropped on the way. Which Ray errors are preemptions
is decided in one place for every Fray layer on Ray, :mod:`fray_ray.errors`.
"""

# pyright: standard
# Ray is untyped: this module is an adapter over it.

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from fray import EnvironmentConfig, GpuConfig, JobRequest, ResourceConfig, TpuConfig
from fray.backend import capabilities_of
from fray.errors import InvalidRequestError

RAY = capabilities_of("ray")
"""What Ray refuses in a request (fray-core declares each backend's table once)."""

HEAD_NODE_RESOURCE = "head_node"
"""The custom resource that marks the head node; ``preemptible=False`` work asks for it."""

DISK_RESOURCE = "disk"
"""The custom resource (in bytes) that reserves ``ResourceConfig.disk`` where nodes have it."""

REGION_LABEL = "ray.io/availability-region"
ZONE_LABEL = "ray.io/availability-zone"
ACCELERATOR_LABEL = "ray.io/accelerator-type"

# A tiny share of the head-node resource: pins the work there without using it up.
_HEAD_SHARE = 0.001

_GIB = float(1 << 30)
_OPTION_NAMES = {"num_cpus": "CPU", "memory": "memory", "num_gpus": "GPU"}


@dataclass(frozen=True)
class Ask:
    """What one replica asks of a node, in Ray's terms: resources and label selectors."""

    resources: Mapping[str, float]
    labels: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def of(cls, options: Mapping[str, Any]) -> Ask:
        """From task options (``num_cpus``, ``memory``, ``num_gpus``, ``accelerator_type``,
        ``resources``, ``label_selector``) or Jobs API ones (``entrypoint_`` prefixed)."""
        resources: dict[str, float] = {}
        for key, value in options.items():
            name = key.removeprefix("entrypoint_")
            if name in _OPTION_NAMES and value:
                resources[_OPTION_NAMES[name]] = float(value)
            elif name == "accelerator_type":
                resources[f"accelerator_type:{value}"] = 0.001
            elif name == "resources":
                resources.update({k: float(v) for k, v in value.items()})
        return cls(resources, dict(options.get("label_selector") or {}))

    def describe(self) -> str:
        """``CPU=64, memory=1 GiB, GPU=1, accelerator_type:A100`` (and the labels)."""
        parts = [amount(name, value) for name, value in self.resources.items()]
        parts += [f"label {key}={value}" for key, value in self.labels.items()]
        return ", ".join(parts) or "nothing"

    def fits(self, totals: Mapping[str, float], labels: Mapping[str, str]) -> bool:
        """Whether a node with these resources (totals or free) and labels could take it."""
        return all(totals.get(k, 0.0) >= v - 1e-9 for k, v in self.resources.items()) and all(
            label_matches(labels.get(key), selector) for key, selector in self.labels.items()
        )


def amount(name: str, value: float) -> str:
    """One resource amount as a pending reason says it (``memory=1 GiB``, ``CPU=4``)."""
    if name.startswith("accelerator_type:"):
        return name
    if name == "memory":
        return f"memory={value / _GIB:.3g} GiB"
    return f"{name}={value:g}"


def label_matches(value: str | None, selector: str) -> bool:
    """Ray's label selector syntax: ``v``, ``!v``, ``in(a,b)``, ``!in(a,b)``."""
    body = selector.removeprefix("!")
    if body.startswith("in(") and body.endswith(")"):
        hit = value in {v.strip() for v in body[3:-1].split(",")}
    else:
        hit = value == body
    return hit != selector.startswith("!")


def _scheduling(resources: ResourceConfig, disk: bool) -> dict[str, Any]:
    """Ray options for one replica or actor: CPUs, memory, GPUs, custom resources
    (``disk``: reserve the disk, as :data:`DISK_RESOURCE`), placement labels."""
    options: dict[str, Any] = {"num_cpus": resources.cpu}
    if resources.ram_bytes:  # ram="0": no memory reservation, like a plain Ray task
        options["memory"] = resources.ram_bytes
    custom = {DISK_RESOURCE: float(resources.disk_bytes)} if disk else {}
    labels: dict[str, str] = {}
    device = resources.device
    if isinstance(device, GpuConfig):  # Fray's GPU names are Ray's accelerator types
        options["num_gpus"] = device.count
        if resources.device_alternatives:
            names = ",".join((device.variant, *resources.device_alternatives))
            labels[ACCELERATOR_LABEL] = f"in({names})"
        elif device.variant != "auto":
            options["accelerator_type"] = device.variant
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


def task_options(
    request: JobRequest, *, disk: bool = False, own_workspace: bool = False
) -> tuple[dict[str, Any], dict[str, str]]:
    """``remote_function.options(...)`` for one replica of a callable job, and the env vars
    the job wrapper sets itself. ``disk``: reserve the disk; ``own_workspace``: the
    workspace is the driver's own code (no task-level ``working_dir``).

    The user's env vars go into Ray's runtime_env (the worker process starts with them).
    When there are none, the device defaults (e.g. ``JAX_PLATFORMS``) are set by the
    wrapper for the duration of the job instead: a runtime_env per task costs a fresh
    worker pool and about half a millisecond per call.
    """
    options = _scheduling(request.resources, disk)
    user_env = request.environment.env_vars if request.environment is not None else {}
    env = environment_runtime_env(request.environment, request.env_vars if user_env else None)
    if own_workspace:
        env.pop("working_dir", None)
    if env:
        options["runtime_env"] = env
    return options, ({} if user_env else dict(request.env_vars))


def command_options(request: JobRequest, *, disk: bool = False) -> dict[str, Any]:
    """``JobSubmissionClient.submit_job`` keyword arguments (except the entrypoint and the
    runtime env): a task's options with the ``entrypoint_`` prefix (no labels: :data:`RAY`
    refuses them for commands); ``disk``: reserve the disk."""
    options = _scheduling(request.resources, disk)
    accelerator = options.pop("accelerator_type", None)
    if accelerator is not None:  # the Jobs API has no accelerator_type: its resource instead
        custom = options.setdefault("resources", {})
        custom[f"accelerator_type:{accelerator}"] = _HEAD_SHARE
    return {f"entrypoint_{name}": value for name, value in options.items()}


def actor_options(resources: ResourceConfig | None, *, disk: bool = False) -> dict[str, Any]:
    """``ActorClass.options(...)`` for an actor (``disk``: reserve its disk). ``None``
    reserves nothing (Ray's default for a running actor is zero CPUs).

    Raises:
        InvalidRequestError: A TPU device (TPUs on Ray are fray-tpu's gang jobs).
    """
    if resources is None:
        return {"num_cpus": 0}
    if isinstance(resources.device, TpuConfig):
        raise InvalidRequestError.for_field(
            "resources.device", resources.device.variant, "TPU requests run through fray_tpu gangs"
        )
    return _scheduling(resources, disk)


def environment_runtime_env(
    environment: EnvironmentConfig | None, env_vars: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """``pip_packages``, ``workspace`` and ``docker_image`` as Ray's ``pip``,
    ``working_dir`` and ``image_uri``: one mapping for every Fray job on Ray (tasks, command
    jobs and fray-tpu's gangs), with ``env_vars`` (already merged) as Ray's ``env_vars``
    where a caller sets them so (each caller sets env vars its own way). What Ray cannot
    honour (``extras``) is refused before this, by :data:`RAY`."""
    env: dict[str, Any] = {"env_vars": dict(env_vars)} if env_vars else {}
    if environment is None:
        return env
    if environment.pip_packages:
        env["pip"] = list(environment.pip_packages)
    if environment.workspace is not None:
        env["working_dir"] = environment.workspace
    if environment.docker_image is not None:
        env["image_uri"] = environment.docker_image
    return env


runtime_env = environment_runtime_env
"""The name ``fray_ray._client`` imports (the same function)."""
