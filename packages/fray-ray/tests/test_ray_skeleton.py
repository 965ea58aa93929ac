"""This release ships fray-ray as a skeleton: it installs and imports, and asking for the
backend says clearly that it is not available yet."""

from __future__ import annotations

import pytest

import fray
import fray_ray


def test_package_imports_without_pretending() -> None:
    assert fray_ray.__all__ == []
    assert not hasattr(fray_ray, "RayClient")


def test_backend_request_is_a_clear_error() -> None:
    spec = "ray" if "ray" == "ray" else "iris://127.0.0.1:1"
    with pytest.raises(fray.BackendUnavailableError, match="not available in this release"):
        fray.client_from_spec(spec)
