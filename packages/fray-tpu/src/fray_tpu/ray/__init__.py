"""TPU gang orchestration on Ray (needs ``fray-tpu[ray]``).

``run_on_pod(fn, "v5p-64", num_slices=2)`` runs ``fn`` on every VM of two v5p-64 slices and
returns the per-host results; ``launch_on_pod`` and ``submit_tpu_job`` return a
``fray.JobHandle`` at once. ``RayClient.submit`` runs TPU requests as the same kind of job
(:mod:`fray_tpu.ray.gang`, built on fray-ray); how Ray's exceptions read is
:mod:`fray_ray.errors`. ``TpuJobHandle`` is fray-ray's job handle (its gang methods ask the
job's kind). The
entry points are imported on first use: processes that only run a gang's parts (its host and
hub actors) skip loading them.
"""

import importlib
import typing

from fray_ray import RayJobHandle as TpuJobHandle
from fray_tpu._errors import TpuJobFailedError, TpuSchedulingError

if typing.TYPE_CHECKING:
    from fray_tpu.ray._launch import (
        launch_on_pod,
        run_on_pod,
        run_on_pod_multislice,
        run_on_pod_multislice_resumable,
        run_on_pod_resumable,
        submit_tpu_job,
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


def __getattr__(name: str) -> typing.Any:
    if name in __all__:  # the entry points, from fray_tpu.ray._launch
        value = globals()[name] = getattr(importlib.import_module(f"{__name__}._launch"), name)
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
