"""Choosing a client: ``current_client()``, ``set_current_client()``, specs and backends."""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import logging
import os
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import parse_qsl

from fray._bound import bind_client, bound
from fray.environment_variables import FRAY_CLIENT_SPEC
from fray.errors import BackendUnavailableError, InvalidRequestError

logger = logging.getLogger("fray")


@dataclasses.dataclass(frozen=True)
class ClientSpec:
    """A parsed ``FRAY_CLIENT_SPEC``: the backend's ``scheme``, the ``address`` after
    ``://`` (or ``None``), the ``?key=value`` ``params``, the ``raw`` spec and the ``field``
    it was written in (``FRAY_CLIENT_SPEC``, ``--spec``), for error messages."""

    scheme: str
    address: str | None
    params: dict[str, str]
    raw: str
    field: str = FRAY_CLIENT_SPEC

    def param_int(self, key: str) -> int | None:
        """Reads an integer parameter (>= 1), or ``None`` when absent."""
        if key not in self.params:
            return None
        text = self.params[key]
        try:
            value = int(text)
        except ValueError:
            value = 0
        if value < 1:
            raise InvalidRequestError.for_field(
                f"{self.field}.{key}", text, "must be an integer >= 1"
            )
        return value

    def reject_unknown(self, allowed: set[str], *, address: bool) -> None:
        """Raises for parameters (or an address) the backend does not take."""
        unknown = sorted(set(self.params) - allowed)
        if unknown:
            raise InvalidRequestError.for_field(
                self.field,
                self.raw,
                f"unknown parameter {unknown[0]!r} for '{self.scheme}'; "
                f"allowed: {', '.join(sorted(allowed)) or 'none'}",
            )
        if not address and self.address is not None:
            raise InvalidRequestError.for_field(
                self.field, self.raw, f"'{self.scheme}' takes no address"
            )


# scheme -> (module, client class, distribution, the extra of fray-core that installs it)
BUILTIN_BACKENDS = {
    "local": ("fray.local", "LocalClient", "fray-core", ""),
    "ray": ("fray_ray", "RayClient", "fray-ray", "ray"),
    "iris": ("fray_iris", "IrisClient", "fray-iris", "iris"),
    "fake": ("fray_testing", "FakeClient", "fray-testing", "testing"),
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


def parse_client_spec(spec: str, field: str = FRAY_CLIENT_SPEC) -> ClientSpec:
    """Parses a spec string (see :data:`fray.environment_variables.FRAY_CLIENT_SPEC`);
    ``field`` names where it came from in error messages."""
    if not isinstance(spec, str) or not spec.strip():
        raise InvalidRequestError.for_field(field, spec, f"use one of: {SPEC_FORMS}")
    rest, _, query = spec.strip().partition("?")
    if "://" in rest:
        scheme, _, address = rest.partition("://")
        if not address or "/" in address:
            raise InvalidRequestError.for_field(
                field, spec, "the address after '://' must be host:port"
            )
    else:
        scheme, address = rest, None
    scheme = scheme.lower()
    if not scheme.isidentifier():
        raise InvalidRequestError.for_field(field, spec, f"use one of: {SPEC_FORMS}")
    try:
        pairs = parse_qsl(query, keep_blank_values=True, strict_parsing=bool(query))
    except ValueError:
        raise InvalidRequestError.for_field(
            field, spec, "parameters must look like ?key=value&key2=value2"
        ) from None
    params: dict[str, str] = {}
    for key, value in pairs:
        if key in params:
            raise InvalidRequestError.for_field(field, spec, f"parameter {key!r} is given twice")
        params[key] = value
    return ClientSpec(scheme, address, params, spec, field)


def _load_backend(scheme: str, field: str = FRAY_CLIENT_SPEC) -> Callable[[ClientSpec], Any]:
    if scheme in _REGISTERED:
        return _REGISTERED[scheme]
    if scheme in BUILTIN_BACKENDS:
        module_name, attr, dist, extra = BUILTIN_BACKENDS[scheme]
        try:
            module = importlib.import_module(module_name)
        except ImportError as err:
            if err.name is not None and module_name.startswith(err.name.split(".")[0]):
                raise BackendUnavailableError(
                    f"The '{scheme}' backend needs {dist}, which is not installed. "
                    f'Install it with: pip install "fray-core[{extra}]"'
                ) from err
            raise
        cls = getattr(module, attr)
    else:
        from importlib.metadata import entry_points

        plugins = list(entry_points(group="fray.backends"))
        ep = next((ep for ep in plugins if ep.name == scheme), None)
        if ep is None:
            plain = [p.name for p in plugins if "." not in p.name]
            known = ", ".join(sorted({*BUILTIN_BACKENDS, *_REGISTERED, *plain}))
            raise InvalidRequestError.for_field(
                field, scheme, f"unknown backend; known: {known} (forms: {SPEC_FORMS})"
            )
        cls = ep.load()
    from_spec = getattr(cls, "from_spec", None)
    if from_spec is not None:
        return from_spec

    def build(spec: ClientSpec) -> Any:
        spec.reject_unknown(set(), address=False)
        return cls()

    return build


def client_from_spec(spec: str | ClientSpec, field: str = "client_from_spec.spec") -> Any:
    """Builds a new client from a spec string such as ``"local?threads=4"`` (``field``
    names it in error messages).

    Raises:
        InvalidRequestError: ``spec`` is not a spec string (or a ``ClientSpec``), or names
            no known backend.
        BackendUnavailableError: The backend's package is not installed.
    """
    parsed = spec if isinstance(spec, ClientSpec) else parse_client_spec(spec, field)
    return _load_backend(parsed.scheme, parsed.field)(parsed)


# ---------------------------------------------------------------------------------------------
# The current client

_defaults: dict[str, Any] = {}
_defaults_lock = threading.Lock()
_contexts: list[Callable[[], Any]] | None = None  # the backends' context hooks, read once


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
    """One client per key per process, rebuilt if it was shut down."""
    with _defaults_lock:
        client = _defaults.get(key)
        if client is None or getattr(client, "is_shutdown", False):
            client = build()
            _defaults[key] = client
        return client


def _context_hooks() -> list[Callable[[], Any]]:
    """The context hooks backends declare as ``<scheme>.context`` entry points of the
    ``fray.backends`` group, loaded once per process. A hook looks at this process (its
    environment, what it has imported) without importing its backend, and returns ``None``
    or ``(key, scheme, build, why)``: a client ``build()`` makes, shared under ``key``."""
    global _contexts
    if _contexts is None:
        from importlib.metadata import entry_points

        hooks: list[Callable[[], Any]] = []
        for ep in entry_points(group="fray.backends"):
            if ep.name.endswith(".context"):
                try:
                    hooks.append(ep.load())
                except ImportError as err:
                    logger.warning(
                        "the %s backend's context check could not be loaded (%s); running as "
                        "if outside that cluster",
                        ep.name.removesuffix(".context"),
                        err,
                    )
        _contexts = hooks
    return _contexts


def _from_context() -> Any:
    for hook in _context_hooks():
        found = hook()
        if found is not None:
            key, scheme, build, why = found
            override = _REGISTERED.get(scheme)
            if override is not None:  # a registered factory stands in (fray_testing)
                return override(ClientSpec(scheme, None, {}, scheme))
            try:
                return _shared(key, build)
            except ImportError as err:
                logger.warning("%s, but %s; looking further", why, err)
    return None


def current_client() -> Any:
    """The client to use here.

    In order: the one set with :func:`set_current_client`; the one ``FRAY_CLIENT_SPEC``
    names; a cluster context a backend recognises (inside an Iris job, or an Iris context
    set with ``iris_ctx_scope``); if ``ray`` is imported and initialised, Ray; otherwise a
    local client. Clients built from the environment are shared per process, so jobs
    submitted earlier stay visible to ``get_job``.
    """
    explicit = bound.get()[0]
    if explicit is not None:
        return explicit
    spec = os.environ.get(FRAY_CLIENT_SPEC, "").strip()
    if spec:
        return _shared(spec, lambda: client_from_spec(spec, FRAY_CLIENT_SPEC))
    found = _from_context()
    if found is not None:
        return found
    ray = sys.modules.get("ray")
    if ray is not None and getattr(ray, "is_initialized", lambda: False)():
        return _shared("ray", lambda: client_from_spec("ray"))
    return _shared("local", lambda: client_from_spec("local"))


def forget_default(client: Any) -> None:
    """Drops ``client`` from the clients ``current_client()`` shares (its ``shutdown``
    calls this, so the next ``current_client()`` builds a fresh one)."""
    with _defaults_lock:
        for key, value in list(_defaults.items()):
            if value is client:
                del _defaults[key]


@contextlib.contextmanager
def isolated_backends(factories: dict[str, Callable[[ClientSpec], Any]]) -> Iterator[None]:
    """Inside the block, these factories build the clients of their schemes (specs,
    ``FRAY_CLIENT_SPEC`` and detected contexts alike), and ``current_client()`` shares
    none of the clients it built before; afterwards both come back as they were."""
    global _defaults
    saved = {scheme: _REGISTERED.get(scheme) for scheme in factories}
    saved_defaults, _defaults = _defaults, {}
    _REGISTERED.update(factories)
    try:
        yield
    finally:
        _defaults = saved_defaults
        for scheme, factory in saved.items():
            if factory is None:
                _REGISTERED.pop(scheme, None)
            else:
                _REGISTERED[scheme] = factory
