"""Fray's Ray backend.

This release ships the package skeleton only: the `RayClient` lands with the Ray backend work.
Asking for the `ray` backend raises `fray.errors.BackendUnavailableError` until then.
"""

__all__: list[str] = []
