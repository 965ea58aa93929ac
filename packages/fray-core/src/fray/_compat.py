"""Names the predecessor had that Fray spells differently: the TPU table as a list of
``TpuTopologyInfo`` rows, the type aliases of its annotations (facts only: the rows come from
:mod:`fray.topology`), and ``fray.current_client._current_client_var``."""

from __future__ import annotations

import contextvars
import dataclasses
from typing import Any, Literal

from fray import topology
from fray._bound import Bound, bind_client, bound

DeviceKind = Literal["cpu", "gpu", "tpu"]
"""The kinds of ``ResourceConfig.device``."""

GpuType = str
"""A GPU variant name (see ``fray.GPU_TYPES``; ``GpuConfig`` validates it)."""

TpuType = str
"""A TPU slice type name (see ``fray.topology.TPU_TOPOLOGIES``; ``TpuConfig`` validates it)."""


@dataclasses.dataclass(frozen=True)
class TpuTopologyInfo:
    """One TPU slice type, as the predecessor's table listed it (``fray.topology.TpuTopology``
    has the same fields, and the generation and HBM)."""

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
    """The row of ``tpu_type`` (``v5e-N`` is read as ``v5litepod-N``, case-insensitively);
    an unknown type is a ``fray.topology.UnknownTpuTypeError`` (a ``ValueError``)."""

    return _row(topology.get_tpu_topology(tpu_type))


class _ClientVar:
    """The predecessor's context variable of the client ``set_current_client`` set, as a
    view of Fray's binding (``fray._bound``): ``get()`` is that client or ``None``, ``set``
    binds one in this context (keeping the current actor) and ``reset`` undoes it."""

    name = "_current_client_var"

    def get(self, default: Any = None) -> Any:
        client = bound.get()[0]
        return default if client is None else client

    def set(self, client: Any) -> contextvars.Token[Bound]:
        return bind_client(client)

    def reset(self, token: contextvars.Token[Bound]) -> None:
        bound.reset(token)


_current_client_var = _ClientVar()
