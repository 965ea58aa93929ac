"""Keeping unit tests off real backends."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import NoReturn

from fray.backend import ClientSpec, isolated_backends

__all__ = ["REAL_BACKENDS", "RealBackendError", "forbid_real_backends"]

REAL_BACKENDS: tuple[str, ...] = ("local", "ray", "iris")
"""Schemes :func:`forbid_real_backends` blocks by default."""


class RealBackendError(AssertionError):
    """A unit test reached a real backend while real backends were forbidden.

    An ``AssertionError`` (not a ``FrayError``), so code under test that handles Fray's own
    errors does not swallow it.
    """


def _refuse(spec: ClientSpec) -> NoReturn:
    raise RealBackendError(
        f"this test reached the real {spec.scheme!r} backend (spec {spec.raw!r}) while real "
        "backends are forbidden; use the fake_client fixture, or install a FakeClient with "
        "fray.set_current_client(FakeClient())"
    )


@contextlib.contextmanager
def forbid_real_backends(schemes: Sequence[str] = REAL_BACKENDS) -> Iterator[None]:
    """Inside the block, building a client for any of ``schemes`` raises
    :class:`RealBackendError`: ``fray.current_client()`` without an explicit client,
    ``fray.backend.client_from_spec("ray")``, ``FRAY_CLIENT_SPEC=iris://...``.

    Clients built from the environment before the block are hidden during it. A client class
    constructed directly (``LocalClient()``) is an explicit choice and is not blocked.
    """
    with isolated_backends(dict.fromkeys(schemes, _refuse)):
        yield
