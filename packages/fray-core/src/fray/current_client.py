"""``current_client`` and ``set_current_client`` at the predecessor's ``fray.current_client``
path: the same functions as ``fray``'s own.

``fray`` imports this module when it is itself imported, so that ``fray.current_client``
stays the function (importing a submodule later would rebind the package attribute to the
module). It must therefore stay as light as ``fray``: the client classes load on first use.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from fray._client import current_client, set_current_client

if TYPE_CHECKING:
    from fray._protocols import Client
    from fray.iris_backend import FrayIrisClient
    from fray.local import LocalClient

__all__ = [
    "Client",
    "FrayIrisClient",
    "LocalClient",
    "current_client",
    "logger",
    "set_current_client",
]

logger = logging.getLogger("fray.current_client")

# Where each is, as ``pkgutil.resolve_name`` reads it.
_LAZY = {
    "_current_client_var": "fray._compat:_current_client_var",
    "Client": "fray._protocols:Client",
    "LocalClient": "fray.local:LocalClient",
    "FrayIrisClient": "fray.iris_backend:FrayIrisClient",
}


def __getattr__(name: str) -> Any:
    target = _LAZY.get(name)
    if target is None:
        raise AttributeError(f"module 'fray.current_client' has no attribute {name!r}")
    import pkgutil  # here: not at `import fray`

    value = pkgutil.resolve_name(target)
    globals()[name] = value
    return value
