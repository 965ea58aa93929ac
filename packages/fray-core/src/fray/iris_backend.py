"""The Iris backend at the predecessor's ``fray.iris_backend`` path: fray-iris's objects,
loaded on first use. Without fray-iris installed, each name raises
``BackendUnavailableError`` (an ``ImportError``) with the install command."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fray.errors import BackendUnavailableError

if TYPE_CHECKING:
    from fray_iris import FrayIrisClient, IrisActorGroup, IrisActorHandle, IrisJobHandle

__all__ = ["FrayIrisClient", "IrisActorGroup", "IrisActorHandle", "IrisJobHandle"]

_NAMES = frozenset(__all__)


def __getattr__(name: str) -> Any:
    if name not in _NAMES:
        raise AttributeError(f"module 'fray.iris_backend' has no attribute {name!r}")
    try:
        import fray_iris
    except ImportError as err:
        if err.name is not None and err.name.split(".")[0] in ("fray_iris", "iris"):
            raise BackendUnavailableError(
                f"fray.iris_backend.{name} needs fray-iris, which is not installed. "
                'Install it with: pip install "fray-core[iris]"'
            ) from err
        raise
    value = getattr(fray_iris, name)
    globals()[name] = value
    return value
