"""The public names of fray_testing are exactly ``__all__``."""

from __future__ import annotations

import subprocess
import sys
import types

import pytest

import fray_testing
import fray_testing.conformance


def _public(module: types.ModuleType) -> set[str]:
    return {
        name
        for name in dir(module)
        if not name.startswith("_")
        and not isinstance(getattr(module, name), types.ModuleType)
        and name not in {"annotations"}
    }


def test_all_lists_exactly_the_public_names() -> None:
    assert set(fray_testing.__all__) == _public(fray_testing)


def test_conformance_all_lists_exactly_the_public_names() -> None:
    conformance = fray_testing.conformance
    for name in conformance.__all__:
        getattr(conformance, name)  # loads the lazy ones
    assert set(conformance.__all__) == _public(conformance)


@pytest.mark.parametrize(
    ("module", "absent"),
    [
        ("fray_testing.plugin", "fray"),  # loaded by every pytest session
        ("fray_testing.conformance.entrypoints", "pytest"),  # loaded by every job process
    ],
)
def test_imports_stay_light(module: str, absent: str) -> None:
    code = f"import sys, {module}; assert {absent!r} not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)
