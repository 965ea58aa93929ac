"""What a Fray :class:`~fray.EnvironmentConfig` becomes in Ray's ``runtime_env``: one mapping
for every Fray job on Ray (fray-ray's tasks and command jobs, and the TPU gangs here)."""

from __future__ import annotations

from typing import Any

from fray import EnvironmentConfig

__all__ = ["environment_runtime_env"]


def environment_runtime_env(environment: EnvironmentConfig | None) -> dict[str, Any]:
    """``pip_packages``, ``workspace`` and ``docker_image`` as Ray's ``pip``,
    ``working_dir`` and ``image_uri`` (env vars are the caller's: each layer sets them its
    own way). What Ray cannot honour (``extras``) is refused before this, by Ray's capability
    table (``fray.backend.capabilities_of("ray")``)."""
    env: dict[str, Any] = {}
    if environment is None:
        return env
    if environment.pip_packages:
        env["pip"] = list(environment.pip_packages)
    if environment.workspace is not None:
        env["working_dir"] = environment.workspace
    if environment.docker_image is not None:
        env["image_uri"] = environment.docker_image
    return env
