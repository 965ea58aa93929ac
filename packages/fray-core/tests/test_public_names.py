"""The other packages use only fray-core's public names: ``fray``, ``fray.backend`` (the
seam for backends) and the public modules, never ``fray._private`` ones."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGES = Path(__file__).resolve().parents[2]
OTHERS = ["fray-ray", "fray-iris", "fray-tpu", "fray-testing"]


def _private_imports(path: Path) -> list[str]:
    found: list[str] = []
    tree = ast.parse(path.read_text(), str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            parts = node.module.split(".")
            if parts[0] == "fray" and any(p.startswith("_") for p in parts[1:]):
                found.append(f"{path.name}:{node.lineno} from {node.module}")
            elif node.module == "fray":
                found.extend(
                    f"{path.name}:{node.lineno} from fray import {alias.name}"
                    for alias in node.names
                    if alias.name.startswith("_")
                )
        elif isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] == "fray" and any(p.startswith("_") for p in parts[1:]):
                    found.append(f"{path.name}:{node.lineno} import {alias.name}")
    return found


@pytest.mark.parametrize("package", OTHERS)
def test_package_imports_only_public_fray_names(package: str) -> None:
    sources = sorted((PACKAGES / package / "src").rglob("*.py"))
    assert sources, f"no sources found for {package}"
    private = [hit for path in sources for hit in _private_imports(path)]
    assert private == []


def test_the_check_sees_a_private_import(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        "from fray._types import JobRequest\nfrom fray import _client\nimport fray._actor\n"
    )
    assert len(_private_imports(sample)) == 3
