"""``FrayIrisClient``: the predecessor's name and constructors for an Iris client, so code
written against ``fray.iris_backend`` runs unchanged on :class:`~fray_iris.IrisClient`."""

# pyright: standard
# Wraps the untyped marin-iris client.

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from fray_iris import _iris
from fray_iris._client import IrisClient
from fray_iris._iris import RawIrisClient
from fray_iris._session import normalize_address

__all__ = ["FrayIrisClient"]


class FrayIrisClient(IrisClient):
    """An :class:`~fray_iris.IrisClient` built the predecessor's way.

    Args:
        controller_address: The controller, ``host:port`` or ``http://host:port``.
        workspace: A project folder shipped to the workers with each job.
        bundle_id: An already uploaded workspace bundle to run jobs from.
    """

    def __init__(
        self,
        controller_address: str,
        workspace: str | Path | None = None,
        bundle_id: str | None = None,
    ) -> None:
        if bundle_id is None:
            super().__init__(controller_address, workspace=workspace)
            return
        ws = Path(workspace) if workspace is not None else None
        open_raw = functools.partial(
            RawIrisClient.remote,
            normalize_address(controller_address.strip()),
            workspace=ws,
            bundle_id=bundle_id,
        )
        raw = open_raw()
        _iris.probe(raw, open_raw.args[0])
        super().__init__(iris_client=raw)
        self._session.take_ownership(open_raw)

    @staticmethod
    def from_iris_client(iris_client: Any) -> FrayIrisClient:
        """Wraps an existing ``iris.client.IrisClient`` (not shut down with this client).
        Nothing is asked of it until the first job or actor."""
        client = FrayIrisClient.__new__(FrayIrisClient)
        IrisClient.__init__(client, iris_client=iris_client)
        return client
