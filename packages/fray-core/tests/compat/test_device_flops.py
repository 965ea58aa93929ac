"""``fray.device_flops``: the predecessor's peak-FLOP/s lookups, same names and conventions."""

from __future__ import annotations

import logging
import subprocess
import sys

import pytest

from fray import device_flops as df
from fray.topology import TPU_TOPOLOGIES

# ---------------------------------------------------------------------------------------------
# Known values (dense peaks per device)


@pytest.mark.parametrize(
    ("device_type", "dtype", "expected"),
    [
        ("H100", "bf16", 989.5e12),
        ("H100", "fp8", 1979e12),
        ("H100", "fp32", 67e12),
        ("h100-pcie", "bf16", 756.5e12),
        ("H200", "bf16", 989.5e12),
        ("A100-40G", "bf16", 312e12),
        ("A100-80G", "tf32", 156e12),
        ("a100", "fp64", 19.5e12),
        ("A10G", "bf16", 125e12),
        ("L4", "bf16", 121e12),
        ("l40s", "fp8", 733e12),
        ("T4", "fp16", 65e12),
        ("T4", "int4", 260e12),
        ("V100", "fp16", 112e12),
        ("v100-sxm", "fp16", 125e12),
        ("B200", "bf16", 2.5e15),
        ("B200", "fp4", 10e15),
        ("GB200", "bf16", 2.5e15),
        ("mi300x", "bf16", 1307.4e12),
        ("mi355x", "fp8", 5.0332e15),
        ("auto", "bf16", 989.5e12),
        ("v3", "bf16", 61.5e12),
        ("v4", "bf16", 275e12),
        ("v5litepod", "int8", 393e12),
        ("v5p", "bf16", 459e12),
        ("v6e", "bf16", 918e12),
    ],
)
def test_known_peaks(device_type: str, dtype: str, expected: float) -> None:
    assert df.device_flops(device_type, dtype) == pytest.approx(expected, rel=1e-12)


def test_dtype_defaults_to_bf16() -> None:
    assert df.device_flops("v6e") == df.device_flops("v6e", "bf16") == 918e12


def test_tpu_slice_names_resolve_to_their_generation() -> None:
    assert df.device_flops("v4-8") == df.device_flops("v4-4096") == 275e12
    assert df.device_flops("v5litepod-16") == df.device_flops("v5e-16") == 197e12
    assert df.device_flops("v5p-128") == 459e12
    assert df.device_flops("v6e-256") == 918e12


def test_every_tpu_type_fray_schedules_has_a_bf16_peak() -> None:
    missing = [name for name in TPU_TOPOLOGIES if df.device_flops(name) is None]
    assert missing == []


@pytest.mark.parametrize(
    # The predecessor's GpuType names; all but the bf16-less V100 and T4 have a bf16 peak.
    "gpu_type",
    ["A10", "A100-40G", "A100-80G", "A10G", "B100", "H100", "H200", "L4", "auto"],
)
def test_predecessor_gpu_types_have_a_bf16_peak(gpu_type: str) -> None:
    assert df.device_flops(gpu_type) is not None


# ---------------------------------------------------------------------------------------------
# Names


@pytest.mark.parametrize(
    ("device_type", "key"),
    [
        ("H100", "h100"),
        ("  A100-80G ", "a100-80g"),
        ("v4-128", "v4"),
        ("v5litepod-16", "v5litepod"),
        ("V5E-8", "v5litepod"),
        ("v5e", "v5litepod"),
        ("v6e-8", "v6e"),
        ("GB200", "b200"),
        # not a TPU slice name, even though it starts with "v" and has a dash
        ("v100-sxm", "v100-sxm"),
        ("h100-pcie", "h100-pcie"),
        ("Some New Chip", "some new chip"),
    ],
)
def test_normalize_device_type(device_type: str, key: str) -> None:
    assert df.normalize_device_type(device_type) == key


@pytest.mark.parametrize(
    ("kind", "key"),
    [
        ("NVIDIA H100 80GB HBM3", "h100"),
        ("NVIDIA H100 PCIe", "h100-pcie"),
        ("NVIDIA H100 NVL", "h100"),
        ("NVIDIA H200", "h200"),
        ("NVIDIA GH200 480GB", "h200"),
        ("NVIDIA A100-SXM4-80GB", "a100-80g"),
        ("NVIDIA A100-SXM4-40GB", "a100-40g"),
        ("NVIDIA A100-PCIE-40GB", "a100-40g"),
        ("NVIDIA A100", "a100-40g"),
        ("NVIDIA A10G", "a10g"),
        ("NVIDIA A10", "a10"),
        ("NVIDIA A40", "a40"),
        ("NVIDIA RTX A6000", "a6000"),
        ("Tesla V100-SXM2-16GB", "v100-sxm"),
        ("Tesla V100S-PCIE-32GB", "v100s"),
        ("Tesla V100-PCIE-16GB", "v100"),
        ("Tesla T4", "t4"),
        ("NVIDIA L4", "l4"),
        ("NVIDIA L40S", "l40s"),
        ("NVIDIA B200", "b200"),
        ("NVIDIA GB200", "b200"),
        ("NVIDIA GB10", "gb10"),
        ("AMD Instinct MI300X", "mi300x"),
        ("AMD Instinct MI325X", "mi325x"),
        ("AMD Instinct MI355X", "mi355x"),
        ("TPU v2", "v2"),
        ("TPU v3", "v3"),
        ("TPU v4", "v4"),
        ("TPU v5 lite", "v5litepod"),
        ("TPU v5e", "v5litepod"),
        ("TPU v5", "v5p"),
        ("TPU v5p", "v5p"),
        ("TPU v6 lite", "v6e"),
        ("TPU v6e", "v6e"),
        # unknown devices come back lowercased
        ("cpu", "cpu"),
        ("NVIDIA L40", "nvidia l40"),
        ("NVIDIA RTX A4000", "nvidia rtx a4000"),
        ("NVIDIA GeForce RTX 4090", "nvidia geforce rtx 4090"),
    ],
)
def test_jax_device_kind_to_fray_device_type(kind: str, key: str) -> None:
    assert df.jax_device_kind_to_fray_device_type(kind) == key


def test_device_flops_for_jax_device() -> None:
    assert df.device_flops_for_jax_device("NVIDIA H100 80GB HBM3", "bf16") == 989.5e12
    assert df.device_flops_for_jax_device("TPU v5 lite") == 197e12
    assert df.device_flops_for_jax_device("TPU v4", "amp_bf16") == 275e12
    assert df.device_flops_for_jax_device("Tesla V100-SXM2-16GB", "fp16") == 125e12


@pytest.mark.parametrize(
    ("dtype", "name"),
    [
        ("bf16", "bf16"),
        ("BF16", "bf16"),
        ("bfloat16", "bf16"),
        ("amp_bf16", "bf16"),
        ("amp_bfloat16", "bf16"),
        ("float16", "fp16"),
        ("half", "fp16"),
        ("float32", "fp32"),
        ("float64", "fp64"),
        ("tfloat32", "tf32"),
        ("float8_e4m3fn", "fp8"),
        ("float8_e5m2", "fp8"),
        ("int8", "int8"),
        ("float4_e2m1fn", "fp4"),
        ("complex64", "complex64"),
    ],
)
def test_normalize_dtype(dtype: str, name: str) -> None:
    assert df.normalize_dtype(dtype) == name


# ---------------------------------------------------------------------------------------------
# Unknowns: None and a warning, never an exception


def test_unknown_device_is_none_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="fray.device_flops"):
        assert df.device_flops("cpu") is None
        assert df.device_flops_for_jax_device("NVIDIA L40") is None
    assert "'cpu'" in caplog.text
    assert "nvidia l40" in caplog.text


def test_unknown_dtype_is_none_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="fray.device_flops"):
        assert df.device_flops("V100", "bf16") is None
        assert df.device_flops("v4", "fp8") is None
        assert df.device_flops("H100", "complex64") is None
    assert "complex64" in caplog.text


def test_module_logger_is_the_one_warnings_go_to() -> None:
    assert df.logger is logging.getLogger("fray.device_flops")
    with pytest.raises(AttributeError):
        _ = df.no_such_name  # pyright: ignore[reportAttributeAccessIssue, reportUnknownVariableType]


def test_table_is_read_only() -> None:
    with pytest.raises(TypeError):
        df.DEVICE_FLOPS["h100"]["bf16"] = 1.0  # type: ignore[index]
    with pytest.raises(TypeError):
        df.DEVICE_FLOPS["new"] = {}  # type: ignore[index]


def test_import_is_light() -> None:
    code = (
        "import sys, fray.device_flops\n"
        "heavy = [m for m in ('jax', 'pydantic', 'numpy', 'ray', 'iris') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
