"""A client's Ray session: the connection to Ray (or the local Ray it started), and Ray's
Jobs API, through which command jobs run and Fray command jobs of any driver are found."""

# pyright: standard
# Ray is untyped: this module is an adapter over it.

from __future__ import annotations

import logging
import os
import threading
from typing import Any

from fray.errors import BackendUnavailableError, InvalidRequestError
from fray_ray._convert import HEAD_NODE_RESOURCE

__all__ = ["RaySession"]

logger = logging.getLogger("fray.ray")


class _Owner:
    """The thread that starts (or joins) Ray and lives until the session stops it: Ray ties
    the processes it starts to the thread that started them, so a short-lived thread that
    first asked for a client must not be the one."""

    def __init__(self, init: Any) -> None:
        self._init = init
        self._started = threading.Event()
        self._stop = threading.Event()
        self._shutdown_ray = False
        self.result: Any = None
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="fray-ray-owner", daemon=True)
        self._thread.start()
        self._started.wait()

    def _run(self) -> None:
        try:
            self.result = self._init()
        except BaseException as exc:
            self.error = exc
            return
        finally:
            self._started.set()
        self._stop.wait()
        if self._shutdown_ray:
            import ray

            ray.shutdown()

    def stop(self, *, shutdown_ray: bool, timeout: float = 30.0) -> None:
        """Ends the thread (after ``ray.shutdown()`` where asked); waits up to ``timeout``."""
        self._shutdown_ray = shutdown_ray
        self._stop.set()
        self._thread.join(timeout)


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

        def init() -> Any:
            if address is None:
                return ray.init(
                    address="local",
                    include_dashboard=True,
                    resources={HEAD_NODE_RESOURCE: 1},
                    log_to_driver=echo_logs,
                )
            return ray.init(address=address, log_to_driver=echo_logs)

        owner = _Owner(init)
        if owner.error is not None:  # Ray raises bare Exceptions for start-up timeouts
            where = f"at {address}" if address else "(starting a local Ray)"
            error = owner.error
            raise BackendUnavailableError(
                f"cannot connect to Ray {where}: {type(error).__name__}: {error}"
            ) from error
        self._owner = owner
        self.owns_ray = address is None
        self._dashboard = getattr(owner.result, "dashboard_url", None) or None

    def jobs_api(self) -> Any:
        """Ray's ``JobSubmissionClient`` for this cluster (command jobs need the dashboard).

        Raises:
            BackendUnavailableError: The Jobs API is not reachable.
        """
        if self._jobs_api is None:
            import ray
            from ray.job_submission import JobSubmissionClient

            address = self._dashboard or ray.get_runtime_context().gcs_address
            try:
                self._jobs_api = JobSubmissionClient(address)
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
            jobs = self.jobs_api().list_jobs()
        except Exception as exc:
            logger.debug("Ray Jobs API not reachable: %s", exc)
            return []
        return [d for d in jobs if (d.metadata or {}).get("fray_job_id")]

    def find_command_job(self, job_id: str) -> str | None:
        """The Jobs API submission id of Fray command job ``job_id``, if there is one."""
        for details in self.command_jobs():
            if details.metadata.get("fray_job_id") == job_id:
                return details.submission_id
        return None

    def close(self, forget: Any) -> None:
        """Disconnects this process from Ray where this session connected it (stopping the
        local Ray it started), after ``forget()``: what lives in that connection goes with
        it. A connection the session found made is left as it was."""
        owner = self._owner
        if owner is not None:
            forget()
            owner.stop(shutdown_ray=True)
