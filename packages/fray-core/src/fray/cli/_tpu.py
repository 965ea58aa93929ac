"""``fray tpu list|show``: the TPU slice types Fray knows."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from fray.cli._common import UsageError, print_json, print_table
from fray.topology import (
    TPU_TOPOLOGIES,
    TpuTopology,
    UnknownTpuTypeError,
    get_tpu_topology,
    tpu_generations,
)

__all__ = ["add_parser"]


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    """Adds ``fray tpu`` and its subcommands."""
    tpu: argparse.ArgumentParser = sub.add_parser(
        "tpu", parents=[common], help="TPU slice types: sizes, VMs, memory, env"
    )
    inner = tpu.add_subparsers(dest="tpu_command", metavar="COMMAND")
    p = inner.add_parser("list", parents=[common], help="list every known TPU slice type")
    p.add_argument(
        "--generation", metavar="GEN", help=f"only one generation ({', '.join(tpu_generations())})"
    )
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(handler=cmd_list)
    p = inner.add_parser("show", parents=[common], help="details of one TPU slice type")
    p.add_argument("tpu_type", metavar="TYPE", help="e.g. v5p-64, v5litepod-16 or v5e-16")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(handler=cmd_show)

    def no_command(_args: argparse.Namespace) -> int:
        tpu.print_help(sys.stderr)
        return 2

    tpu.set_defaults(handler=no_command)


def _as_dict(topology: TpuTopology) -> dict[str, Any]:
    return {
        "name": topology.name,
        "generation": topology.generation,
        "chips": topology.chip_count,
        "hosts": topology.host_count,
        "vms": topology.vm_count,
        "chips_per_vm": topology.chips_per_vm,
        "hbm_per_chip_gib": topology.hbm_per_chip_gib,
        "hbm_total_gib": topology.hbm_total_gib,
        "default_env": topology.default_env_vars(),
    }


def cmd_list(args: argparse.Namespace) -> int:
    """``fray tpu list``."""
    rows = list(TPU_TOPOLOGIES.values())
    if args.generation is not None:
        wanted = args.generation.strip().lower()
        wanted = {"v5e": "v5litepod"}.get(wanted, wanted)
        if wanted not in tpu_generations():
            raise UsageError(
                "--generation",
                f"{args.generation!r} is not a TPU generation; use one of "
                f"{', '.join(tpu_generations())} (or v5e)",
            )
        rows = [t for t in rows if t.generation == wanted]
    if args.json:
        print_json([_as_dict(t) for t in rows])
        return 0
    print_table(
        ["TYPE", "GENERATION", "CHIPS", "HOSTS", "VMS", "CHIPS/VM", "HBM GiB"],
        [
            [
                t.name,
                t.generation,
                t.chip_count,
                t.host_count,
                t.vm_count,
                t.chips_per_vm,
                t.hbm_total_gib,
            ]
            for t in rows
        ],
    )
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    """``fray tpu show TYPE``."""
    try:
        topology = get_tpu_topology(args.tpu_type)
    except UnknownTpuTypeError as err:
        raise UsageError("TYPE", _short_unknown(err)) from None
    if args.json:
        print_json(_as_dict(topology))
        return 0
    env = topology.default_env_vars()
    lines = [
        ("type", topology.name),
        ("generation", topology.generation),
        ("chips", topology.chip_count),
        ("hosts", f"{topology.host_count} (informational; scheduling uses VMs)"),
        ("VMs", f"{topology.vm_count} (one replica per VM)"),
        ("chips per VM", topology.chips_per_vm),
        ("HBM", f"{topology.hbm_per_chip_gib} GiB per chip, {topology.hbm_total_gib} GiB in all"),
        ("default env", " ".join(f"{k}={v!r}" for k, v in env.items())),
        ("request", f'ResourceConfig.with_tpu("{topology.name}", slice_count=N)'),
        ("cli", f"fray run --tpu {topology.name} --slices N -- CMD"),
    ]
    width = max(len(k) for k, _ in lines)
    for key, value in lines:
        sys.stdout.write(f"{key + ':':<{width + 1}} {value}\n")
    return 0


def _short_unknown(err: UnknownTpuTypeError) -> str:
    """The error without the long list of known ranges, plus where to see them."""
    name = err.name
    if err.suggestions:
        closest = ", ".join(err.suggestions)
        return f"unknown TPU type {name!r}; closest: {closest} (see 'fray tpu list')"
    return f"unknown TPU type {name!r}; see 'fray tpu list' for the known types"
