"""Names the predecessor's ``fray.types`` had that Fray spells differently: the TPU table as
a list of ``TpuTopologyInfo`` rows, and the type aliases of its annotations. Facts only: the
rows come from :mod:`fray.topology`."""

from __future__ import annotations

import dataclasses
from typing import Literal

from fray import topology

__all__ = [
    "TPU_TOPOLOGIES",
    "DeviceKind",
    "GpuType",
    "TpuTopologyInfo",
    "TpuType",
    "get_tpu_topology",
]

DeviceKind = Literal["cpu", "gpu", "tpu"]
"""The kinds of ``ResourceConfig.device``."""

GpuType = str
"""A GPU variant name (see ``fray.GPU_TYPES``; ``GpuConfig`` validates it)."""

TpuType = str
"""A TPU slice type name (see ``fray.topology.TPU_TOPOLOGIES``; ``TpuConfig`` validates it)."""


@dataclasses.dataclass(frozen=True)
class TpuTopologyInfo:
    """One TPU slice type, as the predecessor's table listed it (``fray.topology`` has more:
    the generation and HBM).

    Attributes:
        name: The canonical slice name, e.g. ``"v5p-16"``.
        chip_count: Chips in one slice.
        host_count: Physical hosts in one slice.
        vm_count: VMs (workers) in one slice.
        chips_per_vm: Chips attached to each VM.
    """

    name: str
    chip_count: int
    host_count: int
    vm_count: int
    chips_per_vm: int


def _row(info: topology.TpuTopology) -> TpuTopologyInfo:
    return TpuTopologyInfo(
        info.name, info.chip_count, info.host_count, info.vm_count, info.chips_per_vm
    )


TPU_TOPOLOGIES: list[TpuTopologyInfo] = [_row(t) for t in topology.TPU_TOPOLOGIES.values()]
"""Every TPU slice type Fray knows, one row each."""


def get_tpu_topology(tpu_type: str) -> TpuTopologyInfo:
    """The row of ``tpu_type`` (``v5e-N`` is read as ``v5litepod-N``, case-insensitively).

    Raises:
        ValueError: Not a known slice type (``fray.topology.UnknownTpuTypeError``, naming the
            closest known ones).
    """
    return _row(topology.get_tpu_topology(tpu_type))
