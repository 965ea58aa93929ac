"""Peak dense FLOP/s per accelerator chip, for model FLOPs utilisation (MFU) logging.

The figures are per device as JAX counts devices (one GPU, one TPU chip; a v3 core) and are
*dense*: where a vendor quotes tensor-core throughput with 2:4 structured sparsity, the table
holds half of it. The numbers are the ones the predecessor's ``fray.device_flops`` table
carries (each entry names the vendor document it comes from), so MFU reported through Fray
matches what Marin reported before.

Example:
    >>> device_flops("H100")
    989500000000000.0
    >>> device_flops_for_jax_device("TPU v5 lite", "bfloat16")
    197000000000000.0
    >>> device_flops("v5litepod-16", "fp64") is None
    True

Lookups never raise on an unknown device or dtype: they log a warning and return ``None``,
so a training loop on new hardware keeps running without MFU.

The module imports only the standard library (no jax, no pydantic), so it is cheap to use
from a training loop or from ``ResourceConfig``.
"""

# Import cost matters here: no ``from __future__`` import, no regular expressions (``logging``
# is imported by ``fray`` itself).
import logging
from collections.abc import Mapping
from types import MappingProxyType
from typing import Literal

__all__ = [
    "DEVICE_FLOPS",
    "FlopDtype",
    "device_flops",
    "device_flops_for_jax_device",
    "jax_device_kind_to_fray_device_type",
    "normalize_device_type",
    "normalize_dtype",
]

FlopDtype = Literal["bf16", "fp16", "fp32", "fp64", "tf32", "int8", "int4", "fp8", "fp4"]
"""The dtype names the table is keyed by (see :func:`normalize_dtype` for accepted spellings)."""


logger = logging.getLogger(__name__)  # public, as in the predecessor's module


def _dense(sparse: float) -> float:
    """The dense peak behind a figure quoted with 2:4 structured sparsity."""
    return sparse / 2


# ---------------------------------------------------------------------------------------------
# The table. Shared specs are named once; devices with the same silicon point at them.

# NVIDIA H100 Tensor Core GPU datasheet, SXM5 column (tensor figures quoted with sparsity).
_H100_SXM: dict[str, float] = {
    "fp64": 67e12,
    "fp32": 67e12,
    "tf32": _dense(989e12),
    "fp16": _dense(1.979e15),
    "bf16": _dense(1.979e15),
    "fp8": _dense(3.958e15),
    "int8": _dense(3.958e15),
}

# NVIDIA A100 Tensor Core GPU datasheet (dense figures; 40GB and 80GB have the same compute).
_A100: dict[str, float] = {
    "fp64": 19.5e12,
    "fp32": 19.5e12,
    "tf32": 156e12,
    "fp16": 312e12,
    "bf16": 312e12,
}

# NVIDIA A10 datasheet; the A10G (AWS) is rated the same.
_A10: dict[str, float] = {
    "fp32": 31.2e12,
    "tf32": 62.5e12,
    "fp16": 125e12,
    "bf16": 125e12,
}

# AMD Instinct MI300X data sheet, dense peaks; fp32/fp64 are its "matrix" rows. The MI325X
# product brief lists the same compute (same CUs and clock, more HBM).
_MI300: dict[str, float] = {
    "fp64": 163.4e12,
    "fp32": 163.4e12,
    "tf32": 653.7e12,
    "fp16": 1307.4e12,
    "bf16": 1307.4e12,
    "fp8": 2614.9e12,
    "int8": 2614.9e12,
}

_TABLE: dict[str, dict[str, float]] = {
    # ---- NVIDIA
    "h100": _H100_SXM,
    # 2022 H100 datasheet, PCIe column (later revisions list only SXM and NVL).
    "h100-pcie": {
        "fp64": 51e12,
        "fp32": 51e12,
        "tf32": _dense(756e12),
        "fp16": _dense(1.513e15),
        "bf16": _dense(1.513e15),
        "fp8": _dense(3.026e15),
        "int8": _dense(3.026e15),
    },
    # NVIDIA HPC datasheet (SC23): the H200 has the H100 SXM's compute.
    "h200": _H100_SXM,
    # Kept as an alias of the 40GB part for older configs.
    "a100": _A100,
    "a100-40g": _A100,
    "a100-80g": _A100,
    "a10": _A10,
    "a10g": _A10,
    # NVIDIA A40 datasheet.
    "a40": {"fp32": 37.4e12, "tf32": 74.8e12, "fp16": 149.7e12, "bf16": 149.7e12},
    # NVIDIA RTX A6000 datasheet: only its 309.7 TFLOPS tensor figure assumes sparsity.
    "a6000": {
        "fp32": 38.7e12,
        "tf32": _dense(309.7e12),
        "fp16": _dense(309.7e12),
        "bf16": _dense(309.7e12),
    },
    # No B100 figures were published when the table was made: rated as an H100 SXM.
    "b100": _H100_SXM,
    # NVIDIA Blackwell architecture technical brief, GB200 NVL72 rack totals / 72 GPUs (JAX
    # names these GPUs "NVIDIA GB200"; the HGX B200 is clocked lower). Tensor rows halved.
    "b200": {
        "fp64": 40e12,
        "fp32": 80e12,
        "tf32": _dense(2.5e15),
        "fp16": _dense(5e15),
        "bf16": _dense(5e15),
        "fp8": _dense(10e15),
        "int8": _dense(10e15),
        "fp4": _dense(20e15),
    },
    # NVIDIA V100 datasheet: PCIe, SXM2 and V100S columns.
    "v100": {"fp64": 7e12, "fp32": 14e12, "fp16": 112e12},
    "v100-sxm": {"fp64": 7.8e12, "fp32": 15.7e12, "fp16": 125e12},
    "v100s": {"fp64": 8.2e12, "fp32": 16.4e12, "fp16": 130e12},
    # NVIDIA T4 Tensor Core datasheet (dense).
    "t4": {"fp32": 8.1e12, "fp16": 65e12, "int8": 130e12, "int4": 260e12},
    # NVIDIA L4 Tensor Core datasheet (tensor figures quoted with sparsity).
    "l4": {
        "fp32": 30.3e12,
        "tf32": _dense(120e12),
        "fp16": _dense(242e12),
        "bf16": _dense(242e12),
        "fp8": _dense(485e12),
        "int8": _dense(485e12),
    },
    # NVIDIA L40S product page (tensor figures quoted with sparsity).
    "l40s": {
        "fp32": 91.6e12,
        "tf32": _dense(366.4e12),
        "fp16": _dense(733e12),
        "bf16": _dense(733e12),
        "fp8": _dense(1466e12),
        "int8": _dense(1466e12),
    },
    # NVIDIA GB10 (DGX Spark): bf16 only.
    "gb10": {"bf16": 100e12},
    # Any GPU ("auto" in GpuConfig): rated as an H100 SXM.
    "auto": _H100_SXM,
    # ---- AMD Instinct
    "mi300x": _MI300,
    "mi325x": _MI300,
    # AMD Instinct MI350X brochure, dense; fp8 is the OCP-FP8 row.
    "mi350x": {
        "fp64": 72.1e12,
        "fp32": 144.2e12,
        "fp16": 2.3096e15,
        "bf16": 2.3096e15,
        "fp8": 4.614e15,
        "int8": 4.614e15,
    },
    # AMD Instinct MI355X brochure: the MI350X die at a higher clock; fp8 is OCP-FP8.
    "mi355x": {
        "fp64": 78.6e12,
        "fp32": 157.3e12,
        "fp16": 2.5166e15,
        "bf16": 2.5166e15,
        "fp8": 5.0332e15,
        "int8": 5.0332e15,
    },
    # ---- Google Cloud TPU (Cloud TPU system architecture pages, one per generation)
    # v3 is quoted per chip, but JAX sees each of its two cores as a device.
    "v3": {"bf16": 123e12 / 2},
    "v4": {"bf16": 275e12, "int8": 275e12},
    "v5litepod": {"bf16": 197e12, "int8": 393e12},
    # "v5" is how older code spelt v5p.
    "v5": {"bf16": 459e12},
    "v5p": {"bf16": 459e12},
    "v6e": {"bf16": 918e12, "int8": 1836e12},
    # ---- AWS Trainium (AWS Inferentia2/Trainium blog figures per chip; two devices a chip).
    "trn1": {
        "fp32": 47.5e12 / 2,
        "tf32": 47.5e12 / 2,
        "fp16": 190e12 / 2,
        "bf16": 190e12 / 2,
        "int8": 380e12 / 2,
    },
}

DEVICE_FLOPS: Mapping[str, Mapping[str, float]] = MappingProxyType(
    {name: MappingProxyType(dict(spec)) for name, spec in _TABLE.items()}
)
"""Peak dense FLOP/s per device, by lowercase device type and then by dtype (read-only)."""

del _TABLE

# Spellings that are not table keys, mapped to the key they mean.
_DEVICE_ALIASES: Mapping[str, str] = MappingProxyType(
    {
        "v5e": "v5litepod",  # TpuConfig accepts v5e-N for v5litepod-N
        "gb200": "b200",  # GpuConfig / JAX name of the NVL72 Blackwell GPU
        "gh200": "h200",  # Grace Hopper: H100/H200-class GPU
    }
)

# dtype spellings (JAX/NumPy names and short forms) mapped to the table's names.
_DTYPE_ALIASES: Mapping[str, str] = MappingProxyType(
    {
        "bfloat16": "bf16",
        "float16": "fp16",
        "half": "fp16",
        "f16": "fp16",
        "float32": "fp32",
        "float": "fp32",
        "single": "fp32",
        "f32": "fp32",
        "float64": "fp64",
        "double": "fp64",
        "f64": "fp64",
        "tfloat32": "tf32",
        "float8": "fp8",
        "f8": "fp8",
        "float4": "fp4",
        "f4": "fp4",
    }
)


def _is_tpu_slice_name(name: str) -> bool:
    """``v4-8``, ``v5litepod-16``, ``v6e-256``: a generation, a dash and a digit count."""
    head, dash, count = name.partition("-")
    return (
        bool(dash)
        and count.isdigit()
        and len(head) > 1
        and head[0] == "v"
        and head[1].isdigit()
        and head.isalnum()
    )


def normalize_device_type(device_type: str) -> str:
    """The table key for a Fray device type (a ``GpuConfig``/``TpuConfig`` variant):
    lowercase, TPU slice names cut to their generation. ``"H100"`` → ``"h100"``,
    ``"v5e-16"`` → ``"v5litepod"``; an unknown name comes back lowercased. For JAX device
    kinds use :func:`jax_device_kind_to_fray_device_type`.
    """
    kind = device_type.strip().lower()
    if _is_tpu_slice_name(kind):
        kind = kind.partition("-")[0]
    return _DEVICE_ALIASES.get(kind, kind)


def _tpu_kind_to_device_type(rest: str) -> str:
    """The table key for what follows ``"TPU"`` in a JAX device kind (``"v5 lite"``)."""
    words = rest.split()
    generation = words[0] if words else ""
    lite = "lite" in words[1:] or generation.endswith(("e", "lite", "litepod"))
    number = generation.lstrip("v").rstrip("abcdefghijklmnopqrstuvwxyz")
    if number == "5":
        return "v5litepod" if lite else "v5p"
    if number == "6" and lite:
        return "v6e"
    return "".join(words)


# JAX GPU device kinds, split into words, matched word by word (so "A40" never matches an
# "RTX A4000"). The first word naming a known model decides.
_GPU_WORDS: Mapping[str, str] = MappingProxyType(
    {
        "h200": "h200",
        "gh200": "h200",
        "a10g": "a10g",
        "a10": "a10",
        "a40": "a40",
        "a6000": "a6000",
        "v100s": "v100s",
        "t4": "t4",
        "l4": "l4",
        "l40s": "l40s",
        "b100": "b100",
        "b200": "b200",
        "gb200": "b200",
        "gb10": "gb10",
        "mi300x": "mi300x",
        "mi325x": "mi325x",
        "mi350x": "mi350x",
        "mi355x": "mi355x",
    }
)


def jax_device_kind_to_fray_device_type(kind: str) -> str:
    """The :data:`DEVICE_FLOPS` key of a JAX ``device.device_kind`` (an unknown kind comes
    back lowercased): ``"NVIDIA H100 80GB HBM3"`` → ``"h100"``, ``"NVIDIA A100-SXM4-80GB"``
    → ``"a100-80g"``, ``"TPU v5 lite"`` → ``"v5litepod"``, ``"TPU v5"`` → ``"v5p"``.
    """
    lowered = kind.strip().lower()
    if lowered.startswith("tpu "):
        return _tpu_kind_to_device_type(lowered[4:])
    words = lowered.replace("-", " ").replace("_", " ").split()
    for word in words:
        if word == "h100":
            return "h100-pcie" if "pcie" in words else "h100"
        if word == "a100":
            return "a100-80g" if any(w.startswith("80g") for w in words) else "a100-40g"
        if word == "v100":
            return "v100-sxm" if any(w.startswith("sxm") for w in words) else "v100"
        known = _GPU_WORDS.get(word)
        if known is not None:
            return known
    return lowered


def normalize_dtype(dtype: str) -> str:
    """The table's name for a dtype (:data:`FlopDtype`): ``"bfloat16"``, ``"amp_bf16"`` →
    ``"bf16"``, ``"float8_e4m3fn"`` → ``"fp8"``; an unknown name comes back lowercased."""
    name = dtype.strip().lower().removeprefix("amp_")
    if name.startswith(("float8_", "float4_")):
        name = name.partition("_")[0]
    return _DTYPE_ALIASES.get(name, name)


def device_flops(device_type: str, dtype: str = "bf16") -> float | None:
    """Peak dense FLOP/s of one device (GPU or TPU chip) of ``device_type`` (a ``GpuConfig``
    variant, a TPU type or generation, or a table key) at ``dtype``; ``None``, after a
    warning, when the table has no such device or dtype."""
    key = normalize_device_type(device_type)
    spec = DEVICE_FLOPS.get(key)
    if spec is None:
        logger.warning("No peak FLOP/s known for device type %r (%r)", device_type, key)
        return None
    dtype_key = normalize_dtype(dtype)
    flops = spec.get(dtype_key)
    if flops is None:
        logger.warning(
            "No peak FLOP/s known for dtype %r (%r) on %s; known: %s",
            dtype,
            dtype_key,
            key,
            ", ".join(spec),
        )
    return flops


def device_flops_for_jax_device(jax_device_kind: str, dtype: str = "bf16") -> float | None:
    """:func:`device_flops` of the device ``jax.devices()[0].device_kind`` names."""

    return device_flops(jax_device_kind_to_fray_device_type(jax_device_kind), dtype)
