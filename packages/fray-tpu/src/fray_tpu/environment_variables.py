"""Environment variables fray-tpu reads or sets.

Fray's own start with ``FRAY_``; the others are the names TPU software already uses.
"""

GCE_METADATA_HOST = "GCE_METADATA_HOST"
"""``host[:port]`` of the GCE metadata server (default ``metadata.google.internal``); the
name Google's client libraries use. Tests point it at a local fake server."""

FRAY_TPU_LIBTPU_LOCKFILE = "FRAY_TPU_LIBTPU_LOCKFILE"
"""Path of libtpu's lockfile, removed before each launch on each host (default
``/tmp/libtpu_lockfile``)."""

FRAY_TPU_SCHEDULING_TIMEOUT_S = "FRAY_TPU_SCHEDULING_TIMEOUT_S"
"""Seconds a TPU gang may wait for its slices before failing with a scheduling error
(default 600)."""

FRAY_TPU_HEALTH_INTERVAL_S = "FRAY_TPU_HEALTH_INTERVAL_S"
"""Seconds between health checks of a running gang (default 5)."""

MEGASCALE_COORDINATOR_ADDRESS = "MEGASCALE_COORDINATOR_ADDRESS"
"""``ip:port`` of the multislice coordinator (slice 0's first host)."""

MEGASCALE_NUM_SLICES = "MEGASCALE_NUM_SLICES"
"""Number of slices in the multislice gang."""

MEGASCALE_SLICE_ID = "MEGASCALE_SLICE_ID"
"""This host's slice, from 0."""

MEGASCALE_PORT = "MEGASCALE_PORT"
"""Port of the multislice coordinator."""
