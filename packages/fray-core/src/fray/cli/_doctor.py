"""``fray doctor``: the installed backends, the client ``current_client()`` would pick, and why."""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import os
import platform
from typing import Any

from fray.cli._common import add_command, choose_spec, open_client, print_json, spec_scheme
from fray.cli._runs import RunStore, redact
from fray.environment_variables import FRAY_CLIENT_SPEC
from fray.errors import FrayError, InvalidRequestError

__all__ = ["add_parser"]

# scheme -> (distribution, module, the extra that installs it, the library it drives)
_BACKENDS = {
    "local": ("fray-core", "fray.local", "", ""),
    "ray": ("fray-ray", "fray_ray", "ray", "ray"),
    "iris": ("fray-iris", "fray_iris", "iris", "marin-iris"),
    "fake": ("fray-testing", "fray_testing", "testing", "pytest"),
}
_ENV_PREFIXES = ("FRAY_", "RAY_ADDRESS", "IRIS_", "TPU_", "MEGASCALE_", "JAX_PLATFORMS")


def add_parser(sub: Any) -> None:
    """Adds ``fray doctor``."""
    p = add_command(sub, "doctor", cmd_doctor, help="show installed backends and which is used")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.add_argument("--connect", action="store_true", help="also build the client (may connect)")


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def _backend(scheme: str, dist: str, module: str, extra: str, library: str) -> dict[str, Any]:
    row: dict[str, Any] = {"scheme": scheme, "package": dist, "version": _version(dist)}
    row["available"] = True
    row["libraries"] = {library: _version(library)} if library else {}
    try:
        importlib.import_module(module)
    except Exception as err:  # not installed, or a broken install: say so, and how to fix it
        fix = f'; pip install "fray-core[{extra}]"' if extra and not row["version"] else ""
        row.update(available=False, problem=f"{type(err).__name__}: {err}{fix}")
    return row


def _client(connect: bool, backends: dict[str, dict[str, Any]]) -> tuple[dict[str, Any], str]:
    """What ``current_client()`` would pick, and why (without connecting, unless asked), and
    what keeps it from working."""
    spec, reason = choose_spec(None)
    choice: dict[str, Any] = {"reason": reason, "spec": spec, "scheme": "?"}
    try:
        scheme = choice["scheme"] = spec_scheme(spec) if spec else "iris"
        if scheme not in backends:
            known = f"unknown backend; known: {', '.join(backends)}"
            raise InvalidRequestError.for_field(FRAY_CLIENT_SPEC, scheme, known)
        if not backends[scheme]["available"]:
            return choice, backends[scheme]["problem"]
        if connect or scheme == "local":
            client = open_client(None)
            choice["client"] = repr(client)
            client.shutdown()
    except FrayError as err:
        return choice, str(err)
    return choice, ""


def cmd_doctor(args: argparse.Namespace) -> int:
    """``fray doctor``: exit 0 when the chosen client is usable, 1 otherwise."""
    from fray import __version__

    plugins = {
        ep.name: (ep.dist.name if ep.dist else "?", ep.module, "", "")
        for ep in importlib.metadata.entry_points(group="fray.backends")
        if ep.name not in _BACKENDS
    }
    backends = {s: _backend(s, *how) for s, how in {**_BACKENDS, **plugins}.items()}
    choice, problem = _client(args.connect, backends)
    store = RunStore()
    env = redact({k: v for k, v in sorted(os.environ.items()) if k.startswith(_ENV_PREFIXES)})
    report: dict[str, Any] = {
        "fray": __version__,
        "python": f"{platform.python_version()} ({platform.platform()})",
        "backends": list(backends.values()),
        "client": choice,
        "state": {"dir": store.root, "runs": len(store.records())},
        "environment": env,
        "problems": [problem] if problem else [],
    }
    if args.json:
        print_json(report)
        return 1 if problem else 0
    lines = [f"fray {__version__} on Python {report['python']}", "backends:"]
    for row in backends.values():
        libs = "".join(f" ({lib} {v or 'not installed'})" for lib, v in row["libraries"].items())
        status = "ok" if row["available"] else f"unavailable\n         {row['problem']}"
        lines.append(
            f"  {row['scheme']:<6} {row['package']} {row['version'] or '-'}{libs}: {status}"
        )
    lines.append(f"client: {choice['scheme']}, because {choice['reason']}")
    if "client" in choice or not args.connect:
        lines.append(f"        {choice.get('client', '(not connected: see --connect)')}")
    lines.append(f"state dir: {store.root} ({report['state']['runs']} runs recorded)")
    lines += ["environment:", *(f"  {k}={v}" for k, v in env.items())] if env else []
    lines += [f"problem: {problem}"] if problem else []
    print("\n".join(lines))
    return 1 if problem else 0
