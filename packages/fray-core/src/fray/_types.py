"""Request and status types: frozen pydantic models, validated at construction.

Every bad value raises :class:`fray.errors.InvalidRequestError` naming the field, the value and
what is allowed. Models are immutable; ``model_copy(update=...)`` or the ``with_*`` helpers make
changed copies.
"""

from __future__ import annotations

import enum
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Annotated, Any, Literal, Self, cast

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from fray import topology as _tpu
from fray.errors import InvalidRequestError

__all__ = [
    "GPU_TYPES",
    "ActorConfig",
    "CpuConfig",
    "DeviceConfig",
    "Entrypoint",
    "EnvironmentConfig",
    "GpuConfig",
    "JobInfo",
    "JobRequest",
    "JobStatus",
    "ResourceConfig",
    "TpuConfig",
    "create_environment",
    "is_secret_name",
    "parse_memory",
    "redact_env",
]

# ---------------------------------------------------------------------------------------------
# Validation plumbing


def _clean_message(message: str) -> str:
    for prefix in ("Value error, ", "Assertion failed, "):
        if message.startswith(prefix):
            return message[len(prefix) :]
    return message


def _translate(model: str, err: ValidationError) -> InvalidRequestError:
    """Turns pydantic's report into one InvalidRequestError naming field, value and rule."""
    problems: list[tuple[str, Any, str]] = []
    for item in err.errors(include_url=False):
        # Discriminated unions add the tag ("tpu") to the location; it names no field.
        loc = [
            str(p) for p in item["loc"] if p not in ("cpu", "gpu", "tpu") or len(item["loc"]) == 1
        ]
        field = ".".join([model, *loc]) if loc else model
        inner = (item.get("ctx") or {}).get("error")
        if isinstance(inner, InvalidRequestError) and inner.field:
            # A nested model rejected its own field: report it at its full path.
            inner_field = inner.field.split(".", 1)[1] if "." in inner.field else inner.field
            problems.append((f"{field}.{inner_field}", inner.value, inner.allowed))
            continue
        if item["type"] == "extra_forbidden":
            allowed = "unknown field"
        elif item["type"] == "missing":
            allowed = "this field is required"
        else:
            allowed = _clean_message(item["msg"]).replace("Input should be", "must be")
        problems.append((field, _redacted(item.get("input")), allowed))
    field, value, allowed = problems[0]
    if allowed == "this field is required" and len(problems) == 1:
        message = f"{field}: {allowed}"
    else:
        message = f"{field}: {value!r} is not valid; {allowed}"
    for extra_field, extra_value, extra_allowed in problems[1:]:
        message += f"\n{extra_field}: {extra_value!r} is not valid; {extra_allowed}"
    return InvalidRequestError(message, field=field, value=value, allowed=allowed)


def _redacted(value: Any) -> Any:
    """``value`` for an error message: values under secret-looking names (at any depth, e.g.
    a rejected ``env_vars``) are hidden, since error messages end up in logs."""
    if isinstance(value, Mapping):
        return {
            key: REDACTED if isinstance(key, str) and is_secret_name(key) else _redacted(item)
            for key, item in cast(Mapping[Any, Any], value).items()
        }
    return value


class _Model(BaseModel):
    """Frozen model whose validation errors are InvalidRequestError."""

    # defer_build: the validators are built on first use, not at `import fray` (about a
    # third of its import cost); measured by benchmarks/bench_local.py.
    model_config = ConfigDict(
        frozen=True, extra="forbid", arbitrary_types_allowed=True, defer_build=True
    )

    def __init__(self, /, **data: Any) -> None:
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
                            f"field names must be strings, not {keys[0]!r}",
                        ) from None
            raise

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
    """Parses a memory size into bytes.

    Args:
        value: A byte count or a string such as ``"16g"``, ``"512Mi"`` or ``"1.5GB"``. Units
            ``k/m/g/t/p`` are powers of 1024, optionally followed by ``i`` and/or ``b``.
        field: Field name used in the error message.

    Returns:
        The size in bytes.

    Raises:
        InvalidRequestError: The value is not a size, or is negative.
    """
    if isinstance(value, bool):
        raise InvalidRequestError.for_field(field, value, MEMORY_ALLOWED)
    if isinstance(value, int):
        if value < 0:
            raise InvalidRequestError.for_field(field, value, "sizes cannot be negative")
        return value
    if not isinstance(value, str):
        raise InvalidRequestError.for_field(field, value, MEMORY_ALLOWED)
    match = _MEMORY_RE.match(value)
    if not match or (match.group(3) and not match.group(2)):
        raise InvalidRequestError.for_field(field, value, MEMORY_ALLOWED)
    size = float(match.group(1)) * _MEMORY_UNITS[match.group(2).lower()]
    if not math.isfinite(size):
        raise InvalidRequestError.for_field(field, value, "the size is too large")
    return int(size)


def _as_tuple(value: Any) -> tuple[Any, ...]:
    """``tuple(value)`` for validators: not being a collection is a ValueError (pydantic
    reports those; any other exception would escape as itself)."""
    if isinstance(value, str | bytes) or not isinstance(value, Iterable):
        raise ValueError(f"give a list, not {type(value).__name__}")
    return tuple(cast(Iterable[Any], value))


def _reject_reserved(helper: str, kwargs: Mapping[str, Any], reserved: Mapping[str, str]) -> None:
    """Fields a ``ResourceConfig.with_*`` helper sets itself cannot also come in ``kwargs``."""
    for name, instead in reserved.items():
        if name in kwargs:
            raise InvalidRequestError.for_field(
                f"ResourceConfig.{helper}.{name}", kwargs[name], f"{helper} sets it; {instead}"
            )


def _memory_field(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise ValueError(MEMORY_ALLOWED)
    try:
        parse_memory(value)
    except InvalidRequestError as err:
        raise ValueError(err.allowed) from None
    return str(value) if isinstance(value, int) else value.strip()


# ---------------------------------------------------------------------------------------------
# Secrets

_SECRET_RE = re.compile(r"TOKEN|KEY|SECRET|PASSWORD|PASSWD|CREDENTIAL", re.IGNORECASE)
REDACTED = "***"


def is_secret_name(name: str) -> bool:
    """Whether an env var name looks like it holds a secret (its value is then redacted)."""
    return bool(_SECRET_RE.search(name))


def redact_env(env: Mapping[str, str]) -> dict[str, str]:
    """Returns a copy of ``env`` with the values of secret-looking names replaced by ``***``."""
    return {k: (REDACTED if is_secret_name(k) else v) for k, v in env.items()}


# ---------------------------------------------------------------------------------------------
# Devices

GPU_TYPES: tuple[str, ...] = (
    "A10",
    "A10G",
    "A100-40G",
    "A100-80G",
    "B100",
    "B200",
    "H100",
    "H200",
    "L4",
    "T4",
    "V100",
    "auto",
)


class CpuConfig(_Model):
    """A CPU-only task."""

    kind: Literal["cpu"] = "cpu"
    variant: Literal["cpu"] = "cpu"

    def chip_count(self) -> int:
        """Accelerator chips per replica: none."""
        return 0

    def default_env_vars(self) -> dict[str, str]:
        """Env vars a CPU task gets unless the request sets them."""
        return {"JAX_PLATFORMS": "cpu"}


class GpuConfig(_Model):
    """GPUs per replica.

    Attributes:
        variant: One of :data:`GPU_TYPES`; ``"auto"`` takes whatever GPU the backend has.
        count: GPUs per replica, at least 1.
    """

    kind: Literal["gpu"] = "gpu"
    variant: str
    count: int = Field(default=1, ge=1)

    @field_validator("variant")
    @classmethod
    def _check_variant(cls, value: str) -> str:
        if value in GPU_TYPES:
            return value
        by_upper = {g.upper(): g for g in GPU_TYPES}
        if value.upper() in by_upper:
            return by_upper[value.upper()]
        import difflib  # only on this error path: keeps `import fray` cheap

        close = difflib.get_close_matches(value.upper(), list(by_upper), n=3, cutoff=0.4)
        hint = f" Did you mean {', '.join(by_upper[c] for c in close)}?" if close else ""
        raise ValueError(f"known GPU types are {', '.join(GPU_TYPES)}.{hint}")

    def chip_count(self) -> int:
        """GPUs per replica."""
        return self.count

    def default_env_vars(self) -> dict[str, str]:
        """Env vars a GPU task gets unless the request sets them (empty: JAX picks)."""
        return {"JAX_PLATFORMS": ""}


class TpuConfig(_Model):
    """One TPU slice type. Multislice requests repeat it (see ``ResourceConfig.with_tpu``).

    Attributes:
        variant: A TPU type from the topology database (``"v5p-256"``); ``v5e-N`` is accepted
            as ``v5litepod-N``. Unknown names are rejected with the closest known ones.
        topology: Optional physical topology string (``"4x4x8"``), passed through to backends.
    """

    kind: Literal["tpu"] = "tpu"
    variant: str
    topology: str | None = None

    @field_validator("variant", mode="before")
    @classmethod
    def _check_variant(cls, value: Any) -> str:
        try:
            return _tpu.canonical_tpu_name(value)
        except _tpu.UnknownTpuTypeError as err:
            raise ValueError(str(err)) from None

    @property
    def topology_info(self) -> _tpu.TpuTopology:
        """The slice's entry in the topology database."""
        return _tpu.get_tpu_topology(self.variant)

    def chip_count(self) -> int:
        """TPU chips per VM (one replica runs per VM)."""
        return self.topology_info.chips_per_vm

    def vm_count(self) -> int:
        """VMs (replicas) per slice."""
        return self.topology_info.vm_count

    def default_env_vars(self) -> dict[str, str]:
        """Env vars a TPU task gets unless the request sets them."""
        return self.topology_info.default_env_vars()


DeviceConfig = Annotated[CpuConfig | GpuConfig | TpuConfig, Field(discriminator="kind")]


class ResourceConfig(_Model):
    """What each replica of a job (or each actor) needs.

    Attributes:
        cpu: CPU cores per replica (fractions allowed), at least 0.
        ram: Memory per replica, e.g. ``"16g"`` (see :func:`parse_memory`).
        disk: Disk per replica, same format as ``ram``.
        device: ``CpuConfig()``, ``GpuConfig(...)`` or ``TpuConfig(...)``.
        preemptible: Whether the work may run on preemptible capacity; ``False`` pins it to
            non-preemptible capacity (the head node on Ray).
        regions: Regions the work may run in, or ``None`` for anywhere.
        zone: A single zone the work must run in, or ``None``.
        replicas: Replicas per job (TPU: VMs per slice × slices).
        device_alternatives: Other device variants that are acceptable, same shape as ``device``.
    """

    cpu: float = Field(default=1, ge=0)
    ram: str = "4g"
    disk: str = "16g"
    device: DeviceConfig = Field(default_factory=CpuConfig)
    preemptible: bool = True
    regions: tuple[str, ...] | None = None
    zone: str | None = None
    replicas: int = Field(default=1, ge=1)
    device_alternatives: tuple[str, ...] | None = None

    @field_validator("ram", "disk", mode="before")
    @classmethod
    def _check_memory(cls, value: Any) -> str:
        return _memory_field(value)

    @field_validator("cpu")
    @classmethod
    def _finite_cpu(cls, value: float) -> float:
        if not math.isfinite(value):
            raise ValueError("cpu must be a finite number of cores, e.g. 1 or 0.5")
        return value

    @field_validator("regions", "device_alternatives", mode="before")
    @classmethod
    def _non_empty_names(cls, value: Any) -> Any:
        if isinstance(value, str):
            raise ValueError("give a list of names, not a single string")
        if value is not None:
            value = _as_tuple(value)
            if not value:
                raise ValueError("give at least one name, or None")
            for item in value:
                if not isinstance(item, str) or not item.strip():
                    raise ValueError("every entry must be a non-empty string")
        return value

    @model_validator(mode="after")
    def _check_device_shape(self) -> Self:
        device = self.device
        if isinstance(device, TpuConfig):
            vms = device.vm_count()
            if self.replicas % vms:
                raise ValueError(
                    f"replicas={self.replicas} must be a multiple of the {vms} VMs per "
                    f"{device.variant} slice (replicas = slices x VMs per slice)"
                )
            for alt in self.device_alternatives or ():
                try:
                    info = _tpu.get_tpu_topology(alt)
                except _tpu.UnknownTpuTypeError as err:
                    raise ValueError(f"device_alternatives: {err}") from None
                if (info.vm_count, info.chips_per_vm) != (vms, device.chip_count()):
                    raise ValueError(
                        f"device_alternatives: {alt} has {info.vm_count} VMs x "
                        f"{info.chips_per_vm} chips, but {device.variant} has {vms} x "
                        f"{device.chip_count()}; alternatives must have the same shape"
                    )
        elif isinstance(device, GpuConfig):
            for alt in self.device_alternatives or ():
                GpuConfig(variant=alt)
        elif self.device_alternatives:
            raise ValueError("device_alternatives only applies to GPU or TPU devices")
        return self

    @property
    def ram_bytes(self) -> int:
        """``ram`` in bytes."""
        return parse_memory(self.ram)

    @property
    def disk_bytes(self) -> int:
        """``disk`` in bytes."""
        return parse_memory(self.disk)

    @property
    def slice_count(self) -> int:
        """TPU slices this config asks for (1 for non-TPU devices)."""
        if isinstance(self.device, TpuConfig):
            return self.replicas // self.device.vm_count()
        return 1

    def chip_count(self) -> int:
        """Accelerator chips over all replicas."""
        return self.device.chip_count() * self.replicas

    @classmethod
    def with_tpu(
        cls, tpu_type: str | Sequence[str], *, slice_count: int = 1, **kwargs: Any
    ) -> ResourceConfig:
        """A TPU gang: ``slice_count`` slices of ``tpu_type``, one replica per VM.

        Args:
            tpu_type: A TPU type, or a list whose first entry is preferred and the rest are
                acceptable alternatives of the same shape.
            slice_count: Number of slices (multislice when more than 1).
            **kwargs: Other ``ResourceConfig`` fields; ``cpu``, ``ram`` and ``disk`` default
                to 32, ``"128g"`` and ``"50g"`` per host.
        """
        _reject_reserved(
            "with_tpu",
            kwargs,
            {"device": "pass tpu_type", "replicas": "pass slice_count (replicas = VMs x slices)"},
        )
        if isinstance(tpu_type, str):
            types = [tpu_type]
        elif isinstance(tpu_type, Iterable) and not isinstance(tpu_type, bytes | Mapping):
            types = list(cast(Iterable[Any], tpu_type))
            if not types:
                raise InvalidRequestError.for_field(
                    "ResourceConfig.with_tpu.tpu_type", tpu_type, "give at least one TPU type"
                )
        else:
            raise InvalidRequestError.for_field(
                "ResourceConfig.with_tpu.tpu_type",
                tpu_type,
                "give a TPU type such as 'v5p-8', or a list of acceptable ones",
            )
        if isinstance(slice_count, bool) or not isinstance(slice_count, int) or slice_count < 1:
            raise InvalidRequestError.for_field(
                "ResourceConfig.with_tpu.slice_count", slice_count, "must be an integer >= 1"
            )
        device = TpuConfig(variant=types[0])
        kwargs.setdefault("cpu", 32)
        kwargs.setdefault("ram", "128g")
        kwargs.setdefault("disk", "50g")
        if len(types) > 1:
            kwargs.setdefault("device_alternatives", tuple(types[1:]))
        return cls(device=device, replicas=slice_count * device.vm_count(), **kwargs)

    @classmethod
    def with_gpu(cls, gpu_type: str = "auto", count: int = 1, **kwargs: Any) -> ResourceConfig:
        """``count`` GPUs of ``gpu_type`` per replica."""
        _reject_reserved("with_gpu", kwargs, {"device": "pass gpu_type and count"})
        return cls(device=GpuConfig(variant=gpu_type, count=count), **kwargs)

    @classmethod
    def with_cpu(cls, **kwargs: Any) -> ResourceConfig:
        """A CPU-only config; ``kwargs`` are ``ResourceConfig`` fields."""
        _reject_reserved("with_cpu", kwargs, {"device": "use ResourceConfig(device=...)"})
        return cls(device=CpuConfig(), **kwargs)


# ---------------------------------------------------------------------------------------------
# Environment

_ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class EnvironmentConfig(_Model):
    """The software environment of a job.

    Attributes:
        workspace: A local directory shipped to remote workers (``None``: the current env).
        docker_image: A container image to run in (mutually exclusive with ``workspace``).
        pip_packages: Requirements installed for the job (remote backends install them; the
            local backend checks they are already installed).
        env_vars: Environment variables. Values of names that look secret (``*TOKEN*``,
            ``*KEY*``, ``*SECRET*``, ``*PASSWORD*``) are redacted in reprs and records.
            ``None`` values are dropped.
        extras: Optional-dependency extras of the workspace project to install.
    """

    workspace: str | None = None
    docker_image: str | None = None
    pip_packages: tuple[str, ...] = ()
    env_vars: dict[str, str] = Field(default_factory=dict)
    extras: tuple[str, ...] = ()

    @field_validator("pip_packages", "extras", mode="before")
    @classmethod
    def _names(cls, value: Any) -> Any:
        if isinstance(value, str):
            raise ValueError("give a list of strings, not a single string")
        if value is None:
            return ()
        value = _as_tuple(value)
        for item in value:
            if not isinstance(item, str) or not item.strip():
                raise ValueError("every entry must be a non-empty string")
        return value

    @field_validator("env_vars", mode="before")
    @classmethod
    def _env(cls, value: Any) -> Any:
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            raise ValueError("env_vars must be a mapping of names to string values")
        out: dict[str, str] = {}
        items = cast(Mapping[Any, Any], value)
        for key, item in items.items():
            if not isinstance(key, str) or not _ENV_NAME_RE.match(key):
                raise ValueError(
                    f"env var name {key!r} must be letters, digits and '_', not starting "
                    "with a digit"
                )
            if item is None:
                continue
            if not isinstance(item, str):
                raise ValueError(
                    f"env var {key} must have a string value, got {type(item).__name__}"
                )
            if "\x00" in item:
                raise ValueError(f"env var {key} contains a NUL byte")
            out[key] = item
        return out

    @model_validator(mode="after")
    def _one_location(self) -> Self:
        if self.workspace is not None and self.docker_image is not None:
            raise ValueError("set at most one of workspace and docker_image")
        return self

    def __repr_args__(self) -> Any:
        for name, value in super().__repr_args__():
            yield name, (redact_env(value) if name == "env_vars" else value)

    @classmethod
    def create(cls, **kwargs: Any) -> EnvironmentConfig:
        """Same as :func:`create_environment`."""
        return create_environment(**kwargs)


def create_environment(
    workspace: str | None = None,
    docker_image: str | None = None,
    pip_packages: Sequence[str] | None = None,
    env_vars: Mapping[str, str | None] | None = None,
    extras: Sequence[str] | None = None,
) -> EnvironmentConfig:
    """Builds an :class:`EnvironmentConfig`, dropping env vars whose value is ``None``."""
    # The model's validators check the shapes (and drop None values) with clear errors.
    fields: dict[str, Any] = {
        "workspace": workspace,
        "docker_image": docker_image,
        "pip_packages": () if pip_packages is None else pip_packages,
        "env_vars": {} if env_vars is None else env_vars,
        "extras": () if extras is None else extras,
    }
    return EnvironmentConfig(**fields)


# ---------------------------------------------------------------------------------------------
# Entrypoints


class Entrypoint(_Model):
    """What a job runs: a Python callable or a command line (exactly one of them).

    Build with :meth:`from_callable`, :meth:`from_command` or :meth:`from_shell`.
    """

    callable: Callable[..., Any] | None = None
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = Field(default_factory=dict)
    command: tuple[str, ...] | None = None

    @field_validator("command", mode="before")
    @classmethod
    def _argv(cls, value: Any) -> Any:
        if value is None:
            return None
        if isinstance(value, str):
            raise ValueError("give the command as a list of arguments")
        value = _as_tuple(value)
        if not value:
            raise ValueError("the command needs at least a program name")
        for item in value:
            if not isinstance(item, str):
                raise ValueError(f"every argument must be a string, got {item!r}")
            if "\x00" in item:
                raise ValueError("arguments cannot contain NUL bytes")
        if not value[0].strip():
            raise ValueError("the program name cannot be empty")
        return value

    @model_validator(mode="after")
    def _exactly_one(self) -> Self:
        if (self.callable is None) == (self.command is None):
            raise ValueError("set exactly one of callable and command")
        if self.command is not None and (self.args or self.kwargs):
            raise ValueError("args and kwargs only apply to a callable; put them in the command")
        return self

    @property
    def is_callable(self) -> bool:
        """Whether this runs a Python callable."""
        return self.callable is not None

    @classmethod
    def from_callable(
        cls,
        fn: Callable[..., Any],
        args: Sequence[Any] = (),
        kwargs: Mapping[str, Any] | None = None,
    ) -> Entrypoint:
        """Runs ``fn(*args, **kwargs)``; the return value is the job's result."""
        if not callable(fn):
            raise InvalidRequestError.for_field(
                "Entrypoint.callable", fn, "must be a callable (a function, method or class)"
            )
        try:
            args_tuple = _as_tuple(args)
        except ValueError:
            raise InvalidRequestError.for_field(
                "Entrypoint.args", args, "give the positional arguments as a list or tuple"
            ) from None
        if kwargs is not None and not isinstance(kwargs, Mapping):
            raise InvalidRequestError.for_field(
                "Entrypoint.kwargs", kwargs, "give the keyword arguments as a dict, or None"
            )
        return cls(callable=fn, args=args_tuple, kwargs=dict(kwargs or {}))

    @classmethod
    def from_command(cls, *argv: str | Sequence[str]) -> Entrypoint:
        """Runs a program: ``from_command("python", "-c", "print(1)")`` or a single list.

        A single string with spaces is rejected as ambiguous; use :meth:`from_shell` for a
        shell command line.
        """
        first = argv[0] if len(argv) == 1 else None
        parts: tuple[Any, ...] = tuple(first) if isinstance(first, list | tuple) else argv
        if len(parts) == 1 and isinstance(parts[0], str) and " " in parts[0].strip():
            raise InvalidRequestError.for_field(
                "Entrypoint.command",
                parts[0],
                "pass the program and its arguments separately, e.g. "
                "from_command('echo', 'hi'), or use Entrypoint.from_shell('echo hi | wc')",
            )
        return cls(command=parts)

    @classmethod
    def from_shell(cls, script: str) -> Entrypoint:
        """Runs ``script`` with ``bash -c`` (pipes, redirection and ``&&`` work)."""
        if not isinstance(script, str) or not script.strip():
            raise InvalidRequestError.for_field(
                "Entrypoint.command", script, "the shell script must be a non-empty string"
            )
        return cls(command=("bash", "-c", script))

    @classmethod
    def from_binary(cls, command: str, args: Sequence[str] = ()) -> Entrypoint:
        """Runs ``command`` with ``args`` (same as ``from_command(command, *args)``)."""
        return cls(command=(command, *args))

    def describe(self) -> str:
        """A short human description (the function's name or the command line)."""
        if self.command is not None:
            return " ".join(self.command)
        fn = self.callable
        return getattr(fn, "__qualname__", None) or repr(fn)


# ---------------------------------------------------------------------------------------------
# Jobs

_JOB_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")
JOB_NAME_ALLOWED = (
    "job names are 1-128 characters of letters, digits, '-', '_' and '.', starting with a "
    "letter or digit (no spaces or slashes)"
)


class JobStatus(enum.StrEnum):
    """Where a job is in its life. SUCCEEDED, FAILED and STOPPED are final."""

    PENDING = "pending"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    STOPPED = "stopped"

    @staticmethod
    def finished(status: JobStatus) -> bool:
        """Whether ``status`` is final."""
        return status in _FINISHED

    @property
    def is_finished(self) -> bool:
        """Whether this status is final."""
        return self in _FINISHED


_FINISHED = frozenset({JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.STOPPED})


class JobRequest(_Model):
    """A job to run.

    Attributes:
        name: Job name (see ``JOB_NAME_ALLOWED``); ids are derived from it.
        entrypoint: What to run.
        resources: What each replica needs.
        environment: Software environment; ``None`` for the current one.
        replicas: How many copies to run; ``None`` takes ``resources.replicas``.
        max_retries_failure: Re-runs after the job's own failure (N retries = N+1 attempts).
        max_retries_preemption: Re-runs after a preemption (node or worker lost).
        isolation: ``"thread"``, ``"process"`` or ``"auto"`` (the local backend runs callables
            in threads unless they need a process: env vars, TPU hosts). Remote backends
            always run jobs in processes.
    """

    name: str
    entrypoint: Entrypoint
    resources: ResourceConfig = Field(default_factory=ResourceConfig)
    environment: EnvironmentConfig | None = None
    replicas: int | None = Field(default=None, ge=1)
    max_retries_failure: int = Field(default=0, ge=0)
    max_retries_preemption: int = Field(default=100, ge=0)
    isolation: Literal["auto", "thread", "process"] = "auto"

    @field_validator("name")
    @classmethod
    def _check_name(cls, value: str) -> str:
        if not _JOB_NAME_RE.match(value):
            raise ValueError(JOB_NAME_ALLOWED)
        return value

    @model_validator(mode="after")
    def _resolve_replicas(self) -> Self:
        if self.replicas is None:
            object.__setattr__(self, "replicas", self.resources.replicas)
        device = self.resources.device
        if isinstance(device, TpuConfig) and self.replicas is not None:
            vms = device.vm_count()
            if self.replicas % vms:
                raise ValueError(
                    f"replicas={self.replicas} must be a multiple of the {vms} VMs per "
                    f"{device.variant} slice"
                )
        return self

    @property
    def replica_count(self) -> int:
        """``replicas`` as an int (always set after validation)."""
        assert self.replicas is not None
        return self.replicas

    @property
    def env_vars(self) -> dict[str, str]:
        """The env vars a replica gets: device defaults, overridden by the request's own."""
        env = dict(self.resources.device.default_env_vars())
        if self.environment is not None:
            env.update(self.environment.env_vars)
        return env


class ActorConfig(_Model):
    """How an actor behaves (not what it needs: that is ``ResourceConfig``).

    Attributes:
        max_concurrency: Calls that may run at once on one actor (1: strictly one at a time,
            in the order they arrived).
        max_restarts: Restarts after the actor dies (-1: forever; ``None``: backend default).
        max_task_retries: Retries of a call interrupted by the actor dying (-1: forever).
    """

    max_concurrency: int = Field(default=1, ge=1)
    max_restarts: int | None = Field(default=None, ge=-1)
    max_task_retries: int | None = Field(default=None, ge=-1)


class JobInfo(_Model):
    """A snapshot of a job's bookkeeping.

    Attributes:
        job_id: The job's id (hierarchical: ``parent/child``).
        name: The request's name.
        status: Current status.
        attempts: Attempts started so far (first run included).
        preemptions: Attempts lost to preemption.
        failures: Attempts that failed on their own.
        error: The last error text, if any.
        exit_code: Exit code of a command job's last attempt, if known.
        parent: The parent job's id, if submitted from inside a job.
        children: Ids of jobs submitted from inside this one.
        replicas: Replicas per attempt.
        submitted_at: Unix time of submission.
        started_at: Unix time the first attempt started, if it has.
        finished_at: Unix time it reached a final status, if it has.
    """

    job_id: str
    name: str
    status: JobStatus
    attempts: int = 0
    preemptions: int = 0
    failures: int = 0
    error: str | None = None
    exit_code: int | None = None
    parent: str | None = None
    children: tuple[str, ...] = ()
    replicas: int = 1
    submitted_at: float | None = None
    started_at: float | None = None
    finished_at: float | None = None
