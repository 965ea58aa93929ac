"""``fray doctor``: the installed backends, the client ``current_client()`` would pick, and why."""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import os
import platform
import sys
from typing import Any

from fray.cli._common import add_command, choose_spec, open_client, print_json, spec_scheme
from fray.cli._runs import RunStore, redact
from fray.environment_variables import FRAY_CLIENT_SPEC
from fray.errors import FrayError, InvalidRequestError

__all__ = ["add_parser"]

# scheme -> (distribution, module, extra that installs it, libraries it drives)
_BACKENDS: dict[str, tuple[str, str, str, tuple[str, ...]]] = {
    "local": ("fray-core", "fray.local", "", ()),
    "ray": ("fray-ray", "fray_ray", "ray", ("ray",)),
    "iris": ("fray-iris", "fray_iris", "iris", ("marin-iris",)),
    "fake": ("fray-testing", "fray_testing", "testing", ("pytest",)),
}
_ENV_PREFIXES = ("FRAY_", "RAY_ADDRESS", "IRIS_", "TPU_", "MEGASCALE_", "JAX_PLATFORMS")


def add_parser(sub: Any) -> None:
    """Adds ``fray doctor``."""
    p = add_command(sub, "doctor", cmd_doctor, help="show installed backends and which is used")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.add_argument(
        "--connect", action="store_true", help="also build the client (may contact a cluster)"
    )


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def _backend(
    scheme: str, dist: str, module: str, extra: str, libs: tuple[str, ...]
) -> dict[str, Any]:
    row: dict[str, Any] = {"scheme": scheme, "package": dist, "version": _version(dist)}
    row["libraries"] = {lib: _version(lib) for lib in libs}
    try:
        importlib.import_module(module)
    except Exception as err:  # not installed, or a broken install: report it
        missing = isinstance(err, ImportError) and row["version"] is None
        how = f'; install it with: pip install "fray-core[{extra}]"' if extra else ""
        row["problem"] = (
            f"{dist} is not installed{how}" if missing else f"{type(err).__name__}: {err}"
        )
    row["available"] = "problem" not in row
    return row


def cmd_doctor(args: argparse.Namespace) -> int:
    """``fray doctor``: exit 0 when the chosen client is usable, 1 otherwise."""
    from fray import __version__

    plugins = importlib.metadata.entry_points(group="fray.backends")
    found = {
        ep.name: (ep.dist.name if ep.dist else "?", ep.module, "", ())
        for ep in plugins
        if ep.name not in _BACKENDS
    }
    backends = {s: _backend(s, *how) for s, how in {**_BACKENDS, **found}.items()}
    problems: list[str] = []
    spec, reason = choose_spec(None)
    choice: dict[str, Any] = {"reason": reason, "spec": spec, "scheme": "iris"}
    try:
        if spec is not None:
            choice["scheme"] = spec_scheme(spec)
        row = backends.get(choice["scheme"])
        if row is None:
            known = f"unknown backend; known: {', '.join(backends)}"
            raise InvalidRequestError.for_field(FRAY_CLIENT_SPEC, choice["scheme"], known)
        if not row["available"]:
            problems.append(row["problem"])
        elif args.connect or choice["scheme"] == "local":
            client = open_client(None)
            choice["client"] = repr(client)
            client.shutdown()
    except FrayError as err:
        problems.append(str(err))
    store = RunStore()
    env = redact({k: v for k, v in sorted(os.environ.items()) if k.startswith(_ENV_PREFIXES)})
    report: dict[str, Any] = {
        "fray": __version__,
        "python": platform.python_version(),
        "executable": sys.executable,
        "platform": platform.platform(),
        "backends": list(backends.values()),
        "extras": {"fray-tpu": {"version": _version("fray-tpu"), "jax": _version("jax")}},
        "client": choice,
        "state": {"dir": store.root, "runs": len(store.records())},
        "environment": env,
        "problems": problems,
    }
    if args.json:
        print_json(report)
        return 1 if problems else 0
    out = [f"fray {__version__} on Python {report['python']} ({report['platform']})", "backends:"]
    for row in backends.values():
        libs = ", ".join(f"{lib} {v or 'not installed'}" for lib, v in row["libraries"].items())
        out.append(
            f"  {row['scheme']:<6} {row['package']} {row['version'] or 'not installed'}"
            + (f" ({libs})" if libs else "")
            + (": ok" if row["available"] else f": unavailable\n         {row['problem']}")
        )
    tpu = report["extras"]["fray-tpu"]
    out.append(f"  extra  fray-tpu {tpu['version'] or 'not installed'} (jax {tpu['jax'] or '-'})")
    out.append(f"client: {choice['scheme']}, because {reason}")
    if "client" in choice or not args.connect:
        unbuilt = "(not connected; 'fray doctor --connect' builds it)"
        out.append(f"        {choice.get('client', unbuilt)}")
    out.append(f"state dir: {store.root} ({report['state']['runs']} runs recorded)")
    out += ["environment:", *[f"  {k}={v}" for k, v in env.items()]] if env else []
    out += [f"problem: {problem}" for problem in problems]
    sys.stdout.write("\n".join(out) + "\n")
    return 1 if problems else 0
