"""The seam for backend authors: what every Fray backend shares, written once.

A backend is a :class:`BaseClient` subclass that writes a few hooks (``_start_attempt``,
``_cancel_attempt``, ``_create_actor_group``, ``_shutdown``; where state is learnt by asking,
``_refresh``; where output or values live elsewhere, ``_lines``, ``_result``, ``_info``);
the engine does the rest (checks, ids, history, the attempt loop and both retry budgets,
deadlines, terminate, shutdown). :class:`JobRecord` is a job's state machine (the backend
calls ``placed()`` and ``report(Outcome)``), :class:`BaseJobHandle` the one job handle,
:class:`BaseActorGroup` an actor group over its members' states, :class:`Capabilities` a
backend's refusals, ``capture_into`` the per-thread stdout/stderr router and ``binding``
what ``current_client()`` and ``current_actor()`` answer inside user code, ``masker``
what hides secret env values in a text the engine does not see (an error raised remotely),
:class:`CallFuture` an actor call's future.

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
from fray._secrets import masker
from fray.backend._binding import binding
from fray.backend._capabilities import Capabilities, capabilities_of, resource_limit
from fray.backend._client import BaseClient
from fray.backend._group import ActorMember, BaseActorGroup
from fray.backend._handle import BaseJobHandle
from fray.backend._hosted_handle import HostedActorHandle
from fray.backend._outcome import Observed, Outcome
from fray.backend._output import LogBuffer, PrefixedSink, capture_into
from fray.backend._record import JobRecord, Phase
from fray.backend._wire import CallFuture

__all__ = [
    "ActorMember",
    "BaseActorGroup",
    "BaseClient",
    "BaseJobHandle",
    "CallFuture",
    "Capabilities",
    "ClientSpec",
    "HostedActorHandle",
    "JobRecord",
    "LogBuffer",
    "Observed",
    "Outcome",
    "Phase",
    "PrefixedSink",
    "ShutdownEvent",
    "binding",
    "capabilities_of",
    "capture_into",
    "client_from_spec",
    "isolated_backends",
    "masker",
    "parse_client_spec",
    "register_backend",
    "resource_limit",
    "restart_allowed",
]
