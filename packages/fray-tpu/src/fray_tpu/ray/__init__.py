"""TPU gang orchestration on Ray (needs ``fray-tpu[ray]``).

``run_on_pod(fn, "v5p-64", num_slices=2)`` runs ``fn`` on every VM of two v5p-64 slices and
returns the per-host results; ``submit_tpu_job`` is the same machinery behind
``RayClient.submit`` for TPU requests, returning a ``fray.JobHandle``. Each attempt claims
whole slices (one host actor per VM), sets ``MEGASCALE_*`` from the live gang, removes
libtpu's lockfile, watches the hosts' health, tears the gang down at the first problem and
counts the attempt against the preemption or the failure budget.

How Ray's exceptions read (preemption or failure) is :mod:`fray_tpu.ray.errors`, shared with
fray-ray's ``RayClient``.

The entry points are imported on first use: the processes that only run a gang's parts (host
and state actors, which import ``fray_tpu.ray._host`` and ``fray_tpu.ray._state``) then skip
loading them, which shortens every host's start.
"""

import importlib
import typing

from fray_tpu._errors import TpuJobFailedError, TpuSchedulingError

if typing.TYPE_CHECKING:
    from fray_tpu.ray._handle import TpuJobHandle
    from fray_tpu.ray._launch import launch_on_pod, submit_tpu_job
    from fray_tpu.ray._pod import (
        run_on_pod,
        run_on_pod_multislice,
        run_on_pod_multislice_resumable,
        run_on_pod_resumable,
    )

__all__ = [
    "TpuJobFailedError",
    "TpuJobHandle",
    "TpuSchedulingError",
    "launch_on_pod",
    "run_on_pod",
    "run_on_pod_multislice",
    "run_on_pod_multislice_resumable",
    "run_on_pod_resumable",
    "submit_tpu_job",
]

_LAZY = {
    "TpuJobHandle": "_handle",
    "launch_on_pod": "_launch",
    "submit_tpu_job": "_launch",
    "run_on_pod": "_pod",
    "run_on_pod_multislice": "_pod",
    "run_on_pod_multislice_resumable": "_pod",
    "run_on_pod_resumable": "_pod",
}


def __getattr__(name: str) -> typing.Any:
    module = _LAZY.get(name)
    if module is not None:
        value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
