"""The seam for backend authors: what every Fray backend shares, written once.

A backend is a client class plus the few hooks only it can write::

    JobRecord          one job's bookkeeping and state machine: status, attempts, both
                       retry budgets (one set of messages), timestamps, value, callbacks
    BaseJobHandle      wait / result / logs (tails, follow) / info / add_done_callback over
                       the hooks _terminate, _lines and, where state is polled, _refresh
    ActorMember        one actor as its group sees it (handle, status, error)
    InProcessMember    an actor whose instance lives here (local, fake): its context and its
                       own ending (shutdown_event, fail, restarts), over restart and finish
    KeyedHandle        a handle to such an actor: pickles as its registry key, equal by key
    BaseActorGroup     wait_ready / discover_new / statuses / is_done / shutdown over
                       members, with the hook _stop (and _refresh where states are polled)
    BaseClient         context manager, create_actor as a group of one, host_actor (over
                       the hooks _hosting_address and _announce_hosted), _check_open
    host_in_process, HostedActorHandle, ShutdownEvent, restart_allowed, hosted_init_failed
                       hosted actors: an instance in this process behind an authenticated
                       TCP server; its picklable handle (remote, submit); an actor's
                       shutdown_event that ends it; the error of an __init__ that raised
    Capabilities, capabilities_of
                       what each backend refuses in a request, one table per backend: its
                       own check, its README, and FakeClient/LocalClient(target=...)
    JobHistory         the jobs a client answers for (unfinished + the last N finished)
    job_id_part        a job's name as part of its id ('/' escaped: it separates children)
    bind_client, bind_actor, bind_actor_call, binding
                       what current_client() / current_actor() answer inside user code
    LogBuffer, route_output, restore_output, capture_into
                       whole-line output buffers and the per-thread stdout/stderr router
    call_outcome, portable_error, exit_code_of
                       running a job's callable into an outcome that travels

Backends import only public names of fray-core: this module, ``fray``, ``fray.errors``,
``fray.environment_variables`` and ``fray.topology``. The conformance suite in
``fray_testing.conformance`` is the contract; see docs/writing-a-backend.md.
"""

from __future__ import annotations

from fray._actor import ShutdownEvent, restart_allowed
from fray.backend._binding import (
    backend_factories,
    bind_actor,
    bind_actor_call,
    bind_client,
    binding,
    current_actor_context,
    explain_current_client,
    forget_default_client,
    isolated_shared_clients,
    unbind_actor,
    unbind_client,
)
from fray.backend._capabilities import (
    Capabilities,
    Limit,
    capabilities_of,
    known_targets,
    resource_limit,
)
from fray.backend._client import BaseClient, check_request
from fray.backend._group import ActorMember, BaseActorGroup, validate_actor_args
from fray.backend._handle import BaseJobHandle, check_max_lines, check_result
from fray.backend._history import DEFAULT_JOB_HISTORY, JobHistory, job_history_limit
from fray.backend._hosted_handle import HostedActorHandle, HostedActorMethod
from fray.backend._hosting import (
    ActorServer,
    HostedInstance,
    host_in_process,
    hosted_init_failed,
)
from fray.backend._ids import job_id_part, name_of_id_part
from fray.backend._inprocess import InProcessMember
from fray.backend._keyed import KeyedHandle
from fray.backend._output import (
    LineSink,
    LogBuffer,
    PrefixedSink,
    capture_into,
    echo_stream,
    follow_many,
    merge_logs,
    restore_output,
    route_output,
)
from fray.backend._record import JobRecord
from fray.backend._runner import call_outcome, exit_code_of, portable_error
from fray.backend._wire import CallFuture

__all__ = [
    "DEFAULT_JOB_HISTORY",
    "ActorMember",
    "ActorServer",
    "BaseActorGroup",
    "BaseClient",
    "BaseJobHandle",
    "CallFuture",
    "Capabilities",
    "HostedActorHandle",
    "HostedActorMethod",
    "HostedInstance",
    "InProcessMember",
    "JobHistory",
    "JobRecord",
    "KeyedHandle",
    "Limit",
    "LineSink",
    "LogBuffer",
    "PrefixedSink",
    "ShutdownEvent",
    "backend_factories",
    "bind_actor",
    "bind_actor_call",
    "bind_client",
    "binding",
    "call_outcome",
    "capabilities_of",
    "capture_into",
    "check_max_lines",
    "check_request",
    "check_result",
    "current_actor_context",
    "echo_stream",
    "exit_code_of",
    "explain_current_client",
    "follow_many",
    "forget_default_client",
    "host_in_process",
    "hosted_init_failed",
    "isolated_shared_clients",
    "job_history_limit",
    "job_id_part",
    "known_targets",
    "merge_logs",
    "name_of_id_part",
    "portable_error",
    "resource_limit",
    "restart_allowed",
    "restore_output",
    "route_output",
    "unbind_actor",
    "unbind_client",
    "validate_actor_args",
]
