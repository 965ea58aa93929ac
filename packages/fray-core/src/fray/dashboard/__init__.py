"""``fray dashboard``: one read-only page for the jobs, attempts, actor groups and TPU gangs
of one or more backends at once, over a paged JSON API (see docs/cli.md).

The web server needs the extra ``fray-core[dashboard]`` (Starlette and uvicorn), imported
only when a page is served; :class:`Dashboard` and the sources are plain Python.

Example::

    from fray import LocalClient
    from fray.dashboard import serve

    client = LocalClient()
    with serve(client) as server:   # loopback, a free port
        print(server.url)
        ...                         # submit jobs; the page follows them
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from fray.dashboard._api import Dashboard, NotFound
from fray.dashboard._app import DashboardServer, create_app
from fray.dashboard._sources import ClientSource, MemorySource, RunStoreSource, Source
from fray.dashboard._views import (
    GangAttemptView,
    GangView,
    GroupView,
    HostState,
    HostView,
    MemberState,
    MemberView,
    SliceView,
    group_view,
)

__all__ = [
    "ClientSource",
    "Dashboard",
    "DashboardServer",
    "GangAttemptView",
    "GangView",
    "GroupView",
    "HostState",
    "HostView",
    "MemberState",
    "MemberView",
    "MemorySource",
    "NotFound",
    "RunStoreSource",
    "SliceView",
    "Source",
    "create_app",
    "group_view",
    "serve",
]


def serve(
    *clients: Any,
    sources: Iterable[Source] = (),
    groups: Iterable[Any] = (),
    host: str = "127.0.0.1",
    port: int = 0,
    timeout: float = 10.0,
) -> DashboardServer:
    """Serves the dashboard of live clients in a thread of this process and returns at once.

    Args:
        clients: Live clients (e.g. a ``LocalClient`` in a script or notebook), each shown
            as a source named after its scheme.
        sources: More sources (e.g. ``RunStoreSource()`` for the recorded local runs).
        groups: More actor groups to show on the first client's source (each client's
            own are shown without being named here).
        host: Where to listen: loopback by default; the page has no login.
        port: The port (0: a free one; ``server.url`` says which).
        timeout: Seconds each source is given per answer.

    Returns:
        The running server (a context manager; ``stop()`` ends it).
    """
    everything: list[Any] = [ClientSource(client) for client in clients]
    if everything:
        for group in groups:
            everything[0].add_group(group)
    everything += list(sources)
    return DashboardServer(Dashboard(everything, timeout=timeout), host, port)
