"""TPU support for Fray.

* The TPU topology database (every v4, v5litepod/v5e, v5p and v6e slice type with chips,
  hosts, VMs, chips per VM, HBM and default env). It lives in fray-core so that requests
  validate TPU types without extra packages; this is its public home.
* Helpers every TPU host needs, importing neither ray nor jax: the multislice
  ``MEGASCALE_*`` env (:func:`multislice_env`), libtpu lockfile cleanup
  (:func:`remove_libtpu_lockfile`) and the GCE metadata preemption check
  (:func:`is_preempted`).
* Gang orchestration on Ray lives in :mod:`fray_tpu.ray` (``pip install "fray-tpu[ray]"``):
  ``run_on_pod`` and ``submit_tpu_job``.
"""

from fray.topology import (
    TPU_TOPOLOGIES,
    TpuTopology,
    UnknownTpuTypeError,
    canonical_tpu_name,
    get_tpu_topology,
    slices_for_replicas,
    tpu_generations,
)
from fray_tpu._errors import TpuJobFailedError, TpuSchedulingError
from fray_tpu._lockfile import (
    DEFAULT_LIBTPU_LOCKFILE,
    LockfileOutcome,
    LockfileResult,
    remove_libtpu_lockfile,
)
from fray_tpu._metadata import is_preempted, metadata_base_url
from fray_tpu._multislice import DEFAULT_MEGASCALE_PORT, multislice_env

__all__ = [
    "DEFAULT_LIBTPU_LOCKFILE",
    "DEFAULT_MEGASCALE_PORT",
    "TPU_TOPOLOGIES",
    "LockfileOutcome",
    "LockfileResult",
    "TpuJobFailedError",
    "TpuSchedulingError",
    "TpuTopology",
    "UnknownTpuTypeError",
    "canonical_tpu_name",
    "get_tpu_topology",
    "is_preempted",
    "metadata_base_url",
    "multislice_env",
    "remove_libtpu_lockfile",
    "slices_for_replicas",
    "tpu_generations",
]
