"""Which of Fray's modules a request passes through, from ``client.submit(request)`` to the
backend's attempt start.

    python tools/trace_submit.py local fake      # prints each client's modules, in order

It records, with ``sys.setprofile``, every Python function entered from the call of
``submit`` until the first call of a function named ``stop_at`` (by default the backend's
``_start_attempt`` hook; that call itself counts), and keeps the source files of Fray's
packages (``fray``, ``fray_*``). A second submit of the same request is traced, so that
one-time work (imports, a cache warming up) does not count.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

_PACKAGES = ("fray", "fray_testing", "fray_ray", "fray_iris", "fray_tpu")


def _module_of(filename: str) -> str | None:
    parts = Path(filename).parts
    for index in range(len(parts) - 1, -1, -1):
        if parts[index] in _PACKAGES and index > 0 and parts[index - 1] in ("src", "site-packages"):
            return "/".join(parts[index:])
    return None


def trace(submit: Callable[[], Any], stop_at: str = "_start_attempt") -> list[str]:
    """The Fray modules ``submit()`` enters, in order of first entry, until it enters a
    function named ``stop_at``."""
    seen: list[str] = []
    done = False

    def profile(frame: Any, event: str, arg: Any) -> None:
        nonlocal done
        if done or event != "call":
            return
        module = _module_of(frame.f_code.co_filename)
        if module is not None and module not in seen:
            seen.append(module)
        if frame.f_code.co_name == stop_at:
            done = True

    submit()  # once untraced: imports and first-use work
    sys.setprofile(profile)
    try:
        submit()
    finally:
        sys.setprofile(None)
    if not done:
        raise RuntimeError(f"submit() never reached {stop_at}")
    return seen


def _client(kind: str) -> Any:
    if kind == "local":
        from fray import LocalClient

        return LocalClient(echo_logs=False)
    if kind == "fake":
        from fray_testing import FakeClient

        return FakeClient()
    from fray.backend import client_from_spec

    return client_from_spec(kind)


def _noop() -> None:
    """The traced job's callable."""


def main(kinds: list[str]) -> None:
    from fray import Entrypoint, JobRequest

    request = JobRequest(name="traced", entrypoint=Entrypoint.from_callable(_noop))
    for kind in kinds or ["local", "fake"]:
        client = _client(kind)
        try:
            modules = trace(lambda client=client: client.submit(request))
        finally:
            client.shutdown()
        print(f"{kind}: {len(modules)} modules: {', '.join(modules)}")


if __name__ == "__main__":
    main(sys.argv[1:])
