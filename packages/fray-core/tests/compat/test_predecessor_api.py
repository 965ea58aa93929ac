"""Fray accepts every call the predecessor's 0.2.227 API accepted, at the same module path.

``predecessor_api.json`` holds, for each public function, method and dataclass of
``marin-fray==0.2.227``, its parameters in order with their kind and default (see
``predecessor_inventory.py``). Each is compared with Fray's object at the same path: every
argument the predecessor took by position must be taken at the same position, every one it
took by name by that name, with the same default; Fray may add parameters only if they are
optional. ``marin_fray_imports.json`` holds every ``from fray... import`` of marin-core,
marin-zephyr, marin-levanter and marin-iris 0.2.227; each must resolve.

What stays different on purpose is in ``DELIBERATE``, each with the words under which
docs/migrating-from-fray-v2.md gives its reason. ``PENDING`` lists differences whose fix is
open elsewhere; each is an ``xfail(strict=True)``, so a fix says to take it off the list.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import json
from pathlib import Path
from typing import Any

import pytest

from fray import ActorConfig, CpuConfig, ResourceConfig

_HERE = Path(__file__).parent
_API: dict[str, dict[str, dict[str, Any]]] = json.loads(
    (_HERE / "predecessor_api.json").read_text()
)
_IMPORTS: dict[str, dict[str, str]] = json.loads((_HERE / "marin_fray_imports.json").read_text())
_GUIDE = (_HERE.parents[3] / "docs" / "migrating-from-fray-v2.md").read_text()

# The predecessor's defaults that are not literals, as Fray's values. Fray's clients take
# ``None`` for "the default config" (``ActorConfig()``; ``ResourceConfig()`` on Iris).
_EXPRS: dict[str, Any] = {
    "ActorConfig()": ActorConfig(),
    "CpuConfig()": CpuConfig(),
    "ResourceConfig()": ResourceConfig(),
    "SecretBehavior.INHERIT": "inherit",
}
_NONE_MEANS = {"ActorConfig()", "ResourceConfig()"}

# What differs on purpose -> the words the migration guide explains it under.
_BY_THE_CLIENT = "made by the client, not by hand"
DELIBERATE: dict[str, str] = {
    "fray.types.Entrypoint(fields)": "`Entrypoint(callable_entrypoint=...)`",
    "fray.local_backend.LocalClient.__init__": "`LocalClient()` without `max_threads`",
    "fray.local_backend.LocalActorHandle.__init__": _BY_THE_CLIENT,
    "fray.local_backend.LocalActorMethod.__init__": _BY_THE_CLIENT,
    "fray.local_backend.LocalActorGroup.__init__": _BY_THE_CLIENT,
    "fray.iris_backend.IrisActorHandle.__init__": _BY_THE_CLIENT,
    "fray.iris_backend.IrisActorGroup.__init__": _BY_THE_CLIENT,
    "fray.iris_backend.OperationFuture.__init__": "`fray.iris_backend.OperationFuture`",
}

# Open in other parts of the project: key -> what is missing.
PENDING: dict[str, str] = {}

_P = inspect.Parameter
_POSITIONAL = (_P.POSITIONAL_ONLY, _P.POSITIONAL_OR_KEYWORD)


def _expected(default: dict[str, Any]) -> Any:
    return default["value"] if "value" in default else _EXPRS[default["expr"]]


def _same(theirs: Any, ours: Any) -> bool:
    if isinstance(theirs, list) and isinstance(ours, list | tuple):
        return list(ours) == theirs  # pyright: ignore[reportUnknownArgumentType]
    return bool(ours == theirs) and isinstance(ours, bool) == isinstance(theirs, bool)


def refusals(theirs: list[dict[str, Any]], ours: list[inspect.Parameter]) -> list[str]:
    """What a call the predecessor accepted would meet in Fray's signature ``ours``."""
    problems: list[str] = []
    positional = [p for p in ours if p.kind in _POSITIONAL]
    by_name = {p.name: p for p in ours if p.kind in (_P.POSITIONAL_OR_KEYWORD, _P.KEYWORD_ONLY)}
    kinds = {p.kind for p in ours}
    their_positional = [
        t for t in theirs if t["kind"] in ("positional_only", "positional_or_keyword")
    ]
    for index, param in enumerate(their_positional):
        if index >= len(positional):
            if _P.VAR_POSITIONAL not in kinds:
                problems.append(f"{param['name']}: not taken at position {index}")
        elif param["kind"] == "positional_or_keyword" and positional[index].name != param["name"]:
            problems.append(f"{param['name']}: position {index} is {positional[index].name!r}")
    for param in theirs:
        name, kind = param["name"], param["kind"]
        if kind == "var_positional" and _P.VAR_POSITIONAL not in kinds:
            problems.append(f"*{name}: not taken")
        elif kind == "var_keyword" and _P.VAR_KEYWORD not in kinds:
            problems.append(f"**{name}: not taken")
        elif kind in ("positional_or_keyword", "keyword_only"):
            mine = by_name.get(name)
            if mine is None:
                if _P.VAR_KEYWORD not in kinds:
                    problems.append(f"{name}=: no such parameter")
            elif "default" in param and not (
                mine.default is None and param["default"].get("expr") in _NONE_MEANS
            ):
                if mine.default is _P.empty:
                    problems.append(f"{name}: required, the predecessor's is optional")
                elif not _same(_expected(param["default"]), mine.default):
                    problems.append(
                        f"{name}: default {mine.default!r}, the predecessor's is "
                        f"{_expected(param['default'])!r}"
                    )
    named = {t["name"] for t in theirs}
    for param in ours:
        if (
            param.name not in named
            and param.default is _P.empty
            and param.kind
            not in (
                _P.VAR_POSITIONAL,
                _P.VAR_KEYWORD,
            )
        ):
            problems.append(f"{param.name}: required, the predecessor has no such parameter")
    return problems


def _method_params(cls: type, name: str) -> list[inspect.Parameter]:
    raw = inspect.getattr_static(cls, name)
    params = list(inspect.signature(getattr(cls, name)).parameters.values())
    is_plain_method = inspect.isfunction(raw)
    return params[1:] if is_plain_method else params


def _field_params(cls: type) -> list[inspect.Parameter]:
    if not hasattr(cls, "__dataclass_fields__"):
        return _method_params(cls, "__init__")
    params: list[inspect.Parameter] = []
    for field in dataclasses.fields(cls):
        if field.default is not dataclasses.MISSING:
            default: Any = field.default
        elif field.default_factory is not dataclasses.MISSING:
            default = field.default_factory()
        else:
            default = _P.empty
        params.append(_P(field.name, _P.POSITIONAL_OR_KEYWORD, default=default))
    return params


def _frays(module: str, name: str) -> Any:
    if module == "fray.iris_backend":
        pytest.importorskip("fray_iris")  # fray-core alone: the Iris names need fray-iris
    return getattr(importlib.import_module(module), name)


def _check(module: str, name: str, member: str) -> list[str]:
    fact = _API[module][name]
    ours = _frays(module, name)
    if fact["kind"] == "function":
        return refusals(fact["params"], list(inspect.signature(ours).parameters.values()))
    if fact["kind"] == "value":
        return [] if "value" not in fact or ours == fact["value"] else [f"{ours!r}"]
    if member == "(fields)":
        fields = [{"kind": "positional_or_keyword", **field} for field in fact["fields"]]
        problems = refusals(fields, _field_params(ours))
        config = getattr(ours, "model_config", None)
        frozen = ours.__dataclass_params__.frozen if config is None else config.get("frozen")
        if not fact["frozen"] and frozen:
            problems.append("frozen, the predecessor's may be changed")
        return problems
    if member == "(members)":
        return [f"{k}={v!r}" for k, v in fact["members"].items() if getattr(ours, k, None) != v]
    method = fact["methods"][member]
    if method.get("property"):
        annotated = any(member in vars(c).get("__annotations__", {}) for c in ours.__mro__)
        return [] if annotated or hasattr(ours, member) else ["no such attribute"]
    if not hasattr(ours, member):
        return ["no such method"]
    return refusals(method["params"], _method_params(ours, member))


def _members() -> list[Any]:
    params: list[Any] = []
    for module, names in sorted(_API.items()):
        for name, fact in names.items():
            members = [""]
            if fact["kind"] == "class":
                members = sorted(fact["methods"])
                members += ["(fields)"] if fact.get("dataclass") else []
                members += ["(members)"] if fact.get("members") else []
            for member in members:
                key = f"{module}.{name}" + (
                    member if member.startswith("(") else f".{member}" if member else ""
                )
                marks = []
                if key in PENDING:
                    marks.append(pytest.mark.xfail(strict=True, reason=PENDING[key]))
                params.append(pytest.param(module, name, member, key, marks=marks, id=key))
    return params


@pytest.mark.parametrize(("module", "name", "member", "key"), _members())
def test_fray_accepts_what_the_predecessor_accepted(
    module: str, name: str, member: str, key: str
) -> None:
    problems = _check(module, name, member)
    if key in DELIBERATE:
        assert problems, f"{key} now matches the predecessor: take it off DELIBERATE"
        assert DELIBERATE[key] in _GUIDE, f"the migration guide does not explain {key}"
    else:
        assert not problems, f"{key}: " + "; ".join(problems)


@pytest.mark.parametrize(
    ("module", "name"),
    [pytest.param(m, n, id=f"{m}:{n}") for m, names in sorted(_IMPORTS.items()) for n in names],
)
def test_every_import_of_marins_code_resolves(module: str, name: str) -> None:
    if module == "fray.iris_backend":
        pytest.importorskip("fray_iris")
    imported = importlib.import_module(module)
    assert not name or getattr(imported, name) is not None


def test_the_facts_cover_marins_import_paths() -> None:
    assert {"fray.types", "fray.client", "fray.current_client", "fray.local_backend"} <= set(_API)
    assert "_current_client_var" in _IMPORTS["fray.current_client"]


def test_current_client_var_works_as_marins_step_runner_uses_it() -> None:
    from concurrent.futures import ThreadPoolExecutor

    from fray import LocalClient, current_actor, current_client, set_current_client
    from fray.actor import ActorContext, _reset_current_actor, _set_current_actor
    from fray.current_client import _current_client_var

    assert _current_client_var.get() is None
    with LocalClient(max_threads=1) as client:
        with set_current_client(client):
            captured = _current_client_var.get()
        assert captured is client and _current_client_var.get() is None

        def worker() -> bool:  # the step runner's worker thread binds the captured client
            token = _current_client_var.set(captured)
            try:
                return current_client() is client and _current_client_var.get() is client
            finally:
                _current_client_var.reset(token)

        with ThreadPoolExecutor(1) as pool:
            assert pool.submit(worker).result()
        actor = _set_current_actor(ActorContext(handle=None, index=0, group_name="g"))
        token = _current_client_var.set(client)
        assert current_actor().group_name == "g" and current_client() is client
        _current_client_var.reset(token)
        assert current_actor().group_name == "g" and _current_client_var.get() is None
        _reset_current_actor(actor)
