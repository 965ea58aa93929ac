"""``fray tpu list|show``: the TPU slice types Fray knows."""

from __future__ import annotations

import argparse
from typing import Any

from fray.cli._common import add_command, print_json, print_pairs, print_table
from fray.topology import TPU_TOPOLOGIES, TpuTopology, UnknownTpuTypeError, get_tpu_topology
from fray.topology import tpu_generations as generations

__all__ = ["add_parser", "tpu_type"]


def add_parser(sub: Any) -> None:
    """Adds ``fray tpu`` and its subcommands."""
    inner = add_command(sub, "tpu", None, help="TPU slice types: sizes, VMs, memory, env")
    inner = inner.add_subparsers(metavar="COMMAND")
    p = add_command(inner, "list", cmd_list, help="list every known TPU slice type")
    known = ", ".join(generations())
    p.add_argument("--generation", type=_generation, metavar="GEN", help=f"one of {known}")
    p.add_argument("--json", action="store_true", help="print JSON")
    p = add_command(inner, "show", cmd_show, help="details of one TPU slice type")
    p.add_argument("tpu_type", type=tpu_type, metavar="TYPE", help="e.g. v5p-64 or v5e-16")
    p.add_argument("--json", action="store_true", help="print JSON")


def tpu_type(text: str) -> TpuTopology:
    """A flag type: a known TPU slice type (aliases accepted); else the closest names."""
    try:
        return get_tpu_topology(text)
    except UnknownTpuTypeError as err:
        hint = "see 'fray tpu list' for the known types"
        if err.suggestions:
            hint = f"closest: {', '.join(err.suggestions)} (see 'fray tpu list')"
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


def cmd_list(args: argparse.Namespace) -> int:
    """``fray tpu list``."""
    rows = [_facts(t) for t in TPU_TOPOLOGIES.values() if args.generation in (None, t.generation)]
    if args.json:
        print_json(rows)
        return 0
    columns = ("name", "generation", "chips", "hosts", "vms", "chips_per_vm", "hbm_total_gib")
    headers = ("TYPE", "GENERATION", "CHIPS", "HOSTS", "VMS", "CHIPS/VM", "HBM GiB")
    print_table(headers, [[row[c] for c in columns] for row in rows])
    return 0


def cmd_show(args: argparse.Namespace) -> int:
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
            ("request", f'ResourceConfig.with_tpu("{t.name}", slice_count=N)'),
            ("cli", f"fray run --tpu {t.name} --slices N -- CMD"),
        ]
    )
    return 0
