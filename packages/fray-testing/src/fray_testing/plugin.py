"""pytest plugin (entry point ``pytest11``): the ``fake_client`` and ``no_real_backends``
fixtures. Loaded automatically when fray-testing is installed; Fray itself is imported only
when a test uses one of them."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from fray_testing._fake import FakeClient

__all__ = ["fake_client", "no_real_backends"]


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
