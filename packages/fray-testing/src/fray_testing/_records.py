"""What a FakeClient records, in the order it happened."""

from __future__ import annotations

import dataclasses
from typing import Any

from fray import ActorConfig, JobRequest, ResourceConfig

__all__ = ["ActorCall", "ActorCreation", "JobSubmission", "Record"]


@dataclasses.dataclass(frozen=True)
class JobSubmission:
    """One ``submit()``.

    Attributes:
        request: The request exactly as submitted.
        job_id: The id the job got.
        parent: The id of the job it was submitted from, or ``None``.
    """

    request: JobRequest
    job_id: str
    parent: str | None = None

    @property
    def name(self) -> str:
        """The request's name."""
        return self.request.name


@dataclasses.dataclass(frozen=True)
class ActorCreation:
    """One ``create_actor()`` (``count == 1``, ``group=False``) or ``create_actor_group()``.

    Attributes:
        name: The name given (actors are named ``{name}-{index}``).
        actor_class: The class.
        args: Positional constructor arguments.
        kwargs: Keyword constructor arguments.
        count: How many actors.
        resources: The resources asked for, or ``None``.
        actor_config: The actor config given, or ``None``.
        group: Whether it came from ``create_actor_group``.
    """

    name: str
    actor_class: type[Any]
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    count: int
    resources: ResourceConfig | None
    actor_config: ActorConfig | None
    group: bool


@dataclasses.dataclass(frozen=True)
class ActorCall:
    """One method call on an actor (blocking or ``.remote()``), recorded before it runs.

    Attributes:
        actor: The actor's name (``{group}-{index}``).
        method: The method's name.
        args: Positional arguments.
        kwargs: Keyword arguments.
    """

    actor: str
    method: str
    args: tuple[Any, ...]
    kwargs: dict[str, Any]


Record = JobSubmission | ActorCreation | ActorCall
