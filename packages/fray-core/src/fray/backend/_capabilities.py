"""What each backend refuses in a request, one :class:`Capabilities` table per backend:
a backend honours every field or refuses it at submit time, naming the field. A field that
does not change what a job computes and that the backend cannot reserve (disk on Ray) is
not refused: it is a :class:`Note`, which the backend (and a client checking against its
table) warns about once per client, naming the field and the value.

A backend checks requests against its own table; ``FakeClient(target="ray")`` and
``LocalClient(target="ray")`` check against another's, so a unit test fails where the
cluster would, with the same message; each backend's README carries its table
(:meth:`Capabilities.markdown`). What depends on the cluster is checked by the backend.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from fray._resources import (
    DEFAULT_DISK,
    GpuConfig,
    ResourceConfig,
    TpuConfig,
    has_default_disk,
)
from fray._types import JobRequest
from fray.errors import InvalidRequestError

logger = logging.getLogger("fray")


@dataclass(frozen=True)
class Limit:
    """One refusal: the ``field`` (a path under :class:`~fray.JobRequest`), what is
    ``allowed`` there and why (the error's text and the README's), and ``breaks``, true for
    a request the backend refuses; for a ``resources.*`` limit, ``on_resources`` is the same
    test on a bare :class:`~fray.ResourceConfig`, so actors are checked too."""

    field: str
    allowed: str
    breaks: Callable[[JobRequest], bool]
    on_resources: Callable[[ResourceConfig], bool] | None = None


@dataclass(frozen=True)
class Note:
    """A ``resources.<name>`` field a backend takes but may not reserve: ``says`` what it
    does with it (the warning's text and the README's); ``applies`` is true for resources
    that ask for it (a value other than the default)."""

    name: str
    says: str
    applies: Callable[[ResourceConfig], bool]

    @property
    def field(self) -> str:
        """The field's path under a request (``resources.disk``)."""
        return f"resources.{self.name}"

    def warning(self, resources: ResourceConfig, backend: str) -> str:
        """The one warning a client gives for it, naming the field and the value."""
        value = getattr(resources, self.name)
        return f"{self.field}={value!r}: {backend} {self.says}; it runs without the reservation"


def resource_limit(name: str, allowed: str, breaks: Callable[[ResourceConfig], bool]) -> Limit:
    """A limit on ``resources.<name>``, for jobs and actors alike."""
    return Limit(f"resources.{name}", allowed, lambda r: breaks(r.resources), breaks)


def _value_at(obj: Any, path: str) -> Any:
    for part in path.split("."):
        obj = getattr(obj, part)
    return obj


class Capabilities:
    """The refusals (``limits``) of one backend, in the order it checks them, and the fields
    it takes but only notes (``notes``): ``backend`` is its scheme, ``title`` how messages
    and the README name it (``Ray``)."""

    def __init__(
        self, backend: str, title: str, limits: Iterable[Limit], notes: Iterable[Note] = ()
    ) -> None:
        self.backend = backend
        self.title = title
        self.limits = tuple(limits)
        self.notes = tuple(notes)

    def __repr__(self) -> str:
        return f"Capabilities({self.backend!r}, limits={len(self.limits)})"

    def check(self, request: JobRequest) -> JobRequest:
        """``request`` if this backend takes it.

        Raises:
            InvalidRequestError: Naming the first field it refuses and what it allows.
        """
        for limit in self.limits:
            if limit.breaks(request):
                raise InvalidRequestError.for_field(
                    f"JobRequest.{limit.field}", _value_at(request, limit.field), limit.allowed
                )
        return request

    def check_resources(self, resources: ResourceConfig | None) -> None:
        """Checks an actor's ``resources`` (``None`` asks for nothing).

        Raises:
            InvalidRequestError: Naming the first field it refuses and what it allows.
        """
        if not isinstance(resources, ResourceConfig):
            return  # None asks for nothing; anything else is validate_actor_args's to refuse
        for limit in self.limits:
            if limit.on_resources is not None and limit.on_resources(resources):
                field = limit.field.removeprefix("resources.")
                raise InvalidRequestError.for_field(
                    limit.field, _value_at(resources, field), limit.allowed
                )

    def note_once(self, resources: ResourceConfig | None, noted: set[str]) -> None:
        """Warns of each note that applies to ``resources`` and whose field is not yet in
        ``noted`` (a client's: once per client and field), and adds it there: what a client
        checked against this table as its ``target`` says, as this backend's would."""
        for note in self.noted(resources):
            if note.field not in noted:
                noted.add(note.field)
                logger.warning(note.warning(resources, self.title))  # pyright: ignore[reportArgumentType]

    def noted(self, resources: ResourceConfig | None) -> list[Note]:
        """The notes that apply to ``resources`` (a job's or an actor's)."""
        if not isinstance(resources, ResourceConfig):
            return []
        return [note for note in self.notes if note.applies(resources)]

    def markdown(self) -> str:
        """The table as a Markdown table, for the backend's README."""
        rows = [f"| field | what {self.title} allows |", "|---|---|"]
        for limit in self.limits:
            scope = "" if limit.on_resources is None else " (jobs and actors)"
            rows.append(f"| `{limit.field}`{scope} | {limit.allowed} |")
        for note in self.notes:
            rows.append(
                f"| `{note.field}` (jobs and actors) | any value: {self.title} {note.says}; "
                "a client says so once |"
            )
        return "\n".join(rows) + "\n"


def _asks_disk(res: ResourceConfig) -> bool:
    """Whether ``res`` sizes its disk (not the default); the default's own spelling is
    answered without parsing (every request has one: parsing costs a Ray job 30 us)."""
    return res.disk != DEFAULT_DISK and not has_default_disk(res)


def _is_tpu(r: JobRequest) -> bool:
    return isinstance(r.resources.device, TpuConfig)


def sets_env_vars(r: JobRequest) -> bool:
    """Whether the job asks for an env var the driver does not already have (a value equal
    to the driver's own, such as ``create_environment()``'s defaults, needs no process)."""
    env = r.environment.env_vars if r.environment else {}
    return any(os.environ.get(name) != value for name, value in env.items())


def has_secrets(r: JobRequest) -> bool:
    """Whether the job is given secrets of its own, or only those (``isolate``)."""
    env = r.environment
    return env is not None and (bool(env.secrets) or env.secret_behavior == "isolate")


def _environment(name: str, allowed: str) -> Limit:
    """A limit on an ``environment.<name>`` that must stay empty."""
    return Limit(
        f"environment.{name}",
        allowed,
        lambda r: bool(r.environment and getattr(r.environment, name)),
    )


def _one_process_per_replica(who: str) -> Limit:
    return Limit(
        "processes_per_task",
        f"1: {who} runs one process per replica; use replicas, or a backend that runs a "
        "multi-process supervisor per task (Iris)",
        lambda r: r.processes_per_task > 1,
    )


def _needs_process(why: str, needs: Callable[[JobRequest], bool]) -> Limit:
    """A local limit on ``isolation="thread"`` for a job that ``needs`` a process."""
    return Limit(
        "isolation",
        f"{why}; use 'auto' or 'process'",
        lambda r: r.isolation == "thread" and needs(r),
    )


def _ray_tpu(name: str, what: str, breaks: Callable[[ResourceConfig], bool]) -> Limit:
    return Limit(
        f"resources.{name}",
        "unset for a TPU job on Ray: the gang claims slices by TPU type and slice name, "
        f"not by {what}",
        lambda r: _is_tpu(r) and breaks(r.resources),
    )


def _ray_command(name: str, empty: str, breaks: Callable[[ResourceConfig], bool]) -> Limit:
    return Limit(
        f"resources.{name}",
        f"{empty} for a command job on Ray: Ray's Jobs API cannot place a command by region, "
        "zone or GPU alternatives; run the command from a callable job instead",
        lambda r: not r.entrypoint.is_callable and breaks(r.resources),
    )


LOCAL = Capabilities(
    "local",
    "the local backend",
    [
        _one_process_per_replica("the local backend"),
        _needs_process(
            "a command always runs in a process", lambda r: not r.entrypoint.is_callable
        ),
        _needs_process(
            "env vars need a process of their own (unless the driver has the same values)",
            sets_env_vars,
        ),
        _needs_process("TPU hosts each need a process with their own env", _is_tpu),
        _needs_process(
            "secrets (and secret_behavior='isolate') need a process with a private secrets "
            "folder of its own",
            has_secrets,
        ),
        _environment(
            "docker_image",
            "unset: the local backend cannot run containers; leave it unset to run here",
        ),
    ],
)

RAY = Capabilities(
    "ray",
    "Ray",
    [
        Limit(
            "isolation",
            "'auto' or 'process': every Ray job runs in a worker process",
            lambda r: r.isolation == "thread",
        ),
        _one_process_per_replica("Ray"),
        Limit(
            "environment.secrets",
            "empty, with secret_behavior 'inherit', on Ray: Ray would carry them in a job's "
            "runtime_env, which its GCS and dashboard show, and cannot withhold the "
            "cluster's own credentials from a task; run jobs with secrets on Iris",
            has_secrets,
        ),
        _environment(
            "extras",
            "empty on Ray: Ray installs packages, not a project's extras; list the extras' "
            "packages in pip_packages, or install the project with its extras in the "
            "cluster's image",
        ),
        resource_limit(
            "device_alternatives",
            "empty unless the device is a GPU: on Ray, alternatives are a choice of GPU "
            "types (an accelerator-type label); a TPU gang claims one TPU type",
            lambda res: bool(res.device_alternatives) and not isinstance(res.device, GpuConfig),
        ),
        _ray_tpu("regions", "region", lambda res: bool(res.regions)),
        _ray_tpu("zone", "zone", lambda res: res.zone is not None),
        Limit(
            "resources.preemptible",
            "True for a TPU job on Ray: TPU slices are never the head node",
            lambda r: _is_tpu(r) and not r.resources.preemptible,
        ),
        _ray_command("regions", "unset", lambda res: bool(res.regions)),
        _ray_command("zone", "unset", lambda res: res.zone is not None),
        _ray_command("device_alternatives", "empty", lambda res: bool(res.device_alternatives)),
        Limit(
            "scheduling_timeout",
            "unset for a command job on Ray: Ray's Jobs API reports a job PENDING both while "
            "it waits for a node and while its runtime env is set up, so Fray cannot tell "
            "when it is placed; run the command from a callable job (e.g. subprocess.run) "
            "to bound its wait",
            lambda r: (
                r.scheduling_timeout is not None and not (r.entrypoint.is_callable or _is_tpu(r))
            ),
        ),
    ],
    [
        Note(
            "disk",
            "does not reserve disk unless its nodes advertise a custom resource 'disk' (in "
            "bytes, like 'memory')",
            _asks_disk,
        )
    ],
)

IRIS = Capabilities(
    "iris",
    "Iris",
    [
        Limit(
            "isolation",
            "'auto' or 'process': every Iris job runs in a task process of its own",
            lambda r: r.isolation == "thread",
        ),
        Limit(
            "processes_per_task",
            "1 with IrisClient.submit for now (several processes per task are not started "
            "yet); use replicas, or a command wrapped by fray.iris_backend.wrap_multiprocess",
            lambda r: r.processes_per_task > 1,
        ),
        Limit(
            "environment.workspace",
            "unset or the current directory (create_environment's default): on Iris the "
            "workspace is shipped once per client; pass it to IrisClient(workspace=...) or "
            "use the spec iris://host:port?ws=PATH",
            lambda r: (
                r.environment is not None and r.environment.workspace not in (None, os.getcwd())
            ),
        ),
        Limit(
            "resources.image",
            "the same as EnvironmentConfig.docker_image or unset: both name the task's image "
            "on Iris",
            lambda r: (
                r.resources.image is not None
                and r.environment is not None
                and r.environment.docker_image is not None
                and r.resources.image != r.environment.docker_image
            ),
        ),
    ],
)

_TABLES = {table.backend: table for table in (LOCAL, RAY, IRIS)}


def known_targets() -> tuple[str, ...]:
    """The backends with a table: the values ``target=`` takes."""
    return tuple(_TABLES)


def capabilities_of(target: str, *, field: str = "target") -> Capabilities:
    """The table of the backend named ``target`` (``InvalidRequestError``, naming ``field``,
    where no backend of that name has one)."""

    table = _TABLES.get(target) if isinstance(target, str) else None
    if table is None:
        raise InvalidRequestError.for_field(field, target, f"one of {', '.join(_TABLES)}")
    return table
