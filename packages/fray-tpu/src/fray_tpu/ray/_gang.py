# pyright: standard
"""One attempt of a TPU gang, driven from the driver by Ray's callbacks (every method of
:class:`Attempt` runs on the client's event thread unless its docstring says otherwise):
claim the slices, start one host actor per VM, run the payload on every host, and
tear the gang down at its end.

Claiming: one placement group per slice, ``[{TPU-<type>-head: 1}]``: each slice has one such
resource (on worker 0), so Ray's scheduler gives every group a free slice of its own and holds
it. The slice's name and hosts come from the nodes' ``ray.io/tpu-*`` labels. A slice whose
hosts are not all alive is held (so the next group lands elsewhere) and looked at every
second. A preempted VM returns as a new node with the same slice name and worker id while Ray
may still list the old one alive: a node this process lost a host with (unreachable, died or
drained) is not taken for a minute, and after that only when no other node claims its place,
so the returned host is used as soon as it is up, by this gang and the next. A
group is removed once placed, never while Ray may be preparing its bundles: that can leak a
slice for good (ray-project/ray#64693).

Running: each host actor is pinned to its VM with the VM's chips and what the user's code
asks for; its ``run`` future says how it ended. A Ray error that means a lost VM is a
preemption; a failure of the user's code is a failure unless the VM says it is being
preempted (the failed host is asked, then the hub); a host's report through the hub ends
the attempt as a preemption too (the driver asks the hub every second).
"""

from __future__ import annotations

import contextlib
import enum
import logging
import secrets
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import ray
from ray.util.placement_group import (
    PlacementGroup,
    placement_group,
    placement_group_table,
    remove_placement_group,
)
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from fray.backend import JobRecord, Outcome
from fray.topology import TpuTopology, canonical_tpu_name
from fray_ray.errors import read_ray_error
from fray_tpu._errors import CommandFailedError, ExitCalledError
from fray_tpu._multislice import multislice_env
from fray_tpu.ray._host import TpuHost

if TYPE_CHECKING:
    from fray_tpu.ray.gang import GangJob

__all__ = ["Attempt", "AttemptState", "LostNodes", "describe_slices"]

logger = logging.getLogger("fray_tpu.ray")

_SLICE_LABEL = "ray.io/tpu-slice-name"
_WORKER_LABEL = "ray.io/tpu-worker-id"
_POD_TYPE_LABEL = "ray.io/tpu-pod-type"
_RECHECK_S = 1.0  # between looks at a held slice, and at the hub while an attempt runs
_HEALTH_WAIT_S = 10.0  # how long a failed host may take to say whether its VM is preempted
_LOST_S = 60.0  # how long a node whose host was lost with it is not taken again


class AttemptState(enum.Enum):
    """Where a gang attempt is: claiming its slices, running its hosts, or over."""

    CLAIMING = "claiming"
    RUNNING = "running"
    ENDED = "ended"


class LostNodes:
    """The nodes a gang of this client lost a host with (unreachable, died or drained),
    each not taken again for :data:`_LOST_S` (node ids are never reused); one per client
    (``KindClient.kind_state``), shared by its gangs. Used on the event thread only."""

    def __init__(self, ttl: float = _LOST_S) -> None:
        self._ttl = ttl
        self._when: dict[str, float] = {}  # node id -> when its host was lost

    def add(self, node_id: str) -> None:
        """A host on ``node_id`` was lost with its node."""
        now = time.monotonic()
        self._when = {n: t for n, t in self._when.items() if now - t < self._ttl}
        self._when[node_id] = now

    def recent(self, node_id: str) -> bool:
        """Whether ``node_id`` lost a host within the time to live."""
        when = self._when.get(node_id)
        return when is not None and time.monotonic() - when < self._ttl

    def ever(self, node_id: str) -> bool:
        """Whether ``node_id`` is still remembered (lost once, maybe longer ago)."""
        return node_id in self._when


def _node_lost(exc: BaseException) -> bool:
    """Whether a host actor's error means its node went (unreachable, died or drained as a
    preemption), not just its process."""
    from ray import exceptions as rx

    gone = isinstance(exc, rx.ActorUnavailableError | rx.NodeDiedError)
    return gone or bool(getattr(exc, "preempted", False))


def _slices(topology: TpuTopology) -> dict[str, dict[int, list[dict[str, Any]]]]:
    """The live nodes of every slice of ``topology``'s type: slice -> worker id -> nodes."""
    found: dict[str, dict[int, list[dict[str, Any]]]] = {}
    for node in ray.nodes():
        labels = node.get("Labels") or {}
        name, pod_type = labels.get(_SLICE_LABEL), labels.get(_POD_TYPE_LABEL)
        if not node.get("Alive") or not name or not pod_type:
            continue
        try:
            if canonical_tpu_name(pod_type) != topology.name:
                continue
            worker = int(labels.get(_WORKER_LABEL, ""))
        except ValueError:
            continue
        found.setdefault(name, {}).setdefault(worker, []).append(node)
    return found


def describe_slices(topology: TpuTopology) -> str:
    """What the cluster has of a TPU type, for pending reasons and scheduling errors."""
    slices = _slices(topology)
    if not slices:
        return f"the cluster has no {topology.name} slice (no live node labelled as one)"
    vms = topology.vm_count
    parts = [
        f"{name} ({len(hosts)}/{vms} VMs alive, "
        f"{'complete' if sorted(hosts) == list(range(vms)) else 'incomplete'})"
        for name, hosts in sorted(slices.items())
    ]
    complete = sum(sorted(hosts) == list(range(vms)) for hosts in slices.values())
    return f"the cluster has {complete} complete {topology.name} slice(s): " + ", ".join(parts)


class Attempt:
    """One attempt of a gang job; its methods run on the client's event thread (Ray's
    callbacks are handed there) unless said otherwise."""

    def __init__(self, gang: GangJob, job: JobRecord, number: int, lost: LostNodes) -> None:
        self.gang = gang
        self.job = job
        self.number = number
        self.lost = lost
        self.token = secrets.token_hex(8)
        self.state = AttemptState.CLAIMING
        self.want = 0
        self.groups: list[PlacementGroup] = []  # asked for, and not let go
        self.placed: set[PlacementGroup] = set()  # placed by Ray (its ready() resolved)
        self.ready: list[tuple[PlacementGroup, str, list[dict[str, Any]]]] = []  # complete
        self.held: list[tuple[PlacementGroup, str]] = []  # incomplete slices held meanwhile
        self.hosts: list[tuple[str, int, str, Any]] = []  # slice, worker, node id, actor
        self.results: dict[int, Any] = {}

    # -- claiming ----------------------------------------------------------------------------

    def claim(self) -> None:
        """Asks Ray for the slices: the largest allowed count the free slices allow now,
        else the smallest (it waits for them)."""
        spec = self.gang.spec
        head = f"TPU-{spec.topology.name}-head"
        free = int(ray.available_resources().get(head, 0))
        fits = [n for n in spec.allowed if n <= free]
        self.want = max(fits) if fits else min(spec.allowed)
        for _ in range(self.want):
            self._new_group()

    def _new_group(self) -> None:
        head = f"TPU-{self.gang.spec.topology.name}-head"
        group = placement_group([{head: 1}])
        self.groups.append(group)
        self._when_done(group.ready(), self._group_ready, group)

    def _group_ready(self, group: PlacementGroup, future: Any) -> None:
        if future.exception() is not None:  # Ray is shutting down
            return
        self.placed.add(group)
        if group not in self.groups or self.is_over:  # let go before it was placed
            self._release(group)
            return
        if self.state is not AttemptState.CLAIMING:
            return
        try:
            node_id = placement_group_table(group)["bundles_to_node_id"][0]
        except Exception:  # its table is gone: the attempt's end handles it
            return
        node = next((n for n in ray.nodes() if n["NodeID"] == node_id), {})
        name = (node.get("Labels") or {}).get(_SLICE_LABEL, "")
        if not self._take(group, name):
            self.held.append((group, name))
            self._new_group()  # held meanwhile, so this one lands on another slice
            self.later(_RECHECK_S, self._recheck)

    def _take(self, group: PlacementGroup, name: str) -> bool:
        """Takes slice ``name`` (held by ``group``) if every one of its hosts is alive;
        launches once enough are."""
        hosts = self._hosts_of(name)
        if hosts is None:
            return False
        self.ready.append((group, name, hosts))
        if len(self.ready) == self.want:
            self._launch()
        return True

    def _hosts_of(self, name: str) -> list[dict[str, Any]] | None:
        """The node of each worker of slice ``name``, or ``None`` while one has none alive
        that this process has not lost a host on in the last minute. A node lost before is
        taken only if no other node claims its worker id."""
        workers = _slices(self.gang.spec.topology).get(name, {})
        lost = self.lost
        hosts = []
        for worker in range(self.gang.spec.topology.vm_count):
            nodes = [n for n in workers.get(worker, []) if not lost.recent(n["NodeID"])]
            if not nodes:
                return None
            hosts.append(min(nodes, key=lambda n: lost.ever(n["NodeID"])))
        return hosts

    def _recheck(self) -> None:
        for entry in list(self.held):
            if self.state is not AttemptState.CLAIMING or len(self.ready) >= self.want:
                return
            self.held.remove(entry)
            if not self._take(*entry):
                self.held.append(entry)
        if self.state is AttemptState.CLAIMING and self.held:
            self.later(_RECHECK_S, self._recheck)

    # -- running -----------------------------------------------------------------------------

    def _launch(self) -> None:
        """Every slice is claimed: the attempt is placed; one host actor per VM runs it."""
        self.ready.sort(key=lambda claimed: claimed[1])  # slice ids follow the slices' names
        used = [group for group, _name, _hosts in self.ready]
        extra = [group for group in self.groups if group not in used]
        self.groups, self.held = used, []
        for group in extra:  # slices held meanwhile
            self._release(group)
        if not self.job.placed():  # stopped meanwhile
            return
        self.state = AttemptState.RUNNING
        spec, gang = self.gang.spec, self.gang
        vms = spec.topology.vm_count
        placement = [
            {
                "slice": name,
                "worker": w,
                "node_id": node["NodeID"],
                "ip": node["NodeManagerAddress"],
            }
            for _group, name, hosts in self.ready
            for w, node in enumerate(hosts)
        ]
        gang.launched_on(placement, self.job.attempts)
        names = ", ".join(name for _group, name, _hosts in self.ready)
        self.job.log.write(f"[fray-tpu] attempt {self.job.attempts} on {names}\n")
        coordinator, total = placement[0]["ip"], len(placement)
        resources = {"TPU": float(spec.topology.chips_per_vm), **spec.resources}
        for index, where in enumerate(placement):
            options: dict[str, Any] = {
                "num_cpus": spec.num_cpus,
                "num_gpus": 0,
                "resources": resources,
                "scheduling_strategy": NodeAffinitySchedulingStrategy(where["node_id"], soft=False),
                "runtime_env": spec.runtime_env or None,
            }
            if spec.memory:
                options["memory"] = spec.memory
            actor: Any = TpuHost.options(**options).remote(
                where["slice"], where["worker"], spec.settings, gang.hub, self.token, spec.health_s
            )
            env = {**spec.env_vars, **multislice_env(coordinator, len(self.ready), index // vms)}
            env.update(
                FRAY_JOB_ID=self.job.job_id, FRAY_TASK_INDEX=str(index), FRAY_NUM_TASKS=str(total)
            )
            label = f"{spec.name}-{where['slice']}-w{where['worker']}"
            ref = actor.run.remote(spec.payload, env=env, label=label)
            self.hosts.append((where["slice"], where["worker"], where["node_id"], actor))
            self._when_done(ref, self._host_done, index)
        self.later(_RECHECK_S, self._ask_hub)

    @property
    def is_over(self) -> bool:
        """Whether the attempt has been torn down."""
        return self.state is AttemptState.ENDED

    def run(self, fn: Callable[..., None], *args: Any) -> None:
        """Runs ``fn(*args)`` (on the event thread); a bug there ends the attempt as failed
        instead of leaving it waiting."""
        try:
            fn(*args)
        except Exception as exc:
            logger.exception("the TPU gang of %s failed", self.job.job_id)
            self.end(Outcome.failed(exc, f"internal error in fray_tpu's gang: {exc!r}"))

    def _when_done(self, ref: Any, then: Callable[..., None], *args: Any) -> None:
        """Runs ``then(*args, future)`` on the event thread once ``ref`` has ended (its
        future's callback runs on Ray's thread and only hands it over)."""
        soon = self.gang.client._call_soon
        ref.future().add_done_callback(lambda future: soon(self.run, then, *args, future))

    def later(self, delay: float, fn: Callable[..., None], *args: Any) -> None:
        """Runs ``fn(*args)`` on the event thread in ``delay`` seconds (from any thread)."""
        client = self.gang.client
        client._call_later(delay, client._call_soon, self.run, fn, *args)

    def _host_done(self, index: int, future: Any) -> None:
        if self.state is not AttemptState.RUNNING:
            return
        slice_name, worker, node_id, actor = self.hosts[index]
        try:
            self.results[index] = future.result()
        except Exception as exc:
            reading = read_ray_error(exc)
            error = f"host {slice_name}/{worker}: {reading.error}"
            if reading.kind == "preemption":
                if _node_lost(exc):
                    self.lost.add(node_id)
                self.end(Outcome.preempted(error))
                return
            cause = reading.cause
            code = cause.code if isinstance(cause, CommandFailedError | ExitCalledError) else None
            failed = Outcome.failed(cause, error, code if isinstance(code, int) else None)
            if cause is None:  # Ray's own (a runtime env that cannot be built): no VM to ask
                self.end(failed)
            else:
                self._ask_health(actor, f"host {slice_name}/{worker}", failed)
            return
        if len(self.results) == len(self.hosts):
            self.end(Outcome.succeeded([self.results[i] for i in range(len(self.hosts))]))

    def _ask_health(self, actor: Any, where: str, failed: Outcome) -> None:
        """A failure on a VM that is being preempted is a preemption: asks the host (its
        ``run`` is over), then what the other hosts told the hub, and counts a failure if
        neither says so in time."""
        answered = threading.Event()

        def preempted(reason: str) -> None:
            self.end(Outcome.preempted(f"{failed.error} ({reason}: the VM is being preempted)"))

        def from_hub(future: Any | None) -> None:
            if answered.is_set():
                return
            answered.set()
            try:
                reported = future is not None and future.result()
            except Exception:
                reported = None
            if reported:
                preempted(reported)
            else:
                self.end(failed)

        def from_host(future: Any) -> None:
            try:
                says = bool(future.result().get("preempted"))
            except Exception:  # gone meanwhile: a lost VM
                says = True
            if says:
                answered.set()
                preempted(where)
            else:
                self._when_done(self.gang.hub.peek.remote(self.token), from_hub)

        self._when_done(actor.health.remote(), from_host)
        self.later(_HEALTH_WAIT_S, from_hub, None)

    def _ask_hub(self) -> None:
        """Every second while the attempt runs: has a host said its VM is preempted?"""
        if self.state is AttemptState.RUNNING:
            self._when_done(self.gang.hub.peek.remote(self.token), self._preempted)

    def _preempted(self, future: Any) -> None:
        if future.exception() is not None or self.state is not AttemptState.RUNNING:
            return  # the job is ending
        where = future.result()
        if where:
            self.end(Outcome.preempted(f"{where}: the GCE metadata server says it is preempted"))
        else:
            self.later(_RECHECK_S, self._ask_hub)

    # -- the end -----------------------------------------------------------------------------

    def end(self, outcome: Outcome) -> None:
        """Tears the gang down and reports ``outcome`` (once), with its hosts' last lines."""
        if self.state is AttemptState.ENDED:
            return
        ran = self.state is AttemptState.RUNNING
        self.teardown()
        if ran:
            self.gang.read_lines(self.job)
        self.job.report(outcome)

    def teardown(self) -> None:
        """Kills every host actor (and the user's code in it) and lets the slices go."""
        self.state = AttemptState.ENDED
        for _slice, _worker, _node, actor in self.hosts:
            with contextlib.suppress(Exception):
                ray.kill(actor, no_restart=True)
        for group in self.groups:
            self._release(group)

    def _release(self, group: PlacementGroup) -> None:
        """Removes ``group`` if Ray has placed it; else :meth:`_group_ready` will."""
        if group in self.placed:
            with contextlib.suppress(Exception):
                remove_placement_group(group)

    def waiting_for(self) -> str | None:
        """While slices are being claimed: what it asked for and what the cluster has (the
        caller's thread: it reads a few fields)."""
        if self.state is not AttemptState.CLAIMING:
            return None
        topology = self.gang.spec.topology
        return (
            f"asked for {self.want} slice(s) of {topology.name} ({topology.vm_count} VM(s) x "
            f"{topology.chips_per_vm} chips each, resource TPU-{topology.name}-head per slice; "
            f"{len(self.ready)} claimed so far); {describe_slices(topology)}"
        )
