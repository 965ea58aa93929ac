"""Multislice environment: what each host of an N-slice gang needs to find the others."""

from __future__ import annotations

from fray_tpu import environment_variables as ev

__all__ = ["DEFAULT_MEGASCALE_PORT", "multislice_env"]

DEFAULT_MEGASCALE_PORT = 8081
"""The port libtpu's multislice coordinator listens on by default."""


def multislice_env(
    coordinator_ip: str, num_slices: int, slice_id: int, port: int = DEFAULT_MEGASCALE_PORT
) -> dict[str, str]:
    """The ``MEGASCALE_*`` variables for one host of slice ``slice_id`` of ``num_slices``.

    A single slice needs none of them, so an empty dict is returned when ``num_slices`` is 1.
    The values must be recomputed for every attempt: after a preemption the gang may run on
    other slices, with another coordinator.

    Args:
        coordinator_ip: IP address of the first host of slice 0.
        num_slices: Slices in the gang, at least 1.
        slice_id: This host's slice, ``0 <= slice_id < num_slices``.
        port: Coordinator port.

    Raises:
        ValueError: A count or id out of range, or an empty address.
    """
    if isinstance(num_slices, bool) or not isinstance(num_slices, int) or num_slices < 1:
        raise ValueError(f"num_slices must be an int >= 1, got {num_slices!r}")
    if isinstance(slice_id, bool) or not isinstance(slice_id, int):
        raise ValueError(f"slice_id must be an int, got {slice_id!r}")
    if not 0 <= slice_id < num_slices:
        raise ValueError(f"slice_id must be in [0, {num_slices}), got {slice_id}")
    if not coordinator_ip:
        raise ValueError("coordinator_ip must be a non-empty address")
    if num_slices == 1:
        return {}
    return {
        ev.MEGASCALE_COORDINATOR_ADDRESS: f"{coordinator_ip}:{port}",
        ev.MEGASCALE_NUM_SLICES: str(num_slices),
        ev.MEGASCALE_SLICE_ID: str(slice_id),
        ev.MEGASCALE_PORT: str(port),
    }
