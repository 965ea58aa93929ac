"""Tests for the TPU slice type table in ``fray.topology``.

The module is loaded straight from its file so these tests do not depend on the rest
of the ``fray`` package importing cleanly.
"""

from __future__ import annotations

import importlib.util
import json
import pickle
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

_TPU_PATH = Path(__file__).resolve().parents[1] / "src" / "fray" / "topology.py"


def _load_tpu_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("_fray_tpu_under_test", _TPU_PATH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    # dataclasses looks the defining module up in sys.modules while building the class.
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


tpu = _load_tpu_module()

# Every row of the reference table: name -> (chips, hosts, VMs, chips per VM).
EXPECTED_ROWS: dict[str, tuple[int, int, int, int]] = {
    "v4-8": (4, 1, 1, 4),
    "v4-16": (8, 2, 2, 4),
    "v4-32": (16, 4, 4, 4),
    "v4-64": (32, 8, 8, 4),
    "v4-128": (64, 16, 16, 4),
    "v4-256": (128, 32, 32, 4),
    "v4-512": (256, 64, 64, 4),
    "v4-1024": (512, 128, 128, 4),
    "v4-2048": (1024, 256, 256, 4),
    "v4-4096": (2048, 512, 512, 4),
    "v5litepod-1": (1, 1, 1, 1),
    "v5litepod-2": (2, 1, 1, 2),
    "v5litepod-4": (4, 1, 1, 4),
    "v5litepod-8": (8, 1, 1, 8),
    "v5litepod-16": (16, 2, 4, 4),
    "v5litepod-32": (32, 4, 8, 4),
    "v5litepod-64": (64, 8, 16, 4),
    "v5litepod-128": (128, 16, 32, 4),
    "v5litepod-256": (256, 32, 64, 4),
    "v5p-8": (4, 1, 1, 4),
    "v5p-16": (8, 2, 2, 4),
    "v5p-32": (16, 4, 4, 4),
    "v5p-64": (32, 8, 8, 4),
    "v5p-128": (64, 16, 16, 4),
    "v5p-256": (128, 32, 32, 4),
    "v5p-512": (256, 64, 64, 4),
    "v5p-1024": (512, 128, 128, 4),
    "v5p-2048": (1024, 256, 256, 4),
    "v5p-4096": (2048, 512, 512, 4),
    "v5p-8192": (4096, 1024, 1024, 4),
    "v5p-12288": (6144, 1536, 1536, 4),
    "v6e-1": (1, 1, 1, 1),
    "v6e-4": (4, 1, 1, 4),
    "v6e-8": (8, 1, 1, 8),
    "v6e-16": (16, 4, 4, 4),
    "v6e-32": (32, 8, 8, 4),
    "v6e-64": (64, 16, 16, 4),
    "v6e-128": (128, 32, 32, 4),
    "v6e-256": (256, 64, 64, 4),
}

KNOWN_SUMMARY = (
    "Known types: v4-8..v4-4096, v5litepod-1..v5litepod-256 (alias v5e-N), "
    "v5p-8..v5p-12288, v6e-1..v6e-256."
)


# --- table contents ---------------------------------------------------------------


@pytest.mark.parametrize(("name", "row"), sorted(EXPECTED_ROWS.items()))
def test_rows_match_reference_table(name: str, row: tuple[int, int, int, int]) -> None:
    topo = tpu.get_tpu_topology(name)
    assert topo.name == name
    assert (topo.chip_count, topo.host_count, topo.vm_count, topo.chips_per_vm) == row


def test_table_has_exactly_the_reference_types_in_order() -> None:
    assert set(tpu.TPU_TOPOLOGIES) == set(EXPECTED_ROWS)
    assert list(tpu.TPU_TOPOLOGIES) == list(EXPECTED_ROWS)  # generation, then size


@pytest.mark.parametrize(
    "name",
    [
        "v4-8",
        "v4-16",
        "v4-4096",
        "v5litepod-1",
        "v5litepod-2",
        "v5litepod-16",
        "v5litepod-256",
        "v5p-8",
        "v5p-128",
        "v5p-12288",
        "v6e-1",
        "v6e-8",
        "v6e-16",
        "v6e-256",
    ],
)
def test_required_rows_present(name: str) -> None:
    assert name in tpu.TPU_TOPOLOGIES
    assert tpu.TPU_TOPOLOGIES[name].name == name


def test_literal_spot_checks() -> None:
    # Written out in full, independent of EXPECTED_ROWS.
    t = tpu.TpuTopology
    assert tpu.get_tpu_topology("v4-8") == t("v4-8", "v4", 4, 1, 1, 4, 32)
    assert tpu.get_tpu_topology("v5litepod-16") == t("v5litepod-16", "v5litepod", 16, 2, 4, 4, 16)
    assert tpu.get_tpu_topology("v5p-12288") == t("v5p-12288", "v5p", 6144, 1536, 1536, 4, 95)
    assert tpu.get_tpu_topology("v6e-16") == t("v6e-16", "v6e", 16, 4, 4, 4, 32)


def test_names_unique_and_consistent() -> None:
    names = [topo.name for topo in tpu.TPU_TOPOLOGIES.values()]
    assert len(names) == len(set(names)) == len(EXPECTED_ROWS)
    for key, topo in tpu.TPU_TOPOLOGIES.items():
        assert key == topo.name
        assert topo.name.startswith(topo.generation + "-")
        assert topo.generation in tpu.tpu_generations()
        assert topo.chip_count == topo.vm_count * topo.chips_per_vm
        assert topo.host_count <= topo.vm_count
        assert topo.is_multi_vm == (topo.vm_count > 1)


@pytest.mark.parametrize(
    ("generation", "cores_per_chip"), [("v4", 2), ("v5p", 2), ("v5litepod", 1), ("v6e", 1)]
)
def test_name_suffix_semantics(generation: str, cores_per_chip: int) -> None:
    for topo in tpu.TPU_TOPOLOGIES.values():
        if topo.generation == generation:
            assert int(topo.name.rpartition("-")[2]) == topo.chip_count * cores_per_chip


def test_table_is_read_only() -> None:
    with pytest.raises(TypeError):
        tpu.TPU_TOPOLOGIES["v9-1"] = tpu.TPU_TOPOLOGIES["v4-8"]  # type: ignore[index]
    topo = tpu.get_tpu_topology("v4-8")
    with pytest.raises(AttributeError):
        topo.chip_count = 99  # type: ignore[misc]


def test_generations() -> None:
    assert tpu.tpu_generations() == ("v4", "v5litepod", "v5p", "v6e")


# --- memory and environment -----------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "per_chip", "total"),
    [
        ("v4-8", 32, 128),
        ("v5litepod-32", 16, 512),
        ("v5p-8", 95, 380),
        ("v6e-8", 32, 256),
    ],
)
def test_hbm(name: str, per_chip: int, total: int) -> None:
    topo = tpu.get_tpu_topology(name)
    assert topo.hbm_per_chip_gib == per_chip
    assert topo.hbm_total_gib == total


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("v4-8", {"JAX_PLATFORMS": ""}),
        ("v4-4096", {"JAX_PLATFORMS": ""}),
        (
            "v5litepod-4",
            {"JAX_PLATFORMS": "", "LIBTPU_INIT_ARGS": "--xla_tpu_scoped_vmem_limit_kib=50000"},
        ),
        (
            "v5p-64",
            {"JAX_PLATFORMS": "", "LIBTPU_INIT_ARGS": "--xla_tpu_scoped_vmem_limit_kib=50000"},
        ),
        (
            "v6e-16",
            {"JAX_PLATFORMS": "", "LIBTPU_INIT_ARGS": "--xla_tpu_scoped_vmem_limit_kib=98304"},
        ),
    ],
)
def test_default_env_vars(name: str, expected: dict[str, str]) -> None:
    assert tpu.get_tpu_topology(name).default_env_vars() == expected


def test_default_env_vars_returns_fresh_dict() -> None:
    topo = tpu.get_tpu_topology("v6e-8")
    topo.default_env_vars()["JAX_PLATFORMS"] = "cpu"
    assert topo.default_env_vars()["JAX_PLATFORMS"] == ""


def test_multi_vm() -> None:
    assert not tpu.get_tpu_topology("v5litepod-8").is_multi_vm
    assert tpu.get_tpu_topology("v5litepod-16").is_multi_vm
    assert tpu.get_tpu_topology("v4-16").is_multi_vm


# --- name handling -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("given", "canonical"),
    [
        ("v5e-16", "v5litepod-16"),
        ("V5E-1", "v5litepod-1"),
        ("  v5e-256\n", "v5litepod-256"),
        ("V4-8", "v4-8"),
        ("V5LitePod-32", "v5litepod-32"),
        (" v6e-8 ", "v6e-8"),
        ("v5P-12288", "v5p-12288"),
    ],
)
def test_canonical_names(given: str, canonical: str) -> None:
    assert tpu.canonical_tpu_name(given) == canonical
    assert tpu.get_tpu_topology(given) is tpu.TPU_TOPOLOGIES[canonical]


def test_alias_is_not_a_table_key() -> None:
    assert "v5e-16" not in tpu.TPU_TOPOLOGIES
    assert tpu.get_tpu_topology("v5e-16") == tpu.get_tpu_topology("v5litepod-16")


# --- unknown names ---------------------------------------------------------------------


def test_unknown_message_exact() -> None:
    with pytest.raises(tpu.UnknownTpuTypeError) as excinfo:
        tpu.get_tpu_topology("v5litepod-12")
    err = excinfo.value
    assert issubclass(tpu.UnknownTpuTypeError, ValueError)
    assert err.name == "v5litepod-12"
    assert err.suggestions == ("v5litepod-16", "v5litepod-8", "v5litepod-128")
    assert str(err) == (
        "Unknown TPU type 'v5litepod-12'. Did you mean one of: v5litepod-16, v5litepod-8, "
        "v5litepod-128? " + KNOWN_SUMMARY
    )


def test_garbage_name_lists_known_ranges() -> None:
    with pytest.raises(tpu.UnknownTpuTypeError) as excinfo:
        tpu.canonical_tpu_name("potato")
    assert excinfo.value.suggestions == ()
    assert str(excinfo.value) == "Unknown TPU type 'potato'. " + KNOWN_SUMMARY


@pytest.mark.parametrize(
    ("name", "must_suggest"),
    [
        ("v5p-384", {"v5p-256", "v5p-512"}),
        ("v4-7", {"v4-8"}),
        ("v4-99999", {"v4-4096"}),
        ("v5e-12", {"v5litepod-16", "v5litepod-8"}),
        ("v6e-2", {"v6e-1"}),
        ("v5litepod16", {"v5litepod-16"}),
    ],
)
def test_suggestions(name: str, must_suggest: set[str]) -> None:
    with pytest.raises(tpu.UnknownTpuTypeError) as excinfo:
        tpu.get_tpu_topology(name)
    suggestions = excinfo.value.suggestions
    assert must_suggest <= set(suggestions)
    assert 1 <= len(suggestions) <= 3
    assert all(s in tpu.TPU_TOPOLOGIES for s in suggestions)
    assert repr(name) in str(excinfo.value)


def test_v5p_suggestions_are_real_sizes_nearest_first() -> None:
    with pytest.raises(tpu.UnknownTpuTypeError) as excinfo:
        tpu.get_tpu_topology("v5p-384")
    assert excinfo.value.suggestions[:2] == ("v5p-512", "v5p-256")


def test_unknown_generation_still_suggests() -> None:
    with pytest.raises(tpu.UnknownTpuTypeError) as excinfo:
        tpu.get_tpu_topology("v7-8")
    suggestions = excinfo.value.suggestions
    assert suggestions
    assert all(s.endswith("-8") for s in suggestions)
    assert "Did you mean" in str(excinfo.value)


@pytest.mark.parametrize("bad", [16, None, 8.0, b"v4-8", ["v4-8"]])
def test_non_string_name(bad: object) -> None:
    with pytest.raises(tpu.UnknownTpuTypeError) as excinfo:
        tpu.get_tpu_topology(bad)  # type: ignore[arg-type]
    err = excinfo.value
    assert err.name is bad or err.name == bad
    assert err.suggestions == ()
    message = str(err)
    assert message.startswith("TPU type must be a string such as 'v5litepod-16', got ")
    assert type(bad).__name__ in message
    assert message.endswith(KNOWN_SUMMARY)


def test_empty_name() -> None:
    for blank in ("", "   "):
        with pytest.raises(tpu.UnknownTpuTypeError) as excinfo:
            tpu.get_tpu_topology(blank)
        assert excinfo.value.suggestions == ()
        assert str(excinfo.value) == f"Unknown TPU type {blank!r}. " + KNOWN_SUMMARY


def test_error_survives_pickle() -> None:
    with pytest.raises(tpu.UnknownTpuTypeError) as excinfo:
        tpu.get_tpu_topology("v5litepod-12")
    # Pickle needs the class importable by name; register the path-loaded module.
    sys.modules.setdefault(tpu.__name__, tpu)
    clone = pickle.loads(pickle.dumps(excinfo.value))
    assert type(clone) is tpu.UnknownTpuTypeError
    assert str(clone) == str(excinfo.value)
    assert clone.name == "v5litepod-12"
    assert clone.suggestions == excinfo.value.suggestions


# --- slices_for_replicas ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "replicas", "slices"),
    [
        ("v4-8", 1, 1),
        ("v4-8", 3, 3),
        ("v4-32", 4, 1),
        ("v4-32", 12, 3),
        ("v5e-16", 8, 2),
        ("v5litepod-256", 64, 1),
        ("v5p-12288", 1536, 1),
    ],
)
def test_slices_for_replicas(name: str, replicas: int, slices: int) -> None:
    assert tpu.slices_for_replicas(name, replicas) == slices


@pytest.mark.parametrize("replicas", [0, -4, 2, 6])
def test_slices_for_replicas_rejects_non_multiples(replicas: int) -> None:
    with pytest.raises(ValueError) as excinfo:
        tpu.slices_for_replicas("v5litepod-16", replicas)
    assert not isinstance(excinfo.value, tpu.UnknownTpuTypeError)
    message = str(excinfo.value)
    assert "replicas must be a multiple of 4 VMs per slice of v5litepod-16" in message
    assert f"got {replicas}" in message


def test_slices_for_replicas_single_vm_rejects_zero() -> None:
    with pytest.raises(ValueError, match="multiple of 1 VM per slice of v6e-8"):
        tpu.slices_for_replicas("v6e-8", 0)


@pytest.mark.parametrize("replicas", [True, 4.0, "4"])
def test_slices_for_replicas_rejects_non_int(replicas: object) -> None:
    with pytest.raises(TypeError, match="replicas must be an int"):
        tpu.slices_for_replicas("v4-8", replicas)  # type: ignore[arg-type]


def test_slices_for_replicas_unknown_type() -> None:
    with pytest.raises(tpu.UnknownTpuTypeError):
        tpu.slices_for_replicas("v4-7", 1)


# --- import hygiene -------------------------------------------------------------------

_IMPORT_PROBE = """
import importlib.util, json, sys
before = set(sys.modules)
spec = importlib.util.spec_from_file_location("_fray_tpu_probe", sys.argv[1])
module = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = module
spec.loader.exec_module(module)
new = sorted(set(sys.modules) - before - {spec.name})
print(json.dumps({"new": new, "stdlib": sorted(sys.stdlib_module_names)}))
"""


def test_import_pulls_in_only_stdlib() -> None:
    result = subprocess.run(
        [sys.executable, "-I", "-c", _IMPORT_PROBE, str(_TPU_PATH)],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    report = json.loads(result.stdout)
    stdlib = set(report["stdlib"])
    third_party = [m for m in report["new"] if m.partition(".")[0] not in stdlib]
    assert third_party == []
    # Suggestions are computed lazily; the error path's helpers are not imported eagerly.
    assert "difflib" not in report["new"]
