"""Requests at the edges of what backends take: one or more for every refusal in every
backend's capability table (``fray.backend.capabilities_of``).

The conformance suite submits each one a backend's table refuses and expects that exact
refusal at submit time; fray-testing's own tests check that every limit of every table is
reached by one of them.
"""

from __future__ import annotations

import sys

from fray import Entrypoint, EnvironmentConfig, JobRequest, ResourceConfig
from fray_testing.conformance import entrypoints as ep

__all__ = ["requests_at_the_limits", "resources_at_the_limits"]


def _job(resources: ResourceConfig | None = None, **fields: object) -> JobRequest:
    return JobRequest(
        name="at-the-limit",
        entrypoint=Entrypoint.from_callable(ep.add, (1, 2)),
        resources=resources or ResourceConfig(),
        **fields,  # pyright: ignore[reportArgumentType]
    )


def _command(resources: ResourceConfig | None = None, **fields: object) -> JobRequest:
    return JobRequest(
        name="at-the-limit",
        entrypoint=Entrypoint.from_command(sys.executable, "-c", "pass"),
        resources=resources or ResourceConfig(),
        **fields,  # pyright: ignore[reportArgumentType]
    )


def resources_at_the_limits() -> list[ResourceConfig]:
    """Resources some backend refuses for jobs and actors alike."""
    return [
        ResourceConfig(disk="100g"),
        ResourceConfig.with_tpu(["v4-8", "v5p-8"]),
    ]


def requests_at_the_limits() -> list[JobRequest]:
    """Job requests some backend refuses (each also valid on its own terms)."""
    tpu = ResourceConfig.with_tpu("v4-8")
    return [
        *(_job(resources) for resources in resources_at_the_limits()),
        _job(processes_per_task=2),
        _job(isolation="thread"),
        _command(isolation="thread"),
        _job(isolation="thread", environment=EnvironmentConfig(env_vars={"A": "1"})),
        _job(tpu, isolation="thread"),
        _job(isolation="thread", environment=EnvironmentConfig(secrets={"API_TOKEN": "t0ken"})),
        _job(environment=EnvironmentConfig(secrets={"API_TOKEN": "t0ken"})),
        _job(environment=EnvironmentConfig(secret_behavior="isolate")),
        _job(environment=EnvironmentConfig(docker_image="python:3.11")),
        _job(environment=EnvironmentConfig(extras=("test",))),
        _job(environment=EnvironmentConfig(workspace=".")),
        _job(
            ResourceConfig(image="python:3.12"),
            environment=EnvironmentConfig(docker_image="python:3.11"),
        ),
        _job(ResourceConfig.with_tpu("v4-8", regions=["us-central2"])),
        _job(ResourceConfig.with_tpu("v4-8", zone="us-central2-b")),
        _job(ResourceConfig.with_tpu("v4-8", preemptible=False)),
        _command(ResourceConfig(regions=("us-central1",))),
        _command(ResourceConfig(zone="us-central1-a")),
        _command(ResourceConfig.with_gpu("H100", device_alternatives=("H200",))),
        _command(scheduling_timeout=60.0),
    ]
