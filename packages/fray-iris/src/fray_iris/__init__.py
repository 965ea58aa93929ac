"""Fray's Iris backend.

This release ships the package skeleton only: the `IrisClient` lands with the Iris backend work.
Asking for the `iris` backend raises `fray.errors.BackendUnavailableError` until then.
"""

__all__: list[str] = []
