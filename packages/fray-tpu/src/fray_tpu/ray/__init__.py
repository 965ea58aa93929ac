"""TPU gang orchestration on Ray (needs ``fray-tpu[ray]``).

``run_on_pod(fn, "v5p-64", num_slices=2)`` runs ``fn`` on every VM of two v5p-64 slices and
returns the per-host results; ``submit_tpu_job`` is the same machinery behind
``RayClient.submit`` for TPU requests, returning a ``fray.JobHandle``. Each attempt claims
whole slices (one host actor per VM), sets ``MEGASCALE_*`` from the live gang, removes
libtpu's lockfile, watches the hosts' health, tears the gang down at the first problem and
counts the attempt against the preemption or the failure budget.
"""

from fray_tpu._errors import TpuJobFailedError, TpuSchedulingError
from fray_tpu.ray._api import (
    TpuJobHandle,
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
