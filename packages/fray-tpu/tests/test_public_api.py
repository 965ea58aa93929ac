from __future__ import annotations

import subprocess
import sys
import types

import pytest

import fray_tpu
from fray import InvalidRequestError, ResourceConfig


def test_exports() -> None:
    public = {
        n
        for n in dir(fray_tpu)
        if not n.startswith("_")
        and not isinstance(getattr(fray_tpu, n), types.ModuleType)
        and n != "annotations"
    }
    assert set(fray_tpu.__all__) == public


def test_ray_exports() -> None:
    pytest.importorskip("ray")
    import fray_tpu.ray

    public = {
        n
        for n in dir(fray_tpu.ray)
        if not n.startswith("_") and not isinstance(getattr(fray_tpu.ray, n), types.ModuleType)
    }
    assert set(fray_tpu.ray.__all__) == public


def test_topology_lookup_matches_resource_config() -> None:
    topo = fray_tpu.get_tpu_topology("v5p-256")
    res = ResourceConfig.with_tpu("v5p-256", slice_count=2)
    assert res.replicas == 2 * topo.vm_count == 64
    assert res.device.chip_count() == topo.chips_per_vm == 4
    assert fray_tpu.slices_for_replicas("v5p-256", res.replicas) == 2


def test_unknown_type_error_is_shared() -> None:
    with pytest.raises(fray_tpu.UnknownTpuTypeError, match="Did you mean"):
        fray_tpu.get_tpu_topology("v5p-384")
    with pytest.raises(InvalidRequestError, match="v5p-512"):
        ResourceConfig.with_tpu("v5p-384")


def test_importable_without_ray_or_jax() -> None:
    code = "import sys, fray_tpu; print([m for m in ('ray', 'jax') if m in sys.modules])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
