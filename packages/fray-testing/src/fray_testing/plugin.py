"""pytest plugin (entry point ``pytest11``): the ``fake_client`` and ``no_real_backends``
fixtures. Loaded automatically when fray-testing is installed; Fray itself is imported only
when a test uses one of them."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from fray_testing._fake import FakeClient

__all__ = ["fake_client", "fake_tpu_ray_cluster", "gce_metadata_server", "no_real_backends"]


@pytest.fixture
def fake_client() -> Iterator[FakeClient]:
    """A fresh :class:`~fray_testing.FakeClient`, installed as ``fray.current_client()`` for
    the test, then removed and shut down."""
    from fray import set_current_client
    from fray_testing._fake import FakeClient

    client = FakeClient()
    with set_current_client(client):
        yield client
    client.shutdown()


@pytest.fixture
def no_real_backends() -> Iterator[None]:
    """Makes reaching a real backend (local, ray, iris) raise ``RealBackendError``.

    Use it per module with ``pytestmark = pytest.mark.usefixtures("no_real_backends")``.
    """
    from fray_testing._backends import forbid_real_backends

    with forbid_real_backends():
        yield


# -- Ray and fake TPU fixtures (need fray-testing[ray]; ray is imported only when used) ------


@pytest.fixture(scope="module")
def fake_tpu_ray_cluster() -> Iterator[Any]:
    """A local Ray cluster posing as a TPU pod, connected, shared by the test module.

    A head node (4 CPUs, ``{"head_node": 1}``) and two fake v4-16 slices, ``slice-a`` and
    ``slice-b``, of two hosts each. Kill a host mid-run with
    ``cluster.kill_node(cluster.slices["slice-a"][1])`` (put such tests last in the
    module, or use a cluster of their own: the host stays dead until
    ``cluster.restore_tpu_host("slice-a", 1)`` brings it back as a new node).
    """
    pytest.importorskip("ray", reason="fake TPU clusters need fray-testing[ray]")
    from fray_testing.ray_cluster import LocalRayCluster

    with LocalRayCluster(head_cpus=4, head_resources={"head_node": 1}) as cluster:
        cluster.add_tpu_slice("v4-16", name="slice-a")
        cluster.add_tpu_slice("v4-16", name="slice-b")
        cluster.connect(namespace="fray-tpu-tests")
        yield cluster


@pytest.fixture
def gce_metadata_server() -> Iterator[Any]:
    """A :class:`~fray_testing.gce_metadata.FakeGceMetadataServer` on 127.0.0.1 for the test;
    pass ``server.host`` as ``GCE_METADATA_HOST`` to the code under test."""
    from fray_testing.gce_metadata import FakeGceMetadataServer

    with FakeGceMetadataServer() as server:
        yield server
