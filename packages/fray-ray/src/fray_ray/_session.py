"""A client's Ray session: the connection to Ray (or the local Ray it started), and Ray's
Jobs API, through which command jobs run and Fray command jobs of any driver are found."""

# pyright: standard
# Ray is untyped: this module is an adapter over it.

from __future__ import annotations

import logging
import os
import threading
from concurrent.futures import Future
from typing import Any

from fray.errors import BackendUnavailableError, InvalidRequestError
from fray_ray._convert import HEAD_NODE_RESOURCE

logger = logging.getLogger("fray.ray")


class _Owner(threading.Thread):
    """The thread that starts (or joins) Ray with ``ray.init(**options)`` and lives until
    ``stopping`` is set, then shuts Ray down: Ray ties the processes it starts to the
    thread that started them, so a short-lived thread that first asked for a client must
    not be the one. ``started`` holds what ``ray.init`` returned or raised."""

    def __init__(self, options: dict[str, Any]) -> None:
        super().__init__(name="fray-ray-owner", daemon=True)
        self.options = options
        self.started: Future[Any] = Future()
        self.stopping = threading.Event()

    def run(self) -> None:
        import ray

        try:
            self.started.set_result(ray.init(**self.options))
        except BaseException as exc:
            self.started.set_exception(exc)
            return
        self.stopping.wait()
        ray.shutdown()


class RaySession:
    """How a client reaches Ray. Without ``connect`` (a client inside a job) it uses the
    worker's connection; otherwise it joins the Ray this process is connected to, else
    connects to ``address``, else ``RAY_ADDRESS``, else starts a local Ray (with the
    dashboard, for command jobs, and a ``head_node`` resource); :meth:`close` ends a
    connection it made (and stops a Ray it started).

    Attributes:
        owns_ray: It started the local Ray it is connected to (that Ray cannot grow).
    """

    def __init__(self, address: str | None, *, echo_logs: bool, connect: bool) -> None:
        import ray

        self.owns_ray = False
        self._owner: _Owner | None = None
        self._dashboard: str | None = None
        self._jobs_api: Any = None
        if not connect:
            return
        if ray.is_initialized():
            if address is not None:
                raise InvalidRequestError.for_field(
                    "address",
                    address,
                    "this process is already connected to Ray; pass no address to use that "
                    "connection (or ray.shutdown() first)",
                )
            return
        address = address or os.environ.get("RAY_ADDRESS") or None
        options: dict[str, Any] = {"address": address, "log_to_driver": echo_logs}
        if address is None:  # a local Ray: the dashboard for command jobs, a head node
            options.update(
                address="local", include_dashboard=True, resources={HEAD_NODE_RESOURCE: 1}
            )
        owner = _Owner(options)
        owner.start()
        try:
            context = owner.started.result()
        except Exception as error:  # Ray raises bare Exceptions for start-up timeouts
            where = f"at {address}" if address else "(starting a local Ray)"
            raise BackendUnavailableError(
                f"cannot connect to Ray {where}: {type(error).__name__}: {error}"
            ) from error
        self._owner = owner
        self.owns_ray = address is None
        self._dashboard = getattr(context, "dashboard_url", None) or None

    def jobs_api(self) -> Any:
        """Ray's ``JobSubmissionClient`` for this cluster (command jobs need the dashboard).

        Raises:
            BackendUnavailableError: The Jobs API is not reachable.
        """
        if self._jobs_api is None:
            import ray
            from ray.job_submission import JobSubmissionClient

            try:
                self._jobs_api = JobSubmissionClient(
                    self._dashboard or ray.get_runtime_context().gcs_address
                )
            except Exception as exc:
                raise BackendUnavailableError(
                    "command jobs on Ray run through Ray's Jobs API, which needs the Ray "
                    f"dashboard; it is not reachable ({type(exc).__name__}: {exc}). Start Ray "
                    "with the dashboard, or run the command from a callable job"
                ) from exc
        return self._jobs_api

    def command_jobs(self) -> list[Any]:
        """The Fray command jobs in the cluster's Jobs API (any driver's), if it is
        reachable (Ray's ``JobDetails``, with ``fray_job_id`` in their metadata)."""
        try:
            return [d for d in self.jobs_api().list_jobs() if (d.metadata or {}).get("fray_job_id")]
        except Exception as exc:
            logger.debug("Ray Jobs API not reachable: %s", exc)
            return []

    def find_command_job(self, job_id: str) -> str | None:
        """The Jobs API submission id of Fray command job ``job_id``, if there is one."""
        found = (
            d.submission_id for d in self.command_jobs() if d.metadata["fray_job_id"] == job_id
        )
        return next(found, None)

    def close(self, forget: Any) -> None:
        """Disconnects this process from Ray where this session connected it (stopping the
        local Ray it started), after ``forget()``: what lives in that connection goes with
        it. A connection the session found made is left as it was."""
        if self._owner is not None:
            forget()
            self._owner.stopping.set()
            self._owner.join(30.0)
