"""``fray doctor``: installed backends, the client ``current_client()`` would pick, and why."""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import platform
import sys
from typing import Any

from fray._types import redact_env
from fray.cli._common import print_json
from fray.environment_variables import FRAY_CLIENT_SPEC, FRAY_STATE_DIR
from fray.errors import BackendUnavailableError, FrayError

__all__ = ["add_parser"]

# scheme -> (distribution providing the client, third-party libraries it drives)
_BACKENDS: dict[str, tuple[str, tuple[str, ...]]] = {
    "local": ("fray-core", ()),
    "ray": ("fray-ray", ("ray",)),
    "iris": ("fray-iris", ("marin-iris",)),
    "fake": ("fray-testing", ("pytest",)),
}
_EXTRAS: dict[str, tuple[str, ...]] = {"fray-tpu": ("jax",)}
_ENV_PREFIXES = ("FRAY_", "RAY_ADDRESS", "IRIS_", "TPU_", "MEGASCALE_", "JAX_PLATFORMS")


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    """Adds ``fray doctor``."""
    p: argparse.ArgumentParser = sub.add_parser(
        "doctor",
        parents=[common],
        help="show installed backends and which client would be used, and why",
    )
    p.add_argument("--json", action="store_true", help="print JSON")
    p.add_argument(
        "--connect",
        action="store_true",
        help="also build the client (connects to a cluster; may start a local Ray)",
    )
    p.set_defaults(handler=cmd_doctor)


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def _backend_rows() -> list[dict[str, Any]]:
    from importlib.metadata import entry_points

    from fray import _client

    schemes = dict(_BACKENDS)
    for ep in entry_points(group="fray.backends"):
        if ep.name not in schemes:
            dist = ep.dist.name if ep.dist is not None else "?"
            schemes[ep.name] = (dist, ())
    rows: list[dict[str, Any]] = []
    for scheme, (dist, libs) in schemes.items():
        row: dict[str, Any] = {
            "scheme": scheme,
            "package": dist,
            "version": _version(dist),
            "libraries": {lib: _version(lib) for lib in libs},
        }
        try:
            _client._load_backend(scheme)
        except BackendUnavailableError as err:
            row["available"] = False
            row["problem"] = str(err)
        except Exception as err:  # a broken install: report it, do not crash the doctor
            row["available"] = False
            row["problem"] = f"{type(err).__name__}: {err}"
        else:
            row["available"] = True
        rows.append(row)
    return rows


def _choice(connect: bool) -> tuple[dict[str, Any], list[str]]:
    """What ``current_client()`` picks in this environment, without connecting unless asked."""
    from fray import _client

    problems: list[str] = []
    spec = os.environ.get(FRAY_CLIENT_SPEC, "").strip()
    choice: dict[str, Any]
    if spec:
        choice = {"reason": f"{FRAY_CLIENT_SPEC}={spec!r}", "spec": spec}
        try:
            parsed = _client.parse_client_spec(spec)
            choice["scheme"] = parsed.scheme
            _client._load_backend(parsed.scheme)
        except FrayError as err:
            problems.append(str(err))
    elif os.environ.get("IRIS_CONTROLLER_ADDRESS") and os.environ.get("IRIS_TASK_ID"):
        choice = {"reason": "inside an Iris job (IRIS_CONTROLLER_ADDRESS and IRIS_TASK_ID)"}
        choice["scheme"] = "iris"
    else:
        choice = {"reason": "the default (no spec, no cluster)", "scheme": "local"}
    if connect or (choice.get("scheme") == "local" and not problems):
        try:
            client, reason = _client.explain_current_client()
        except FrayError as err:
            problems.append(str(err))
        else:
            choice.update(client=repr(client), reason=reason, scheme=getattr(client, "scheme", "?"))
    return choice, problems


def cmd_doctor(args: argparse.Namespace) -> int:
    """``fray doctor``: exit 0 when the chosen client is usable, 1 otherwise."""
    from fray import __version__
    from fray._state import StateStore

    backends = _backend_rows()
    choice, problems = _choice(args.connect)
    state: dict[str, Any]
    try:
        store = StateStore()
        state = {"dir": store.describe(), "runs": len(store.list_records())}
    except FrayError as err:
        state = {"dir": os.environ.get(FRAY_STATE_DIR, ""), "problem": str(err)}
        problems.append(str(err))
    env = redact_env({k: v for k, v in sorted(os.environ.items()) if k.startswith(_ENV_PREFIXES)})
    extras: dict[str, dict[str, Any]] = {
        dist: {"version": _version(dist), "libraries": {lib: _version(lib) for lib in libs}}
        for dist, libs in _EXTRAS.items()
    }
    report: dict[str, Any] = {
        "fray": __version__,
        "python": platform.python_version(),
        "executable": sys.executable,
        "platform": platform.platform(),
        "backends": backends,
        "extras": extras,
        "client": choice,
        "state": state,
        "environment": env,
        "problems": problems,
    }
    if args.json:
        print_json(report)
        return 1 if problems else 0
    out = sys.stdout
    out.write(f"fray {__version__} on Python {report['python']} ({report['platform']})\n")
    out.write("backends:\n")
    for row in backends:
        version = row["version"] or "not installed"
        libs = ", ".join(f"{lib} {v or 'not installed'}" for lib, v in row["libraries"].items())
        status = "ok" if row["available"] else "unavailable"
        out.write(f"  {row['scheme']:<6} {row['package']} {version}")
        out.write(f" ({libs})" if libs else "")
        out.write(f": {status}\n")
        if not row["available"]:
            out.write(f"         {row['problem']}\n")
    for dist, info in extras.items():
        versions: dict[str, str | None] = info["libraries"]
        libs = ", ".join(f"{lib} {v or 'not installed'}" for lib, v in versions.items())
        out.write(f"  extra  {dist} {info['version'] or 'not installed'} ({libs})\n")
    scheme = choice.get("scheme", "?")
    out.write(f"client: {scheme}, because {choice['reason']}\n")
    if "client" in choice:
        out.write(f"        {choice['client']}\n")
    elif not args.connect:
        out.write("        (not connected; 'fray doctor --connect' builds it)\n")
    runs = state.get("runs")
    out.write(
        f"state dir: {state['dir']}" + (f" ({runs} runs recorded)\n" if runs is not None else "\n")
    )
    if env:
        out.write("environment:\n")
        for key, value in env.items():
            out.write(f"  {key}={value}\n")
    for problem in problems:
        out.write(f"problem: {problem}\n")
    out.flush()
    return 1 if problems else 0
