"""The migration steps a finding belongs to, and the shape of one scanner rule."""

from __future__ import annotations

import dataclasses
import re

__all__ = ["BY_KEY", "STRATEGIES", "Rule", "Strategy", "fill"]


@dataclasses.dataclass(frozen=True)
class Strategy:
    """One migration step. Steps are done in ``priority`` order (1 first).

    Attributes:
        key: Stable identifier used in JSON output.
        priority: 1 is done first.
        title: One line.
        summary: What the step means in Fray.
    """

    key: str
    priority: int
    title: str
    summary: str


STRATEGIES: tuple[Strategy, ...] = (
    Strategy(
        "remove-unused-ray",
        1,
        "Remove unused Ray",
        "Drop Ray imports nothing uses and the ray.init()/ray.shutdown() set-up: Fray picks "
        "its backend from FRAY_CLIENT_SPEC (local, ray, ray://host:port, iris://host:port) "
        "through current_client().",
    ),
    Strategy(
        "data-to-actor-group",
        2,
        "Move data processing to an actor group",
        "Ray Data pipelines, ActorPools, queues and object-store traffic become "
        "client.create_actor_group(Worker, name=..., count=N): hand each shard to a ready "
        "worker (group.wait_ready(), discover_new()), re-assign it if the worker dies, and move "
        "data through storage paths (fsspec URLs), not ray.put()/RPC arguments.",
    ),
    Strategy(
        "remote-to-jobs-or-actors",
        3,
        "Replace ray.remote with jobs or actors",
        "A @ray.remote function becomes a job (client.submit(JobRequest(..., "
        "entrypoint=Entrypoint.from_callable(fn, args)))) and ray.get() becomes "
        "job.result() or wait_all(jobs); a @ray.remote class becomes client.create_actor(Cls, "
        "name=...) whose methods keep the .method.remote(...) call shape (ActorFuture.result()).",
    ),
    Strategy(
        "resources-to-request-fields",
        4,
        "Express runtime env and head-node needs as JobRequest fields",
        "num_cpus/memory/num_gpus/TPU resources become ResourceConfig (ResourceConfig.with_tpu("
        "type, slice_count=N) for TPU gangs, instead of placement groups); runtime_env becomes "
        "EnvironmentConfig(env_vars=..., pip_packages=...); the head_node resource becomes "
        "ResourceConfig(preemptible=False); retries become max_retries_failure and "
        "max_retries_preemption; actor options become ActorConfig.",
    ),
    Strategy(
        "port-fray-v2",
        5,
        "Port the predecessor's Fray API",
        "The predecessor's current module paths (fray.types, fray.client, fray.cluster, ...) "
        "work unchanged; fray.v2.* paths drop the .v2; fray.v1 and the older Cluster API "
        "become current_client()/client.submit() with JobHandle methods, and its Ray TPU "
        "runners (run_on_pod*) become TPU jobs.",
    ),
)
BY_KEY = {s.key: s for s in STRATEGIES}
REMOVE_RAY, DATA, REMOTE, RESOURCES, PREDECESSOR = (s.key for s in STRATEGIES)


@dataclasses.dataclass(frozen=True)
class Rule:
    """One kind of finding: its pattern id, its migration step and its texts.

    ``found`` and ``advice`` are templates: each ``{field}`` is replaced by the value the
    scanner derived from the code (a name, an argument as written); other braces are kept.

    Attributes:
        pattern: Stable pattern id, e.g. ``ray-remote-task``.
        strategy: Key of the :class:`Strategy` it belongs to.
        advice: The recommended Fray form.
        found: What was found, in words; empty when the scanner words it itself.
    """

    pattern: str
    strategy: str
    advice: str
    found: str = ""

    def render(self, fields: dict[str, str]) -> tuple[str, str]:
        """``(found, advice)`` with every ``{field}`` filled in."""
        return fill(self.found, fields), fill(self.advice, fields)


_FIELD = re.compile(r"\{(\w+)\}")


def fill(template: str, fields: dict[str, str]) -> str:
    """``template`` with each ``{field}`` named in ``fields`` replaced, in one pass."""
    return _FIELD.sub(lambda match: fields.get(match.group(1), match.group(0)), template)
