"""Hosted actors (``client.host_actor``), long-running calls (``method.submit``) and an
actor's own ending (``current_actor().shutdown_event`` and ``fail``)."""

from __future__ import annotations

import time
from typing import Any

import pytest

from fray import ActorConfig, ActorGroup, Client, Entrypoint, HostedActor, JobRequest, JobStatus
from fray.errors import ActorDiedError, ActorError, ActorUnavailableError, JobTimeoutError
from fray_testing.conformance import entrypoints as ep
from fray_testing.conformance._base import ConformanceTests

__all__ = ["ActorLifecycleTests", "HostedActorTests", "host_in_job"]


def _call_or_none(handle: Any, method: str, *args: Any) -> Any:
    """The call's value, or ``None`` while the actor restarts (``ActorUnavailableError``);
    an ``ActorDiedError`` (gone for good) is raised."""
    try:
        return getattr(handle, method)(*args)
    except ActorUnavailableError:
        return None


def host_in_job(
    client: Client, actor_class: type[Any], *args: Any, name: str, timeout: float, **kwargs: Any
) -> HostedActor:
    """``host_actor`` run inside a job of ``client``'s backend, for a backend that hosts
    actors only there (Iris): the job (:func:`entrypoints.serve_hosted`) hosts the actor
    and passes its handle back through a :class:`entrypoints.Mailbox` actor. The returned
    ``HostedActor``'s ``shutdown()`` tells the job to shut the actor down and waits for the
    job to end.

    Raises:
        ActorError: The job's ``host_actor`` raised it (its ``__cause__`` restored).
        AssertionError: The job ended, or ``timeout`` passed, without an outcome.
    """
    group = client.create_actor_group(
        ep.Mailbox, name=f"{name}-mailbox", count=1, actor_config=ActorConfig(max_concurrency=4)
    )
    job = None
    try:
        (mailbox,) = group.wait_ready(timeout=timeout)
        job = client.submit(
            JobRequest(
                name=f"{name}-host",
                entrypoint=Entrypoint.from_callable(
                    ep.serve_hosted, (mailbox, actor_class, args, kwargs, name)
                ),
            )
        )
        deadline = time.monotonic() + timeout
        outcome = None
        while outcome is None:
            outcome = mailbox.outcome(1.0)
            if outcome is None and (job.status().is_finished or time.monotonic() > deadline):
                job.wait(timeout=timeout, raise_on_failure=True)
                raise AssertionError(f"the job hosting {name} gave no outcome ({job.info()})")
    except BaseException:
        if job is not None:
            job.terminate()
        group.shutdown()
        raise
    if outcome[0] == "error":
        job.wait(timeout=timeout, raise_on_failure=False)
        group.shutdown()
        error: BaseException = outcome[1]
        raise error from outcome[2]

    def stop() -> None:
        try:
            mailbox.stop()
            job.wait(timeout=timeout)
        finally:
            group.shutdown()

    return HostedActor(outcome[1], stop)


class HostedActorTests(ConformanceTests):
    """An actor served from the calling process, reachable through a picklable handle.

    Every test hosts its actor through :meth:`host_actor`: ``client.host_actor`` called by
    the test itself. A backend that hosts actors only inside its jobs (Iris) overrides that
    one method, e.g. with :func:`host_in_job`; the tests stay the same.
    """

    def host_actor(
        self, client: Client, actor_class: type[Any], *args: Any, name: str, **kwargs: Any
    ) -> HostedActor:
        """``client.host_actor(actor_class, *args, name=name, **kwargs)`` where this backend
        hosts actors (here: the test's own process)."""
        return client.host_actor(actor_class, *args, name=name, **kwargs)

    def host(self, client: Client, cls: type[Any] = ep.Counter, **kwargs: Any) -> HostedActor:
        return self.host_actor(client, cls, name=self.name("hosted"), **kwargs)

    def test_hosted_actor_serves_calls(self, client: Client) -> None:
        hosted = self.host(client)
        try:
            assert hosted.handle.incr(2) == 2
            assert hosted.handle.incr.remote(3).result(timeout=self.timeout) == 5
        finally:
            hosted.shutdown()

    def test_hosted_actor_is_index_0_of_a_group_named_after_it(self, client: Client) -> None:
        name = self.name("hosted")
        hosted = self.host_actor(client, ep.Counter, name=name)
        try:
            assert tuple(hosted.handle.identity()) == (name, 0)
        finally:
            hosted.shutdown()

    def test_hosted_handle_works_from_a_job(self, client: Client) -> None:
        hosted = self.host(client)
        try:
            job = client.submit(self.request(ep.call_actor, hosted.handle, "incr", 4))
            assert job.result(timeout=self.timeout) == 4
            assert hosted.handle.value() == 4
        finally:
            hosted.shutdown()

    def test_hosted_handle_works_from_an_actor(self, client: Client) -> None:
        hosted = self.host(client)
        try:
            caller = client.create_actor(ep.Counter, name=self.name("caller"))
            assert caller.call(hosted.handle, "incr", 6) == 6
        finally:
            hosted.shutdown()

    def test_method_exception_keeps_its_type(self, client: Client) -> None:
        hosted = self.host(client)
        try:
            with pytest.raises(ep.ConformanceError, match="hosted failure"):
                hosted.handle.fail("hosted failure")
        finally:
            hosted.shutdown()

    def test_calls_after_shutdown_raise_actor_error(self, client: Client) -> None:
        hosted = self.host(client)
        handle = hosted.handle
        handle.incr(1)
        hosted.shutdown()
        hosted.shutdown()  # twice is fine
        with pytest.raises(ActorError):
            handle.incr(1)

    def test_constructor_failure_raises_actor_error_with_cause(self, client: Client) -> None:
        with pytest.raises(ActorError) as caught:
            self.host_actor(client, ep.FailingInit, "hosted cannot start", name=self.name("broken"))
        assert isinstance(caught.value.__cause__, ep.ConformanceError)

    def test_shutdown_event_stops_serving(self, client: Client) -> None:
        hosted = self.host(client, ep.Ender)
        try:
            assert hosted.handle.end() == "ending"

            def stopped() -> bool:
                try:
                    hosted.handle.incr()
                except ActorError:
                    return True
                return False

            self.eventually(stopped, "the hosted actor to stop serving once it set its event")
        finally:
            hosted.shutdown()

    def test_submit_returns_the_value(self, client: Client) -> None:
        hosted = self.host(client, ep.Ender)
        try:
            assert hosted.handle.slow_echo.submit("done", 0.05).result(timeout=self.timeout) == (
                "done"
            )
        finally:
            hosted.shutdown()

    def test_submit_keeps_the_method_exception(self, client: Client) -> None:
        hosted = self.host(client)
        try:
            with pytest.raises(ep.ConformanceError, match="submitted failure"):
                hosted.handle.fail.submit("submitted failure").result(timeout=self.timeout)
        finally:
            hosted.shutdown()

    def test_submit_result_timeout_raises_job_timeout(self, client: Client) -> None:
        self.require("runs_jobs_concurrently")
        hosted = self.host(client, ep.Ender, actor_config=ActorConfig(max_concurrency=2))
        try:
            with pytest.raises(JobTimeoutError):
                hosted.handle.slow_echo.submit("late", 5.0).result(timeout=0.2)
        finally:
            hosted.shutdown()


class ActorLifecycleTests(ConformanceTests):
    """A group actor ends itself: cleanly through its ``shutdown_event``, or as failed
    through ``fail(exc)``, restarted while ``max_restarts`` allows."""

    def group(self, client: Client, count: int, **config: Any) -> ActorGroup:
        return client.create_actor_group(
            ep.Ender, name=self.name("enders"), count=count, actor_config=ActorConfig(**config)
        )

    def test_every_actor_has_a_shutdown_event(self, client: Client) -> None:
        (actor,) = self.group(client, 1).wait_ready(timeout=self.timeout)
        assert actor.end() == "ending"

    def test_shutdown_event_ends_the_actor_as_succeeded(self, client: Client) -> None:
        group = self.group(client, 2)
        first, _ = group.wait_ready(timeout=self.timeout)
        first.end()
        self.eventually(
            lambda: group.statuses() == [JobStatus.SUCCEEDED, JobStatus.RUNNING],
            "the actor that set its shutdown_event to be SUCCEEDED, the other RUNNING",
        )
        assert not group.is_done()
        if self.capabilities.ended_actors_refuse_calls:
            with pytest.raises(ActorError):
                first.incr()
        else:  # the instance lives until the group is shut down
            assert first.incr(2) == 2
            group.shutdown()
            with pytest.raises(ActorDiedError):
                first.incr()

    def test_group_is_done_once_every_actor_ended(self, client: Client) -> None:
        group = self.group(client, 2)
        for actor in group.wait_ready(timeout=self.timeout):
            actor.end()
        self.eventually(group.is_done, "the group to be done once both actors ended")

    def test_wait_ready_after_every_actor_ended_returns_none_of_them(self, client: Client) -> None:
        """Actors that ended cleanly are no longer waited for: ``wait_ready()`` answers the
        ready ones (none), without raising, as a pipeline's teardown expects."""
        group = self.group(client, 2)
        for actor in group.wait_ready(timeout=self.timeout):
            actor.end()
        self.eventually(group.is_done, "the group to be done once both actors ended")
        assert group.wait_ready(timeout=self.timeout) == []
        with pytest.raises(ActorError, match="can become ready"):
            group.wait_ready(count=1, timeout=self.timeout)

    def test_fail_restarts_an_actor_with_restarts_left(self, client: Client) -> None:
        """While it restarts, a call finds it unavailable, never dead; then a fresh instance
        answers, and once no restarts are left it is gone for good."""
        group = self.group(client, 1, max_restarts=1)
        (actor,) = group.wait_ready(timeout=self.timeout)
        assert actor.incr(5) == 5
        actor.fail_with("first failure")
        # A fresh instance answers: its count starts again.
        self.eventually(
            lambda: _call_or_none(actor, "incr", 1) == 1,
            "the actor to come back as a fresh instance after fail()",
        )
        assert group.statuses() == [JobStatus.RUNNING]
        actor.fail_with("second failure")
        self.eventually(lambda: group.statuses() == [JobStatus.FAILED], "the actor to fail")
        with pytest.raises(ActorDiedError):
            actor.incr(1)

    def test_fail_with_no_restarts_left_fails_the_actor(self, client: Client) -> None:
        group = self.group(client, 1, max_restarts=0)
        (actor,) = group.wait_ready(timeout=self.timeout)
        actor.fail_with("final failure")
        self.eventually(
            lambda: group.statuses() == [JobStatus.FAILED],
            "the actor to be FAILED after fail() with no restarts left",
        )
        assert group.is_done()
        with pytest.raises(ActorError):
            actor.incr()

    def test_submit_on_a_group_actor_returns_the_value(self, client: Client) -> None:
        (actor,) = self.group(client, 1).wait_ready(timeout=self.timeout)
        assert actor.incr.submit(3).result(timeout=self.timeout) == 3
