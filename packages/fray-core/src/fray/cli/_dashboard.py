"""``fray dashboard``: serves the read-only page of ``fray.dashboard`` for the recorded local
runs and the backends ``--spec`` (or ``FRAY_CLIENT_SPEC``) names, until Ctrl-C."""

from __future__ import annotations

import argparse
import os
import signal
import sys
from typing import Any

from fray._client import _load_backend  # pyright: ignore[reportPrivateUsage]
from fray.backend import parse_client_spec
from fray.cli._common import CliError, add_command, number
from fray.environment_variables import FRAY_CLIENT_SPEC
from fray.errors import InvalidRequestError

DEFAULT_PORT = 8274


def add_parser(sub: Any) -> None:
    """Adds ``fray dashboard``."""
    p = add_command(
        sub,
        "dashboard",
        cmd_dashboard,
        help="serve a read-only web page of jobs, actor groups and TPU gangs",
        description="Serves one read-only page for one or more backends at once. Default "
        f"backends: the local runs recorded in the state directory, and {FRAY_CLIENT_SPEC}'s.",
    )
    p.add_argument(
        "--spec",
        action="append",
        metavar="SPEC",
        help="a backend to show, repeatable: local (the recorded local runs), ray, "
        "ray://host:port, iris://host:port",
    )
    p.add_argument("--port", type=number(int, 0), default=DEFAULT_PORT, help="default 8274")
    p.add_argument(
        "--host",
        default="127.0.0.1",
        help="the address to listen on (default loopback); the page has no login",
    )
    seconds = number(float, 0)
    p.add_argument(
        "--timeout", type=seconds, default=10.0, metavar="SECONDS", help="per backend answer"
    )


def _specs(explicit: list[str] | None) -> list[tuple[str, str]]:
    """``(name, spec)`` per backend to show: ``--spec``s, else ``local`` and the
    ``FRAY_CLIENT_SPEC`` backend (if it is not ``local``)."""
    field = "--spec"
    specs = explicit
    if not specs:
        env = os.environ.get(FRAY_CLIENT_SPEC, "").strip()
        specs, field = ["local", *([env] if env else [])], FRAY_CLIENT_SPEC
    named: dict[str, str] = {}
    for spec in specs:
        try:
            parsed = parse_client_spec(spec, field)
            _load_backend(parsed.scheme, field)  # an unknown or missing backend fails now
        except InvalidRequestError as err:
            code = 2 if field == "--spec" else 1
            hint = "'fray doctor' lists the installed backends"
            raise CliError(str(err), hint=hint, code=code) from None
        name = parsed.scheme if parsed.scheme == "local" or parsed.scheme not in named else spec
        named.setdefault(name, spec)
    return list(named.items())


def cmd_dashboard(args: argparse.Namespace) -> int:
    """``fray dashboard``."""
    from fray.dashboard import Dashboard, DashboardServer, RunStoreSource
    from fray.dashboard._app import is_loopback
    from fray.dashboard._sources import SpecSource

    sources: list[Any] = [
        RunStoreSource(name=name) if name == "local" else SpecSource(spec, name=name)
        for name, spec in _specs(args.spec)
    ]
    dashboard = Dashboard(sources, timeout=args.timeout)
    try:
        server = DashboardServer(dashboard, args.host, args.port)
    except InvalidRequestError as err:
        dashboard.close()
        hint = "--port 0 picks a free port" if err.field == "port" else None
        message = f"cannot listen on {args.host}:{args.port}: {err.allowed}"
        raise CliError(message, hint=hint) from None
    names = ", ".join(source.name for source in sources)
    print(f"fray dashboard: {server.url} (backends: {names}); Ctrl-C stops it", flush=True)
    if not is_loopback(args.host):
        sys.stderr.write(
            f"fray dashboard: warning: listening on {args.host}, not loopback: the page has no "
            "login, so whoever reaches this address sees your jobs' names, errors and output\n"
        )
    # SIGTERM stops it as Ctrl-C does: the clients it connected are shut down.
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        server.wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
        for source in sources:
            source.close()
    return 0


def _interrupt(signum: int, frame: object) -> None:
    del signum, frame
    raise KeyboardInterrupt
