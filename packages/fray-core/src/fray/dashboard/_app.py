"""The web layer: a Starlette app routing ``/api/*`` to :class:`Dashboard` and serving the one
static page, and :class:`DashboardServer`, uvicorn in a thread of its own."""

from __future__ import annotations

import ipaddress
import os
import socket
import threading
from collections.abc import Callable, Sequence
from typing import Any

from fray.dashboard._api import Dashboard, NotFound
from fray.errors import BackendUnavailableError, InvalidRequestError

__all__ = ["INSTALL", "DashboardServer", "create_app", "is_loopback", "listen"]

INSTALL = 'pip install "fray-core[dashboard]"'
STATIC = os.path.join(os.path.dirname(__file__), "static")
_LOOPBACK_NAMES = ["127.0.0.1", "localhost", "::1", "[::1]"]
# The page loads nothing from elsewhere and runs no inline script.
_PAGE_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:",
    "X-Content-Type-Options": "nosniff",
    "Cache-Control": "no-store",
}


def _starlette() -> Any:
    try:
        import starlette.applications
        import uvicorn
    except ModuleNotFoundError as err:
        raise BackendUnavailableError(
            f"the dashboard needs Starlette and uvicorn ({err.name} is missing): {INSTALL}"
        ) from err
    del uvicorn
    return starlette.applications


def is_loopback(host: str) -> bool:
    """Whether ``host`` is reached only from this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def create_app(dashboard: Dashboard, *, allowed_hosts: Sequence[str] | None = None) -> Any:
    """The Starlette app of ``dashboard``; with ``allowed_hosts``, requests naming another
    ``Host`` are refused (a loopback page cannot be reached through a rebound DNS name)."""
    _starlette()
    from starlette.applications import Starlette
    from starlette.middleware import Middleware
    from starlette.middleware.trustedhost import TrustedHostMiddleware
    from starlette.requests import Request
    from starlette.responses import FileResponse, JSONResponse, Response
    from starlette.routing import Mount, Route
    from starlette.staticfiles import StaticFiles

    def answer(make: Callable[[Request], dict[str, Any]]) -> Callable[[Request], Response]:
        def endpoint(request: Request) -> Response:
            try:
                body, code = make(request), 200
            except InvalidRequestError as err:
                body, code = {"error": str(err)}, 400
            except NotFound as err:
                body, code = {"error": str(err)}, 404
            return JSONResponse(body, code, headers={"Cache-Control": "no-store"})

        return endpoint

    def page(_request: Request) -> Response:
        return FileResponse(os.path.join(STATIC, "index.html"), headers=_PAGE_HEADERS)

    def query(request: Request) -> dict[str, str]:
        return dict(request.query_params)

    def job_id(request: Request) -> str:
        return str(request.path_params["job_id"])

    routes = [
        Route("/", page),
        Route("/api/sources", answer(lambda r: dashboard.source_list())),
        Route("/api/jobs", answer(lambda r: dashboard.jobs(query(r)))),
        Route(
            "/api/jobs/{job_id:path}/logs", answer(lambda r: dashboard.logs(job_id(r), query(r)))
        ),
        Route("/api/jobs/{job_id:path}", answer(lambda r: dashboard.job(job_id(r), query(r)))),
        Route("/api/actors", answer(lambda r: dashboard.groups(query(r)))),
        Route("/api/gangs", answer(lambda r: dashboard.gangs(query(r)))),
        Mount("/static", StaticFiles(directory=STATIC)),
    ]
    middleware: list[Any] = []
    if allowed_hosts is not None:
        middleware.append(Middleware(TrustedHostMiddleware, allowed_hosts=list(allowed_hosts)))
    return Starlette(routes=routes, middleware=middleware)


def listen(host: str, port: int) -> socket.socket:
    """A listening socket on ``host:port`` (port 0: any free one); connections queue on it
    until the server takes them, so the page answers as soon as this returns.

    Raises:
        InvalidRequestError: The port is taken or the host is not this machine's.
    """
    family = socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host.strip("[]"), port))
    except OSError as err:
        sock.close()
        raise InvalidRequestError.for_field(
            "port" if err.errno == 98 else "host",
            port if err.errno == 98 else host,
            f"a free port on an address of this machine ({err.strerror})",
        ) from err
    sock.listen(128)
    sock.set_inheritable(False)
    return sock


class DashboardServer:
    """A running dashboard (uvicorn in a thread); a context manager, :meth:`stop` ends it.

    Attributes:
        url: Where the page is (``http://host:port/``).
        dashboard: The answers it serves (add actor groups to its sources while it runs).
    """

    def __init__(self, dashboard: Dashboard, host: str = "127.0.0.1", port: int = 0) -> None:
        _starlette()
        import uvicorn

        self.dashboard = dashboard
        allowed = _LOOPBACK_NAMES if is_loopback(host) else None
        app = create_app(dashboard, allowed_hosts=allowed)
        self._socket = listen(host, port)
        bound = self._socket.getsockname()[1]
        self.url = f"http://{host if ':' not in host else f'[{host}]'}:{bound}/"
        config = uvicorn.Config(app, log_level="warning", lifespan="off", access_log=False)
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run,
            kwargs={"sockets": [self._socket]},
            name="fray-dashboard-server",
            daemon=True,
        )
        self._thread.start()

    def wait(self) -> None:
        """Blocks until the server stops (Ctrl-C in the main thread interrupts it)."""
        self._thread.join()

    def stop(self, timeout: float = 10.0) -> None:
        """Stops serving (waits up to ``timeout`` seconds for open requests) and ends the
        dashboard's threads."""
        self._server.should_exit = True
        self._thread.join(timeout)
        self._socket.close()
        self.dashboard.close()

    def __enter__(self) -> DashboardServer:
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"DashboardServer({self.url!r})"
