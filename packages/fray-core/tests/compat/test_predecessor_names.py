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

_IRIS = "comes with fray-iris on the predecessor's Iris API (the Iris issue)"
PENDING: dict[tuple[str, str], str] = {
    ("fray.iris_backend", "ActorUnavailableError"): _IRIS,
    **{
        ("fray.iris_backend", name): _IRIS
        for name in [
            "FrayEntrypoint",
            "FrayJobAlreadyExists",
            "NSYS_TASKS_ENV",
            "OperationFuture",
            "convert_constraints",
            "convert_container_profile",
            "convert_entrypoint",
            "convert_environment",
            "convert_resources",
            "logger",
            "map_iris_job_state",
            "resolve_coscheduling",
            "wrap_multiprocess",
            "wrap_nsys",
            "ANY_REGION",
            "ActorConfig",
            "HostedActor",
            "ActorContext",
            "ActorFuture",
            "ActorHandle",
            "CpuConfig",
            "DeviceConfig",
            "EnvironmentConfig",
            "GpuConfig",
            "JobRequest",
            "JobStatus",
            "ResourceConfig",
            "TpuConfig",
        ]
    },
}


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
    if module == "fray.iris_backend" or name == "FrayIrisClient":
        pytest.importorskip("fray_iris")  # fray-core alone: these need fray-iris
    imported = importlib.import_module(module)
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
