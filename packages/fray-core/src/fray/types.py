"""The request types at the path the predecessor's code imports them from
(``from fray.types import ResourceConfig``): the same objects as ``fray``'s own."""

from __future__ import annotations

from fray._compat import (
    TPU_TOPOLOGIES,
    DeviceKind,
    GpuType,
    TpuTopologyInfo,
    TpuType,
    get_tpu_topology,
)
from fray._resources import (
    ANY_REGION,
    CpuConfig,
    DeviceConfig,
    GpuConfig,
    ResourceConfig,
    TpuConfig,
)
from fray._types import (
    ActorConfig,
    BinaryEntrypoint,
    CallableEntrypoint,
    Entrypoint,
    EnvironmentConfig,
    JobRequest,
    JobStatus,
    create_environment,
    parse_memory,
)
from fray.topology import (
    DEFAULT_TPU_HOST_FRACTION,
    TPU_HBM_BYTES_PER_CHIP,
    TPU_HOST_RESOURCES,
    TpuFamily,
    TpuHostResources,
    tpu_family,
    tpu_hbm_bytes_per_chip,
    tpu_hbm_capacity_bytes,
)

__all__ = [
    "ANY_REGION",
    "DEFAULT_TPU_HOST_FRACTION",
    "TPU_HBM_BYTES_PER_CHIP",
    "TPU_HOST_RESOURCES",
    "TPU_TOPOLOGIES",
    "ActorConfig",
    "BinaryEntrypoint",
    "CallableEntrypoint",
    "CpuConfig",
    "DeviceConfig",
    "DeviceKind",
    "Entrypoint",
    "EnvironmentConfig",
    "GpuConfig",
    "GpuType",
    "JobRequest",
    "JobStatus",
    "ResourceConfig",
    "TpuConfig",
    "TpuFamily",
    "TpuHostResources",
    "TpuTopologyInfo",
    "TpuType",
    "create_environment",
    "get_tpu_topology",
    "parse_memory",
    "tpu_family",
    "tpu_hbm_bytes_per_chip",
    "tpu_hbm_capacity_bytes",
]
