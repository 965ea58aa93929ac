"""The commands that run no job: ``fray tpu`` (the TPU slice types Fray knows),
``fray doctor`` (the installed backends, the client ``current_client()`` would pick, and why)
and ``fray migrate scan`` (a front end to :mod:`fray.migrate`)."""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import os
import platform
import sys
from typing import Any

from fray._client import BUILTIN_BACKENDS, parse_client_spec
from fray._secrets import redact_env
from fray.cli._common import (
    add_command,
    choose_spec,
    open_client,
    print_json,
    print_pairs,
    print_table,
    usage,
)
from fray.cli._jobs import RunStore
from fray.environment_variables import FRAY_CLIENT_SPEC
from fray.errors import FrayError
from fray.topology import TPU_TOPOLOGIES, TpuTopology, UnknownTpuTypeError, get_tpu_topology
from fray.topology import tpu_generations as generations

_LIBRARIES = {"ray": "ray", "iris": "marin-iris", "fake": "pytest"}  # what each backend drives
_ENV_PREFIXES = ("FRAY_", "RAY_ADDRESS", "IRIS_", "TPU_", "MEGASCALE_", "JAX_PLATFORMS")


def add_parser(sub: Any) -> None:
    """Adds ``fray tpu``, ``fray doctor`` and ``fray migrate``."""
    inner = add_command(sub, "tpu", None, help="TPU slice types: sizes, VMs, memory, env")
    inner = inner.add_subparsers(metavar="COMMAND")
    p = add_command(inner, "list", cmd_tpu_list, help="list every known TPU slice type", json=True)
    known = ", ".join(generations())
    p.add_argument("--generation", type=_generation, metavar="GEN", help=f"one of {known}")
    p = add_command(inner, "show", cmd_tpu_show, help="details of one TPU slice type", json=True)
    p.add_argument("tpu_type", type=tpu_type, metavar="TYPE", help="e.g. v5p-64 or v5e-16")
    p = add_command(
        sub, "doctor", cmd_doctor, help="show installed backends and which is used", json=True
    )
    p.add_argument("--connect", action="store_true", help="also build the client (may connect)")
    migrate = add_command(sub, "migrate", None, help="help moving a code base from Ray to Fray")
    what = "list each Ray usage with its Fray replacement, in migration order (see docs/cli.md)"
    p = add_command(
        migrate.add_subparsers(metavar="COMMAND"), "scan", cmd_scan, help=what, json=True
    )
    p.add_argument("paths", metavar="PATH", nargs="+", help="files or folders to scan")
    p.add_argument("--exit-zero", action="store_true", help="exit 0 even when usages are found")


def tpu_type(text: str) -> TpuTopology:
    """A flag type: a known TPU slice type (aliases accepted); else the closest names."""
    try:
        return get_tpu_topology(text)
    except UnknownTpuTypeError as err:
        closest = f"closest: {', '.join(err.suggestions)} (see 'fray tpu list')"
        hint = closest if err.suggestions else "see 'fray tpu list' for the known types"
        raise argparse.ArgumentTypeError(f"unknown TPU type {err.name!r}; {hint}") from None


def _generation(text: str) -> str:
    wanted = {"v5e": "v5litepod"}.get(text.strip().lower(), text.strip().lower())
    if wanted not in generations():
        known = ", ".join(generations())
        raise argparse.ArgumentTypeError(f"{text!r} is not a TPU generation; use {known} (or v5e)")
    return wanted


def _facts(t: TpuTopology) -> dict[str, Any]:
    return {
        "name": t.name,
        "generation": t.generation,
        "chips": t.chip_count,
        "hosts": t.host_count,
        "vms": t.vm_count,
        "chips_per_vm": t.chips_per_vm,
        "hbm_per_chip_gib": t.hbm_per_chip_gib,
        "hbm_total_gib": t.hbm_total_gib,
        "default_env": t.default_env_vars(),
    }


def cmd_tpu_list(args: argparse.Namespace) -> int:
    """``fray tpu list``."""
    rows = [_facts(t) for t in TPU_TOPOLOGIES.values() if args.generation in (None, t.generation)]
    if args.json:
        print_json(rows)
        return 0
    columns = ("name", "generation", "chips", "hosts", "vms", "chips_per_vm", "hbm_total_gib")
    headers = ("TYPE", "GENERATION", "CHIPS", "HOSTS", "VMS", "CHIPS/VM", "HBM GiB")
    print_table(headers, [[row[c] for c in columns] for row in rows])
    return 0


def cmd_tpu_show(args: argparse.Namespace) -> int:
    """``fray tpu show TYPE``."""
    t: TpuTopology = args.tpu_type
    if args.json:
        print_json(_facts(t))
        return 0
    env = " ".join(f"{k}={v!r}" for k, v in t.default_env_vars().items())
    print_pairs(
        [
            ("type", t.name),
            ("generation", t.generation),
            ("chips", t.chip_count),
            ("hosts", f"{t.host_count} (informational; scheduling uses VMs)"),
            ("VMs", f"{t.vm_count} (one replica per VM)"),
            ("chips per VM", t.chips_per_vm),
            ("HBM", f"{t.hbm_per_chip_gib} GiB per chip, {t.hbm_total_gib} GiB in all"),
            ("default env", env),
            ("use", f"fray run --tpu {t.name} --slices N -- CMD, or ResourceConfig.with_tpu"),
        ]
    )
    return 0


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def _backend(scheme: str, module: str, _cls: str, dist: str, extra: str) -> dict[str, Any]:
    row: dict[str, Any] = {"scheme": scheme, "package": dist, "version": _version(dist)}
    library = _LIBRARIES.get(scheme)
    row["libraries"] = {library: _version(library)} if library else {}
    try:
        importlib.import_module(module)
        row["problem"] = ""
    except Exception as err:  # not installed, or a broken install: say so, and how to fix it
        fix = f'; pip install "fray-core[{extra}]"' if extra and not row["version"] else ""
        row["problem"] = f"{type(err).__name__}: {err}{fix}"
    return {**row, "available": not row["problem"]}


def cmd_doctor(args: argparse.Namespace) -> int:
    """``fray doctor``: exit 0 when the chosen client is usable, 1 otherwise."""
    from fray import __version__

    plugins = {
        ep.name: (ep.module, ep.attr, ep.dist.name if ep.dist else "?", "")
        for ep in importlib.metadata.entry_points(group="fray.backends")
        if ep.name not in BUILTIN_BACKENDS
    }
    backends = {s: _backend(s, *how) for s, how in {**BUILTIN_BACKENDS, **plugins}.items()}
    spec, reason = choose_spec(None)  # what current_client() would pick, without connecting
    choice: dict[str, Any] = {"reason": reason, "spec": spec, "scheme": "?"}
    try:
        scheme = choice["scheme"] = parse_client_spec(spec).scheme if spec else "iris"
        known = f"{FRAY_CLIENT_SPEC}: {scheme!r} is not valid; unknown backend; known: "
        problem = backends[scheme]["problem"] if scheme in backends else known + ", ".join(backends)
        if not problem and (args.connect or scheme == "local"):
            with open_client(None) as client:
                choice["client"] = repr(client)
    except FrayError as err:
        problem = str(err)
    store = RunStore()
    env = redact_env({k: v for k, v in sorted(os.environ.items()) if k.startswith(_ENV_PREFIXES)})
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
    for r in backends.values():
        libs = "".join(f" ({lib} {v or 'not installed'})" for lib, v in r["libraries"].items())
        status = "ok" if r["available"] else f"unavailable\n         {r['problem']}"
        lines.append(f"  {r['scheme']:<6} {r['package']} {r['version'] or '-'}{libs}: {status}")
    lines.append(f"client: {choice['scheme']}, because {choice['reason']}")
    if "client" in choice or not args.connect:
        lines.append(f"        {choice.get('client', '(not connected: see --connect)')}")
    lines.append(f"state dir: {store.root} ({report['state']['runs']} runs recorded)")
    lines += ["environment:", *(f"  {k}={v}" for k, v in env.items())] if env else []
    lines += [f"problem: {problem}"] if problem else []
    print("\n".join(lines))
    return 1 if problem else 0


def cmd_scan(args: argparse.Namespace) -> int:
    """``fray migrate scan``."""
    from fray.migrate import scan

    for path in args.paths:
        if not os.path.exists(path):
            raise usage("PATH", f"{path!r} does not exist; give a Python file or a folder")
    report = scan(args.paths)
    if args.json:
        print_json(report.as_dict())
    else:
        sys.stdout.write(report.as_text())

    for error in report.errors:  # the report is incomplete: name each file, and never exit 0
        where = f"{error.path}:{error.line}" if error.line else error.path
        sys.stderr.write(f"{args.prog}: error: cannot parse {where}: {error.message}\n")
    return 1 if (report.findings and not args.exit_zero) or report.errors else 0
