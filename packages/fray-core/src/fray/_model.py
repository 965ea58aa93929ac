"""The base of the request types (frozen pydantic models whose validation errors are
``InvalidRequestError``s naming the field), memory sizes, and secret-looking env names."""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Annotated, Any, Self, cast

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Strict, ValidationError

from fray._secrets import REDACTED, redacted
from fray.errors import InvalidRequestError

# ---------------------------------------------------------------------------------------------
# Validation plumbing


def _translate(model: str, err: ValidationError) -> InvalidRequestError:
    """Turns pydantic's report into one InvalidRequestError naming field, value and rule."""
    problems: list[tuple[str, Any, str]] = []
    for item in err.errors(include_url=False):
        # Discriminated unions add the tag ("tpu") to the location; it names no field.
        loc = [
            str(p) for p in item["loc"] if p not in ("cpu", "gpu", "tpu") or len(item["loc"]) == 1
        ]
        field = ".".join([model, *loc])
        inner = (item.get("ctx") or {}).get("error")
        if isinstance(inner, InvalidRequestError) and inner.field:
            # A nested model rejected its own field: report it at its full path.
            inner_field = inner.field.split(".", 1)[-1]
            problems.append((f"{field}.{inner_field}", inner.value, inner.allowed))
            continue
        if item["type"] == "extra_forbidden":
            allowed = "unknown field"
        elif item["type"] == "missing":
            allowed = "this field is required"
        else:
            message = item["msg"].removeprefix("Value error, ").removeprefix("Assertion failed, ")
            allowed = message.replace("Input should be", "must be")
        value = REDACTED if "secrets" in loc else item.get("input")
        problems.append((field, redacted(value), allowed))
    field, value, allowed = problems[0]
    lines = [f"{where}: {bad!r} is not valid; {rule}" for where, bad, rule in problems]
    if allowed == "this field is required" and len(problems) == 1:
        lines = [f"{field}: {allowed}"]
    return InvalidRequestError("\n".join(lines), field=field, value=value, allowed=allowed)


def _dataclass_fields(cls: type[BaseModel]) -> dict[str, dataclasses.Field[Any]]:
    """``cls``'s fields as ``dataclasses`` describes fields, for ``dataclasses.fields``,
    ``replace`` (a new, validated instance), ``asdict`` and ``is_dataclass``."""

    fields: dict[str, dataclasses.Field[Any]] = {}
    for name, info in cls.model_fields.items():
        if info.default_factory is not None:
            field: dataclasses.Field[Any] = dataclasses.field(
                default_factory=cast(Callable[[], Any], info.default_factory)
            )
        elif info.is_required():
            field = dataclasses.field()
        else:
            field = dataclasses.field(default=info.default)
        field.name = name
        field.type = info.annotation
        # The marker dataclasses.replace/asdict look for on a regular field.
        field._field_type = dataclasses._FIELD  # type: ignore[attr-defined]
        fields[name] = field
    return fields


class Model(BaseModel):
    """A request type: validated at construction (a bad value is an ``InvalidRequestError``
    naming the field), frozen unless a subclass says otherwise, and shaped like a dataclass
    for code written against one (positional arguments in field order, ``dataclasses.fields``,
    ``replace``, ``asdict``)."""

    # defer_build: the validators are built on first use, not at `import fray` (about a
    # third of its import cost); measured by benchmarks/bench_local.py.
    model_config = ConfigDict(
        frozen=True, extra="forbid", arbitrary_types_allowed=True, defer_build=True
    )

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        cls.__dataclass_fields__ = _dataclass_fields(cls)  # pyright: ignore[reportAttributeAccessIssue]

    def __init__(self, /, *args: Any, **data: Any) -> None:
        if args:
            data = self._by_position(args, data)
        try:
            super().__init__(**data)
        except ValidationError as err:
            raise _translate(type(self).__name__, err) from None
        except TypeError:
            # A dict given for a nested model reaches that model's __init__ as keywords, so
            # non-string keys fail as a TypeError before any validator sees them.
            for name, value in data.items():
                if isinstance(value, Mapping):
                    keys = [k for k in cast(Mapping[Any, Any], value) if not isinstance(k, str)]
                    if keys:
                        raise InvalidRequestError.for_field(
                            f"{type(self).__name__}.{name}",
                            value,
                            f"field names must be strings, not {redacted(keys[0])!r}",
                        ) from None
            raise

    @classmethod
    def _by_position(cls, args: tuple[Any, ...], data: dict[str, Any]) -> dict[str, Any]:
        names = list(cls.model_fields)
        if len(args) > len(names):
            raise InvalidRequestError.for_field(
                cls.__name__,
                args,
                f"takes at most {len(names)} values by position ({', '.join(names)})",
            )
        for name, value in zip(names, args, strict=False):
            if name in data:
                raise InvalidRequestError.for_field(
                    f"{cls.__name__}.{name}", value, "is given both by position and by name"
                )
            data[name] = value
        return data

    def __setattr__(self, name: str, value: Any) -> None:
        # Only the types that are not frozen get here without pydantic refusing first.
        try:
            super().__setattr__(name, value)
        except ValidationError as err:
            raise _translate(type(self).__name__, err) from None

    @classmethod
    def model_validate(cls, obj: Any, *args: Any, **kwargs: Any) -> Self:  # type: ignore[override]
        if isinstance(obj, Mapping):
            # Pydantic hands a dict to our __init__ as keywords: other keys are a TypeError.
            bad = [k for k in cast(Mapping[Any, Any], obj) if not isinstance(k, str)]
            if bad:
                raise InvalidRequestError.for_field(
                    cls.__name__, bad[0], "field names must be strings"
                )
        try:
            return super().model_validate(obj, *args, **kwargs)
        except ValidationError as err:
            raise _translate(cls.__name__, err) from None

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self:
        """Returns a copy with ``update`` applied, validated like a new instance."""
        if not update:
            return super().model_copy(deep=deep)
        data = {name: getattr(self, name) for name in type(self).model_fields}
        data.update(update)
        return type(self)(**data)


# ---------------------------------------------------------------------------------------------
# Memory sizes

_MEMORY_RE = re.compile(
    r"^\s*(\d+(?:\.\d+)?|\.\d+)\s*([kmgtp]?)(i?)(b?)\s*$", re.IGNORECASE | re.ASCII
)
_MEMORY_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40, "p": 1 << 50}
MEMORY_ALLOWED = (
    "use a byte count or a number with a unit, e.g. '512m', '16g', '16gb', '512Mi', '1.5GB' "
    "(units k, m, g, t, p are powers of 1024, with an optional 'i' and/or 'b')"
)


def parse_memory(value: str | int, *, field: str = "memory") -> int:
    """A memory size in bytes: a byte count or a string such as ``"16g"``, ``"512Mi"`` or
    ``"1.5GB"`` (units ``k/m/g/t/p`` are powers of 1024, optionally followed by ``i`` and/or
    ``b``). A bad value is an ``InvalidRequestError`` naming ``field``."""
    if isinstance(value, int) and not isinstance(value, bool):
        if value < 0:
            raise InvalidRequestError.for_field(field, value, "sizes cannot be negative")
        return value
    match = _MEMORY_RE.match(value) if isinstance(value, str) else None
    if not match or (match.group(3) and not match.group(2)):
        raise InvalidRequestError.for_field(field, value, MEMORY_ALLOWED)
    size = float(match.group(1)) * _MEMORY_UNITS[match.group(2).lower()]
    if not math.isfinite(size):
        raise InvalidRequestError.for_field(field, value, "the size is too large")
    return int(size)


class Seq(tuple[Any, ...]):
    """A tuple that also equals a list with the same items: a request keeps the sequences it
    is given as immutable tuples, yet ``request.args == [1, 2]`` holds when ``[1, 2]`` was
    passed in (the predecessor's dataclasses kept the lists themselves)."""

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        if isinstance(other, list):
            return tuple.__eq__(self, tuple(cast(list[Any], other)))
        return tuple.__eq__(self, other)

    __ne__ = object.__ne__  # the inverse of __eq__ (tuple's own would not equal a list)

    def __hash__(self) -> int:
        return tuple.__hash__(self)


def as_seq(value: tuple[Any, ...] | None) -> Seq | None:
    """``value`` as a :class:`Seq` (pydantic ``AfterValidator``)."""
    return None if value is None else Seq(value)


def names(value: Any, what: str = "strings") -> tuple[str, ...] | None:
    """A validator's sequence of non-empty strings (``None`` stays ``None``; a single string
    is refused, not split)."""
    if isinstance(value, str):
        raise ValueError(f"give a list of {what}, not a single string")
    if value is None:
        return None
    value = as_tuple(value)
    for item in value:
        if not isinstance(item, str) or not item.strip():
            raise ValueError("every entry must be a non-empty string")
    return value


def as_tuple(value: Any) -> tuple[Any, ...]:
    """``tuple(value)`` for validators: a string (never split into characters), a mapping
    (never reduced to its keys) or a non-collection is a ValueError (pydantic reports those;
    any other exception would escape as itself)."""
    if isinstance(value, str | bytes | Mapping) or not isinstance(value, Iterable):
        raise ValueError(f"give a list, not {type(cast(object, value)).__name__}")
    return tuple(cast(Iterable[Any], value))


def whole(value: object, minimum: int, maximum: float = math.inf) -> bool:
    """Whether ``value`` is an ``int`` (not a ``bool``) from ``minimum`` to ``maximum``."""
    return type(value) is not bool and isinstance(value, int) and minimum <= value <= maximum


def _number(value: Any) -> Any:
    # Pydantic's lax mode would read True as 1 and "2" as 2.
    if isinstance(value, bool | str | bytes):
        raise ValueError(f"must be a number, not {type(value).__name__}")
    return value


def _filled(value: str) -> str:
    if not value.strip():
        raise ValueError("must be a non-empty string")
    return value


SeqOf = Annotated[tuple[Any, ...], AfterValidator(as_seq)]
StrSeq = Annotated[tuple[str, ...], AfterValidator(as_seq)]
Int = Annotated[int, BeforeValidator(_number)]
Float = Annotated[float, BeforeValidator(_number)]
Str = Annotated[str, Strict()]
Name = Annotated[str, Strict(), AfterValidator(_filled)]
"""A non-empty string (a zone, an image, a cluster's name...)."""
Bool = Annotated[bool, Strict()]


def reject_reserved(helper: str, kwargs: Mapping[str, Any], reserved: Mapping[str, str]) -> None:
    """Fields a ``ResourceConfig.with_*`` helper sets itself cannot also come in ``kwargs``."""
    for name, instead in reserved.items():
        if name in kwargs:
            raise InvalidRequestError.for_field(
                f"ResourceConfig.{helper}.{name}", kwargs[name], f"{helper} sets it; {instead}"
            )


def memory_field(value: Any) -> str:
    try:
        parse_memory(value)
    except InvalidRequestError as err:
        raise ValueError(err.allowed) from None
    return str(value) if isinstance(value, int) else value.strip()


Memory = Annotated[str, BeforeValidator(memory_field)]
"""A memory size as given (``"16g"``; a byte count as its digits), read by :func:`parse_memory`."""
