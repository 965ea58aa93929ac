"""Choosing a client: ``current_client()``, ``set_current_client()``, specs and backends."""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import os
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import parse_qsl

from fray._bound import bind_client, bound
from fray.environment_variables import FRAY_CLIENT_SPEC
from fray.errors import BackendUnavailableError, InvalidRequestError

__all__ = [
    "ClientSpec",
    "client_from_spec",
    "current_client",
    "explain_current_client",
    "parse_client_spec",
    "register_backend",
    "set_current_client",
]


@dataclasses.dataclass(frozen=True)
class ClientSpec:
    """A parsed ``FRAY_CLIENT_SPEC``.

    Attributes:
        scheme: The backend (``local``, ``ray``, ``iris``, ``fake`` or a plugin's).
        address: ``host:port`` after ``://``, or ``None``.
        params: The ``?key=value`` pairs.
        raw: The spec as written.
    """

    scheme: str
    address: str | None
    params: dict[str, str]
    raw: str

    def param_int(self, key: str, *, minimum: int = 1) -> int | None:
        """Reads an integer parameter, or ``None`` when absent."""
        if key not in self.params:
            return None
        text = self.params[key]
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or value < minimum:
            raise InvalidRequestError.for_field(
                f"{FRAY_CLIENT_SPEC}.{key}", text, f"must be an integer >= {minimum}"
            )
        return value

    def reject_unknown(self, allowed: set[str], *, address: bool) -> None:
        """Raises for parameters (or an address) the backend does not take."""
        unknown = sorted(set(self.params) - allowed)
        if unknown:
            raise InvalidRequestError.for_field(
                FRAY_CLIENT_SPEC,
                self.raw,
                f"unknown parameter {unknown[0]!r} for '{self.scheme}'; "
                f"allowed: {', '.join(sorted(allowed)) or 'none'}",
            )
        if not address and self.address is not None:
            raise InvalidRequestError.for_field(
                FRAY_CLIENT_SPEC, self.raw, f"'{self.scheme}' takes no address"
            )


@dataclasses.dataclass(frozen=True)
class _Backend:
    module: str
    attr: str
    dist: str
    extra: str | None


_BUILTIN: dict[str, _Backend] = {
    "local": _Backend("fray.local", "LocalClient", "fray-core", None),
    "ray": _Backend("fray_ray", "RayClient", "fray-ray", "ray"),
    "iris": _Backend("fray_iris", "IrisClient", "fray-iris", "iris"),
    "fake": _Backend("fray_testing", "FakeClient", "fray-testing", "testing"),
}
_REGISTERED: dict[str, Callable[[ClientSpec], Any]] = {}
SPEC_FORMS = (
    "local, local?threads=N, ray, ray?namespace=NAME, ray://host:port, "
    "iris://host:port[?ws=PATH], fake"
)


def register_backend(scheme: str, factory: Callable[[ClientSpec], Any]) -> None:
    """Makes ``scheme`` usable in specs; ``factory`` builds a client from a ClientSpec.

    Packages can instead declare an entry point in the ``fray.backends`` group that names
    a client class with a ``from_spec`` classmethod.
    """
    if not scheme.isidentifier():
        raise InvalidRequestError.for_field("scheme", scheme, "must be a simple name")
    _REGISTERED[scheme] = factory


def parse_client_spec(spec: str) -> ClientSpec:
    """Parses a spec string (see :data:`fray.environment_variables.FRAY_CLIENT_SPEC`)."""
    if not isinstance(spec, str) or not spec.strip():
        raise InvalidRequestError.for_field(FRAY_CLIENT_SPEC, spec, f"use one of: {SPEC_FORMS}")
    raw = spec
    spec = spec.strip()
    rest, _, query = spec.partition("?")
    if "://" in rest:
        scheme, _, address = rest.partition("://")
        if not address or "/" in address:
            raise InvalidRequestError.for_field(
                FRAY_CLIENT_SPEC, raw, "the address after '://' must be host:port"
            )
    else:
        scheme, address = rest, None
    scheme = scheme.lower()
    if not scheme.isidentifier():
        raise InvalidRequestError.for_field(FRAY_CLIENT_SPEC, raw, f"use one of: {SPEC_FORMS}")
    try:
        pairs = parse_qsl(query, keep_blank_values=True, strict_parsing=bool(query))
    except ValueError:
        raise InvalidRequestError.for_field(
            FRAY_CLIENT_SPEC, raw, "parameters must look like ?key=value&key2=value2"
        ) from None
    params: dict[str, str] = {}
    for key, value in pairs:
        if key in params:
            raise InvalidRequestError.for_field(
                FRAY_CLIENT_SPEC, raw, f"parameter {key!r} is given twice"
            )
        params[key] = value
    return ClientSpec(scheme=scheme, address=address, params=params, raw=raw)


def _entry_point(scheme: str) -> Any | None:
    from importlib.metadata import entry_points

    for ep in entry_points(group="fray.backends"):
        if ep.name == scheme:
            return ep
    return None


def _known_schemes() -> list[str]:
    from importlib.metadata import entry_points

    names = set(_BUILTIN) | set(_REGISTERED)
    names |= {ep.name for ep in entry_points(group="fray.backends")}
    return sorted(names)


def _load_backend(scheme: str) -> Callable[[ClientSpec], Any]:
    if scheme in _REGISTERED:
        return _REGISTERED[scheme]
    builtin = _BUILTIN.get(scheme)
    if builtin is not None:
        try:
            module = importlib.import_module(builtin.module)
        except ImportError as err:
            if err.name is not None and builtin.module.startswith(err.name.split(".")[0]):
                raise BackendUnavailableError(
                    f"The '{scheme}' backend needs {builtin.dist}, which is not installed. "
                    f'Install it with: pip install "fray-core[{builtin.extra}]"'
                ) from err
            raise
        cls = getattr(module, builtin.attr, None)
        if cls is None:
            raise BackendUnavailableError(
                f"The installed {builtin.dist} does not provide {builtin.attr} yet, so the "
                f"'{scheme}' backend is not available in this release. "
                f'Upgrade with: pip install -U "fray-core[{builtin.extra}]"'
            )
    else:
        ep = _entry_point(scheme)
        if ep is None:
            raise InvalidRequestError.for_field(
                FRAY_CLIENT_SPEC,
                scheme,
                f"unknown backend; known: {', '.join(_known_schemes())} (forms: {SPEC_FORMS})",
            )
        cls = ep.load()
    from_spec = getattr(cls, "from_spec", None)
    if from_spec is not None:
        return from_spec

    def build(spec: ClientSpec) -> Any:
        spec.reject_unknown(set(), address=False)
        return cls()

    return build


def client_from_spec(spec: str | ClientSpec) -> Any:
    """Builds a new client from a spec string such as ``"local?threads=4"``."""
    parsed = parse_client_spec(spec) if isinstance(spec, str) else spec
    return _load_backend(parsed.scheme)(parsed)


# ---------------------------------------------------------------------------------------------
# The current client

_defaults: dict[str, Any] = {}
_defaults_lock = threading.Lock()


@contextlib.contextmanager
def set_current_client(client: Any) -> Iterator[Any]:
    """Makes ``client`` the one ``current_client()`` returns inside the ``with`` block.

    The previous choice comes back on exit, also when the block raises.
    """
    token = bind_client(client)
    try:
        yield client
    finally:
        bound.reset(token)


def _shared(key: str, build: Callable[[], Any]) -> Any:
    """One client per spec per process, rebuilt if it was shut down."""
    with _defaults_lock:
        client = _defaults.get(key)
        if client is None or getattr(client, "is_shutdown", False):
            client = build()
            _defaults[key] = client
        return client


def _iris_scope_client() -> Any:
    """The client for an Iris context set with ``iris_ctx_scope`` in this process, if any.

    Only looked for where the Iris client is already imported (whoever set a context has
    imported it), so that ``current_client()`` never imports Iris itself.
    """
    module = sys.modules.get("iris.client.client")
    if module is None or os.environ.get("IRIS_TASK_ID"):
        return None  # inside an Iris job the job's own context is used (below)
    get_context = getattr(module, "get_iris_ctx", None)
    context = get_context() if callable(get_context) else None
    raw = getattr(context, "client", None)
    if raw is None:
        return None
    try:
        import fray_iris
    except ImportError:
        import logging  # only on this path: keeps `import fray` cheap

        logging.getLogger("fray").warning(
            "an Iris context is set, but fray-iris is not installed; using the local backend"
        )
        return None
    # One client per wrapped Iris client: the cached client keeps it alive, so its id
    # cannot be reused while it is cached.
    return _shared(f"iris:scope:{id(raw)}", lambda: fray_iris.FrayIrisClient.from_iris_client(raw))


def _resolve() -> tuple[Any, str]:
    explicit = bound.get()[0]
    if explicit is not None:
        return explicit, "set explicitly with set_current_client()"
    spec = os.environ.get(FRAY_CLIENT_SPEC, "").strip()
    if spec:
        return _shared(spec, lambda: client_from_spec(spec)), f"{FRAY_CLIENT_SPEC}={spec!r}"
    scoped = _iris_scope_client()
    if scoped is not None:
        return scoped, "an Iris context set with iris_ctx_scope()"
    if os.environ.get("IRIS_CONTROLLER_ADDRESS") and os.environ.get("IRIS_TASK_ID"):
        try:
            factory = _load_backend("iris")
        except BackendUnavailableError as err:
            import logging  # only on this path: keeps `import fray` cheap

            logging.getLogger("fray").warning(
                "running inside an Iris job, but %s; using the local backend", err
            )
        else:
            spec_obj = ClientSpec("iris", None, {}, "iris")
            return _shared("iris:context", lambda: factory(spec_obj)), "inside an Iris job"
    ray = sys.modules.get("ray")
    if ray is not None and getattr(ray, "is_initialized", lambda: False)():
        return _shared("ray", lambda: client_from_spec("ray")), "ray.init() was already called"
    return _shared("local", lambda: client_from_spec("local")), "the default (no spec, no cluster)"


def current_client() -> Any:
    """The client to use here.

    In order: the one set with :func:`set_current_client`; the one ``FRAY_CLIENT_SPEC``
    names; inside an Iris job, that job's own Iris context; if ``ray`` is imported and
    initialised, Ray; otherwise a local client. Clients built from the environment are shared
    per process, so jobs submitted earlier stay visible to ``get_job``.
    """
    return _resolve()[0]


def explain_current_client() -> tuple[Any, str]:
    """``current_client()`` and the reason it was chosen (for ``fray doctor``)."""
    return _resolve()


def forget_default(client: Any) -> None:
    with _defaults_lock:
        for key, value in list(_defaults.items()):
            if value is client:
                del _defaults[key]
