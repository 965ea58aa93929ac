"""Every name the predecessor's ``fray.*`` modules offered (both wheels, see
``predecessor_names.json``) imports from ours at the same path.

Names that come with work still open are listed in ``PENDING`` with the reason; each is an
``xfail(strict=True)``, so the day one starts to import, this test says to take it off the
list.
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import pytest

_NAMES = json.loads((Path(__file__).with_name("predecessor_names.json")).read_text())
_REEXPORTS = json.loads((Path(__file__).with_name("predecessor_reexports.json")).read_text())

# fray.iris_backend's re-exports of Fray's own objects: name -> (module, name there). They
# resolve without fray-iris; the predecessor imported two of them under another name.
_IRIS_BACKEND_ALIASES = {"FrayEntrypoint": "Entrypoint", "FrayJobAlreadyExists": "JobAlreadyExists"}
_IRIS_BACKEND_REEXPORTS = {
    name: (source, _IRIS_BACKEND_ALIASES.get(name, name))
    for modules in _REEXPORTS.values()
    for name, source in modules.get("fray.iris_backend", {}).items()
}

PENDING: dict[tuple[str, str], str] = {}


def _cases() -> list[tuple[str, str]]:
    seen: set[tuple[str, str]] = set()
    for modules in _NAMES.values():
        for module, names in modules.items():
            seen.update((module, name) for name in names)
    return sorted(seen)


def _params() -> list[object]:
    params: list[object] = []
    for module, name in _cases():
        marks = []
        reason = PENDING.get((module, name))
        if reason is not None:
            marks.append(pytest.mark.xfail(strict=True, reason=reason))
        params.append(pytest.param(module, name, marks=marks, id=f"{module}.{name}"))
    return params


@pytest.mark.parametrize(("module", "name"), _params())
def test_predecessor_name_imports(module: str, name: str) -> None:
    needs_iris = module == "fray.iris_backend" and name not in _IRIS_BACKEND_REEXPORTS
    if needs_iris or name == "FrayIrisClient":
        pytest.importorskip("fray_iris")  # fray-core alone: these need fray-iris
    imported = importlib.import_module(module)
    if module == "fray" and name in imported._MOVED:  # moved off the top level: it warns
        with pytest.warns(DeprecationWarning, match=rf"fray\.{name} moved to "):
            assert getattr(imported, name) is not None
        return
    assert getattr(imported, name) is not None


def test_the_inventory_covers_both_wheels_and_every_module() -> None:
    assert set(_NAMES) == {"0.2.20", "0.2.227"}
    expected = {
        "fray.actor",
        "fray.client",
        "fray.cluster",
        "fray.current_client",
        "fray.device_flops",
        "fray.iris_backend",
        "fray.local_backend",
        "fray.types",
    }
    assert expected <= set(_NAMES["0.2.227"])


def test_current_client_stays_the_function_whatever_is_imported_first() -> None:
    import subprocess
    import sys

    code = (
        "import fray.current_client as by_path\n"
        "from fray.current_client import current_client, LocalClient\n"
        "import fray\n"
        "assert callable(fray.current_client) and not isinstance(fray.current_client, type(fray))\n"
        "assert by_path is fray.current_client\n"
        "assert isinstance(fray.current_client(), LocalClient)\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "ok"


def test_type_paths_are_the_same_objects() -> None:
    import fray
    import fray.client
    import fray.cluster
    import fray.local_backend
    import fray.types

    assert fray.types.ResourceConfig is fray.ResourceConfig is fray.cluster.ResourceConfig
    assert fray.client.wait_all is fray.wait_all
    assert fray.client.JobFailed is fray.JobFailedError
    assert fray.local_backend.LocalClient is fray.LocalClient
    assert fray.types.get_tpu_topology("v5p-16").vm_count == 2
    assert [row.name for row in fray.types.TPU_TOPOLOGIES][:2] == ["v4-8", "v4-16"]


def test_iris_backend_reexports_are_frays_objects_and_need_no_fray_iris() -> None:
    import subprocess
    import sys

    code = (
        "import importlib, json, sys\n"
        "sys.modules['fray_iris'] = None  # as if fray-iris were not installed\n"
        "import fray.iris_backend as ib\n"
        f"for name, (source, attr) in {_IRIS_BACKEND_REEXPORTS!r}.items():\n"
        "    assert getattr(ib, name) is getattr(importlib.import_module(source), attr), name\n"
        "assert ib.logger.name == 'fray.iris_backend'\n"
        "from fray.backend._wire import CallFuture\n"
        "assert ib.OperationFuture is CallFuture\n"
        "try:\n"
        "    ib.convert_resources\n"
        "except ImportError as err:\n"
        "    assert 'pip install' in str(err), err\n"
        "else:\n"
        "    raise AssertionError('convert_resources resolved without fray-iris')\n"
        "heavy = [m for m in ('iris', 'ray', 'jax', 'fsspec') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.stdout.strip() == "ok", out.stderr
    assert len(_IRIS_BACKEND_REEXPORTS) == 17  # both wheels together
