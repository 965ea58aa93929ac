"""Request and status types: frozen pydantic models, validated at construction.

Every bad value raises :class:`fray.errors.InvalidRequestError` naming the field, the value and
what is allowed. Models are immutable; ``model_copy(update=...)`` or the ``with_*`` helpers make
changed copies.
"""

from __future__ import annotations

import dataclasses
import enum
import math
import os
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Annotated, Any, Literal, Self, cast

from pydantic import (
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

from fray._model import (
    Float,
    Int,
    Model,
    Name,
    Seq,
    SeqOf,
    Str,
    StrSeq,
    as_tuple,
    names,
    parse_memory,
)
from fray._resources import GPU_TYPES, CpuConfig, DeviceConfig, GpuConfig, ResourceConfig, TpuConfig
from fray._secrets import REDACTED, redact_env, redacted
from fray.errors import InvalidRequestError

__all__ = [
    "GPU_TYPES",
    "ActorConfig",
    "AttemptInfo",
    "BinaryEntrypoint",
    "CallableEntrypoint",
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
    "parse_memory",
]

# ---------------------------------------------------------------------------------------------
# Environment

_NAME_RULES = {
    "env_vars": ("env var", re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z"), "not starting with a digit"),
    "secrets": ("secret", re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*\Z"), "'.' and '-' inside"),
}
_DEFAULT_ENV = {"HF_DATASETS_TRUST_REMOTE_CODE": "1", "TOKENIZERS_PARALLELISM": "false"}


class EnvironmentConfig(Model):
    """The software environment of a job.

    Attributes:
        workspace: A local directory shipped to remote workers (``None``: the current env).
        docker_image: A container image to run in (mutually exclusive with ``workspace``).
        pip_packages: Requirements installed for the job (the local backend checks they
            are installed).
        env_vars: Environment variables (``None`` values dropped); values of secret-looking
            names (``*TOKEN*``, ``*KEY*``, ...) are redacted in reprs and records.
        secrets: Credentials by name, delivered as files; never shown in a repr or error.
        secret_behavior: ``"inherit"`` (the driver's credentials are forwarded too) or
            ``"isolate"`` (only ``secrets``).
        extras: Optional-dependency extras of the workspace project to install.
        setup_scripts: Scripts run before the job (Iris): ``None`` for the default.
        sync_packages: Workspace members the default setup installs (empty: all).
    """

    workspace: Name | None = None
    docker_image: Name | None = None
    pip_packages: StrSeq = Seq()
    env_vars: dict[str, str] = Field(default_factory=dict)
    secrets: dict[str, str] = Field(default_factory=dict)
    secret_behavior: Literal["inherit", "isolate"] = "inherit"
    extras: StrSeq = Seq()
    setup_scripts: StrSeq | None = None
    sync_packages: StrSeq = Seq()

    @field_validator("pip_packages", "extras", "setup_scripts", "sync_packages", mode="before")
    @classmethod
    def _names(cls, value: Any, info: ValidationInfo) -> Any:
        listed = names(value)
        return () if listed is None and info.field_name != "setup_scripts" else listed

    @field_validator("env_vars", "secrets", mode="before")
    @classmethod
    def _named_values(cls, value: Any, info: ValidationInfo) -> Any:
        what, name_re, also = _NAME_RULES[cast(str, info.field_name)]
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            raise ValueError(f"{info.field_name} must be a mapping of names to string values")
        out: dict[str, str] = {}
        items = cast(Mapping[Any, Any], value)
        for key, item in items.items():
            if not isinstance(key, str):
                raise ValueError(f"{what} names must be strings, not {type(key).__name__}")
            if not name_re.match(key):
                shown = redacted(key)
                raise ValueError(f"{what} name {shown!r} must be letters, digits and '_', {also}")
            if item is None:
                continue
            if not isinstance(item, str):
                raise ValueError(
                    f"{what} {key} must have a string value, got {type(item).__name__}"
                )
            if "\x00" in item:
                raise ValueError(f"{what} {key} contains a NUL byte")
            out[key] = item
        return out

    @model_validator(mode="after")
    def _one_location(self) -> Self:
        if self.workspace is not None and self.docker_image is not None:
            raise ValueError("set at most one of workspace and docker_image")
        return self

    def __repr_args__(self) -> Any:
        for name, value in super().__repr_args__():
            if name == "secrets":
                value = dict.fromkeys(value, REDACTED)
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
    setup_scripts: Sequence[str] | None = None,
    sync_packages: Sequence[str] | None = None,
    secrets: Mapping[str, str] | None = None,
    secret_behavior: str = "inherit",
) -> EnvironmentConfig:
    """Builds an :class:`EnvironmentConfig` with the predecessor's defaults: ``workspace``
    is the current directory unless a ``docker_image`` is given, and ``env_vars`` add to
    ``HF_DATASETS_TRUST_REMOTE_CODE=1``, ``TOKENIZERS_PARALLELISM=false`` and, when the
    driver sets it, ``MARIN_CI_DISABLE_RUNTIME_ENVS``; a ``None`` value drops a variable."""
    if workspace is None and docker_image is None:
        workspace = os.getcwd()
    env: Any = env_vars  # not a mapping: the model refuses it, naming the field
    if env_vars is None or isinstance(env_vars, Mapping):
        ci = os.environ.get("MARIN_CI_DISABLE_RUNTIME_ENVS")
        env = {**_DEFAULT_ENV, "MARIN_CI_DISABLE_RUNTIME_ENVS": ci, **(env_vars or {})}
    fields: dict[str, Any] = {
        "workspace": workspace,
        "docker_image": docker_image,
        "pip_packages": pip_packages,
        "env_vars": env,
        "secrets": secrets,
        "secret_behavior": secret_behavior,
        "extras": extras,
        "setup_scripts": setup_scripts,
        "sync_packages": sync_packages,
    }
    return EnvironmentConfig(**fields)


# ---------------------------------------------------------------------------------------------
# Entrypoints


@dataclasses.dataclass(frozen=True)
class CallableEntrypoint:
    """A callable with its arguments (the predecessor's name for that half of
    :class:`Entrypoint`; see ``Entrypoint.callable_entrypoint``)."""

    callable: Callable[..., Any]
    args: Sequence[Any] = ()
    kwargs: dict[str, Any] = dataclasses.field(default_factory=dict[str, Any])


@dataclasses.dataclass(frozen=True)
class BinaryEntrypoint:
    """A program and its arguments (the predecessor's name for that half of
    :class:`Entrypoint`; see ``Entrypoint.binary_entrypoint``)."""

    command: str
    args: Sequence[str]


class Entrypoint(Model):
    """What a job runs: a Python callable or a command line (exactly one of them).

    Build with :meth:`from_callable`, :meth:`from_command` or :meth:`from_shell`.
    """

    callable: Callable[..., Any] | None = None
    args: SeqOf = Seq()
    kwargs: dict[str, Any] = Field(default_factory=dict)
    command: StrSeq | None = None

    @model_validator(mode="before")
    @classmethod
    def _predecessor_shape(cls, data: Any) -> Any:
        """``Entrypoint(callable_entrypoint=CallableEntrypoint(...))`` or with a
        ``BinaryEntrypoint``, as the predecessor built them."""
        if not isinstance(data, dict):
            return data
        fields = cast(dict[str, Any], data)
        wrapped = fields.pop("callable_entrypoint", None)
        if isinstance(fields.get("callable"), CallableEntrypoint):
            wrapped = fields.pop("callable")
        if wrapped is not None:
            if not isinstance(wrapped, CallableEntrypoint):
                raise ValueError("callable_entrypoint must be a CallableEntrypoint")
            fields.update(callable=wrapped.callable, args=wrapped.args, kwargs=wrapped.kwargs)
        binary = fields.pop("binary_entrypoint", None)
        if isinstance(fields.get("callable"), BinaryEntrypoint):
            binary = fields.pop("callable")
        if binary is not None:
            if not isinstance(binary, BinaryEntrypoint):
                raise ValueError("binary_entrypoint must be a BinaryEntrypoint")
            fields["command"] = (binary.command, *as_tuple(binary.args))
        return fields

    @field_validator("command", mode="before")
    @classmethod
    def _argv(cls, value: Any) -> Any:
        if value is None:
            return None
        if isinstance(value, str):
            raise ValueError("give the command as a list of arguments")
        value = as_tuple(value)
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

    @property
    def callable_entrypoint(self) -> CallableEntrypoint | None:
        """The callable, its args and kwargs, as the predecessor's shape (or ``None``)."""
        if self.callable is None:
            return None
        return CallableEntrypoint(self.callable, self.args, dict(self.kwargs))

    @property
    def binary_entrypoint(self) -> BinaryEntrypoint | None:
        """The command, as the predecessor's shape (or ``None``)."""
        if self.command is None:
            return None
        return BinaryEntrypoint(self.command[0], Seq(self.command[1:]))

    @classmethod
    def from_callable(
        cls,
        c: Callable[..., Any] | None = None,
        args: Sequence[Any] = (),
        kwargs: Mapping[str, Any] | None = None,
        *,
        fn: Callable[..., Any] | None = None,
    ) -> Entrypoint:
        """Runs ``c(*args, **kwargs)``; the return value is the job's result. ``fn=`` is
        another name for ``c``."""
        if (c is None) == (fn is None):
            raise InvalidRequestError.for_field(
                "Entrypoint.callable", (c, fn), "give the callable once: by position, c= or fn="
            )
        target = c if c is not None else fn
        if not callable(target):
            raise InvalidRequestError.for_field(
                "Entrypoint.callable", target, "must be a callable (a function, method or class)"
            )
        if kwargs is not None and not isinstance(kwargs, Mapping):
            raise InvalidRequestError.for_field(
                "Entrypoint.kwargs", kwargs, "give the keyword arguments as a dict, or None"
            )
        return cls(callable=target, args=_args(args), kwargs=dict(kwargs or {}))

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
        return cls(command=(command, *_args(args)))

    def describe(self) -> str:
        """A short human description (the function's name or the command line)."""
        if self.command is not None:
            return " ".join(self.command)
        fn = self.callable
        return getattr(fn, "__qualname__", None) or repr(fn)


def _args(value: Any) -> tuple[Any, ...]:
    try:
        return as_tuple(value)
    except ValueError:
        raise InvalidRequestError.for_field(
            "Entrypoint.args", value, "give the arguments as a list or tuple (not a str or dict)"
        ) from None


# ---------------------------------------------------------------------------------------------
# Jobs

_JOB_NAME_RE = re.compile(r"^[^\s\x00-\x1f\x7f]{1,256}$")
JOB_NAME_ALLOWED = (
    "job names are 1-256 printable characters without spaces; '/' and '%' are allowed and "
    "are escaped in job ids (see fray.backend.job_id_part), where '/' separates a parent "
    "job from its children"
)


def _seconds(value: Any) -> float | None:
    """A duration as seconds: a number, a ``timedelta``, or an object with ``to_seconds()``
    or ``total_seconds()`` (the predecessor's ``Duration``)."""
    if value is None:
        return None
    for method in ("to_seconds", "total_seconds"):
        convert = getattr(value, method, None)
        if callable(convert):
            value = convert()
            break
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError("give seconds (a number), a timedelta, or None")
    if not 0 < value < math.inf:
        raise ValueError("must be a finite number of seconds > 0, or None for no limit")
    return float(value)


Seconds = Annotated[float | None, BeforeValidator(_seconds)]


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


class JobRequest(Model):
    """A job to run. Unlike most Fray types it may be changed after it is made (as the
    predecessor's dataclass could); each assignment is validated.

    Attributes:
        name: Job name (see ``JOB_NAME_ALLOWED``); ids are derived from it.
        entrypoint: What to run.
        resources: What each replica needs.
        environment: Software environment; ``None`` for the current one.
        replicas: How many copies to run; ``None`` takes ``resources.replicas``.
        processes_per_task: Processes per replica; more than 1 only on Iris.
        max_retries_failure: Re-runs after the job's own failure (N retries = N+1 attempts).
        max_retries_preemption: Re-runs after a preemption (node or worker lost).
        max_task_failures: Failed replica attempts the job tolerates over all its attempts
            (preemptions never count); 0: no limit beyond ``max_retries_failure``.
        priority: The backend's priority band (0: its default); a no-op but on Iris.
        timeout: Seconds each attempt may run (a number, a ``timedelta`` or a ``Duration``);
            past it the job fails with a ``TimeoutError`` cause, without retry.
        scheduling_timeout: Seconds the job may wait to be placed (same forms); then it
            fails, saying what it asked for and why no node took it. ``None``: no limit.
            The local and fake backends place jobs at once; Ray refuses it for commands.
        isolation: ``"thread"``, ``"process"`` or ``"auto"`` (the local backend runs callables
            in threads unless they need a process); remote backends always use processes.
    """

    model_config = ConfigDict(frozen=False, validate_assignment=True)

    name: Str
    entrypoint: Entrypoint
    resources: ResourceConfig = Field(default_factory=ResourceConfig)
    environment: EnvironmentConfig | None = None
    replicas: Int | None = Field(default=None, ge=1)
    processes_per_task: Int = Field(default=1, ge=1)
    max_retries_failure: Int = Field(default=0, ge=0)
    max_retries_preemption: Int = Field(default=100, ge=0)
    max_task_failures: Int = Field(default=0, ge=0)
    priority: Int = 0
    timeout: Seconds = None
    scheduling_timeout: Seconds = None
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


class ActorConfig(Model):
    """How an actor behaves (not what it needs: that is ``ResourceConfig``); it may be
    changed after it is made, each assignment validated.

    Attributes:
        max_concurrency: Calls that may run at once on one actor (1: one at a time, in order).
        max_restarts: Restarts after the actor dies (-1: forever; ``None``: backend default).
        max_task_retries: Retries of a call interrupted by the actor dying (-1: forever).
        priority: The backend's priority band (0: its default); a no-op but on Iris.
    """

    model_config = ConfigDict(frozen=False, validate_assignment=True)

    max_concurrency: Int = Field(default=1, ge=1)
    max_restarts: Int | None = Field(default=None, ge=-1)
    max_task_retries: Int | None = Field(default=None, ge=-1)
    priority: Int = 0


class AttemptInfo(Model):
    """How one attempt of a job ended (times are Unix times).

    Attributes:
        attempt: Its number, from 1.
        outcome: ``succeeded``, ``failed``, ``preempted``, ``stopped``, ``timed_out`` or
            ``unplaced`` (never placed within the job's ``scheduling_timeout``).
        started_at: When it was placed, if it was.
        finished_at: When its end was recorded.
        error: What went wrong, in words, where the backend said.
        exit_code: Its exit code, where known.
    """

    attempt: Int
    outcome: Literal["succeeded", "failed", "preempted", "stopped", "timed_out", "unplaced"]
    started_at: Float | None = None
    finished_at: Float | None = None
    error: Str | None = None
    exit_code: Int | None = None


class JobInfo(Model):
    """A snapshot of a job's bookkeeping (times are Unix times).

    Attributes:
        attempts: Attempts started so far (first run included).
        preemptions: Attempts lost to preemption.
        failures: Attempts that failed on their own.
        error: The last error text, if any.
        exit_code: Exit code of the last attempt, if known.
        parent: The parent job's id, if submitted from inside a job.
        children: Ids of jobs submitted from inside this one.
        started_at: When the first attempt started, if it has.
        pending_reason: While the job waits to be placed, why, where the backend says.
        attempt_history: How each attempt that ended did, oldest first, where Fray's engine
            ran the attempts (empty where the cluster runs them, e.g. Iris).
    """

    job_id: Str
    name: Str
    status: JobStatus
    attempts: Int = 0
    preemptions: Int = 0
    failures: Int = 0
    error: Str | None = None
    exit_code: Int | None = None
    parent: Str | None = None
    children: tuple[Str, ...] = ()
    replicas: Int = 1
    submitted_at: Float | None = None
    started_at: Float | None = None
    finished_at: Float | None = None
    pending_reason: Str | None = None
    attempt_history: tuple[AttemptInfo, ...] = ()
