"""TPU support for Fray.

This release provides the TPU topology database (every v4, v5litepod/v5e, v5p and v6e slice
type with chips, hosts, VMs, chips per VM, HBM and default env); it lives in fray-core so that
requests validate TPU types without extra packages, and this is its public home. Gang
orchestration on Ray (``fray_tpu.ray``) is not part of this release.
"""

from fray._tpu import (
    TPU_TOPOLOGIES,
    TpuTopology,
    UnknownTpuTypeError,
    canonical_tpu_name,
    get_tpu_topology,
    slices_for_replicas,
    tpu_generations,
)

__all__ = [
    "TPU_TOPOLOGIES",
    "TpuTopology",
    "UnknownTpuTypeError",
    "canonical_tpu_name",
    "get_tpu_topology",
    "slices_for_replicas",
    "tpu_generations",
]
