"""The Iris backend at the predecessor's ``fray.iris_backend`` path, loaded on first use.

Two kinds of names live here:

- Fray's own types under the predecessor's names (``FrayEntrypoint`` is ``fray.Entrypoint``),
  which resolve without fray-iris;
- the Iris backend's names (``FrayIrisClient``, the handles, ``convert_resources``...),
  which this module forwards to :mod:`fray_iris.predecessor`, the table of them. Without
  fray-iris they raise ``BackendUnavailableError`` with the install command.

fray-core imports no backend package: fray-iris is found by name, at the first use of one
of its names.
"""

from __future__ import annotations

import importlib
import logging
import pkgutil
from typing import Any

from fray.errors import BackendUnavailableError

logger = logging.getLogger(__name__)

_BACKEND = "fray_iris.predecessor"

# Fray's own objects, by the predecessor's name: where each is, as ``pkgutil.resolve_name``
# reads it. ``OperationFuture`` is the future ``method.submit()`` returns.
_FRAY: dict[str, str] = {
    "ANY_REGION": "fray._resources:ANY_REGION",
    "ActorConfig": "fray._types:ActorConfig",
    "ActorContext": "fray._actor:ActorContext",
    "ActorFuture": "fray._protocols:ActorFuture",
    "ActorHandle": "fray._protocols:ActorHandle",
    "ActorUnavailableError": "fray.errors:ActorUnavailableError",
    "CpuConfig": "fray._resources:CpuConfig",
    "DeviceConfig": "fray._resources:DeviceConfig",
    "EnvironmentConfig": "fray._types:EnvironmentConfig",
    "FrayEntrypoint": "fray._types:Entrypoint",
    "FrayJobAlreadyExists": "fray.errors:JobAlreadyExists",
    "GpuConfig": "fray._resources:GpuConfig",
    "HostedActor": "fray._actor:HostedActor",
    "JobRequest": "fray._types:JobRequest",
    "JobStatus": "fray._types:JobStatus",
    "OperationFuture": "fray.backend._wire:CallFuture",
    "ResourceConfig": "fray._resources:ResourceConfig",
    "TpuConfig": "fray._resources:TpuConfig",
}


def __getattr__(name: str) -> Any:
    """Fray's object of that predecessor name, else the Iris backend's name (loaded once)."""
    if name == "__all__":  # a star import: every name, the backend's where it is installed
        return sorted([*_FRAY, "logger", *_backend_names()])
    if name in _FRAY:
        value = pkgutil.resolve_name(_FRAY[name])
    elif name.startswith("__"):
        raise AttributeError(f"module 'fray.iris_backend' has no attribute {name!r}")
    else:
        backend = _backend(name)
        if name not in backend.__all__:
            raise AttributeError(f"module 'fray.iris_backend' has no attribute {name!r}")
        value = getattr(backend, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_FRAY, *_backend_names()})


def _backend_names() -> list[str]:
    """The Iris backend's names, or none where fray-iris is not installed."""
    try:
        return list(_backend("__all__").__all__)
    except BackendUnavailableError:
        return []


def _backend(name: str) -> Any:
    """``fray_iris.predecessor``, or the install hint when fray-iris (or Iris) is missing."""
    try:
        return importlib.import_module(_BACKEND)
    except ImportError as err:
        if err.name is not None and err.name.split(".")[0] in "fray_iris:iris":
            raise BackendUnavailableError(
                f"fray.iris_backend.{name} needs fray-iris, which is not installed. "
                'Install it with: pip install "fray-core[iris]"'
            ) from err
        raise
