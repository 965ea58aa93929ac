"""The seam for backend authors: what every Fray backend shares, written once.

A backend is a :class:`BaseClient` subclass that writes a few hooks; the engine in it does
the rest (checks, ids, history, the attempt loop and both retry budgets, deadlines,
terminate, shutdown)::

    BaseClient         submit (final) → _prepare → _launch → the attempt loop, which calls
                       the hooks _start_attempt and _cancel_attempt; _create_actor_group,
                       _shutdown; where state is learnt by asking, _refresh; where output
                       or values live elsewhere, _lines, _result, _info
    JobRecord, Outcome, Phase
                       a job's state machine: the backend calls placed() and report(Outcome)
    BaseJobHandle      the one job handle (wait, result, logs, info, terminate, callbacks)
    ActorMember, BaseActorGroup
                       an actor group over its members' states
    Capabilities, capabilities_of, resource_limit
                       what each backend refuses in a request, one table per backend
    LogBuffer, PrefixedSink, capture_into
                       whole-line output buffers and the per-thread stdout/stderr router
    binding            what current_client() / current_actor() / current_job_id() answer
                       inside user code a backend runs
    HostedActorHandle, ShutdownEvent, restart_allowed
                       hosted actors' handle; an actor's shutdown_event; its restart policy
    ClientSpec, parse_client_spec, client_from_spec, register_backend, isolated_backends
                       specs and the registry of backends

Backends import only public names of fray-core: this module, ``fray``, ``fray.errors``,
``fray.environment_variables`` and ``fray.topology``. The conformance suite in
``fray_testing.conformance`` is the contract; see docs/writing-a-backend.md.
"""

from __future__ import annotations

from fray._actor import ShutdownEvent, restart_allowed
from fray._client import (
    ClientSpec,
    client_from_spec,
    isolated_backends,
    parse_client_spec,
    register_backend,
)
from fray.backend._binding import binding
from fray.backend._capabilities import Capabilities, capabilities_of, resource_limit
from fray.backend._client import BaseClient
from fray.backend._group import ActorMember, BaseActorGroup
from fray.backend._handle import BaseJobHandle
from fray.backend._hosted_handle import HostedActorHandle
from fray.backend._output import PrefixedSink, capture_into
from fray.backend._record import JobRecord, LogBuffer, Outcome, Phase

__all__ = [
    "ActorMember",
    "BaseActorGroup",
    "BaseClient",
    "BaseJobHandle",
    "Capabilities",
    "ClientSpec",
    "HostedActorHandle",
    "JobRecord",
    "LogBuffer",
    "Outcome",
    "Phase",
    "PrefixedSink",
    "ShutdownEvent",
    "binding",
    "capabilities_of",
    "capture_into",
    "client_from_spec",
    "isolated_backends",
    "parse_client_spec",
    "register_backend",
    "resource_limit",
    "restart_allowed",
]
