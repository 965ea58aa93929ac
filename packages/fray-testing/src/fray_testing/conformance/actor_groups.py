"""Actor groups: ``create_actor_group``, ``wait_ready``, ``discover_new``, shutdown."""

from __future__ import annotations

import pytest

from fray import ActorGroup, Client, JobStatus
from fray.errors import ActorDiedError, ActorError, InvalidRequestError
from fray_testing.conformance import entrypoints as ep
from fray_testing.conformance._base import ConformanceTests

__all__ = ["ActorGroupTests"]


class ActorGroupTests(ConformanceTests):
    """``count`` actors of one class, created together and handed out as they are ready."""

    def test_group_satisfies_protocol(self, client: Client) -> None:
        group = client.create_actor_group(ep.Counter, name=self.name("workers"), count=2)
        assert isinstance(group, ActorGroup)

    def test_wait_ready_returns_every_actor(self, client: Client) -> None:
        name = self.name("workers")
        group = client.create_actor_group(ep.Counter, name=name, count=3)
        handles = group.wait_ready(timeout=self.timeout)
        assert sorted(h.name for h in handles) == [f"{name}-0", f"{name}-1", f"{name}-2"]
        assert group.ready_count == 3

    def test_wait_ready_for_some_returns_that_many(self, client: Client) -> None:
        group = client.create_actor_group(ep.Counter, name=self.name("workers"), count=3)
        assert len(group.wait_ready(2, timeout=self.timeout)) == 2

    def test_wait_ready_for_more_than_the_group_is_invalid(self, client: Client) -> None:
        group = client.create_actor_group(ep.Counter, name=self.name("workers"), count=2)
        with pytest.raises(InvalidRequestError) as caught:
            group.wait_ready(3, timeout=self.timeout)
        assert caught.value.field is not None and "count" in caught.value.field

    def test_statuses_are_running_once_ready(self, client: Client) -> None:
        group = client.create_actor_group(ep.Counter, name=self.name("workers"), count=2)
        group.wait_ready(timeout=self.timeout)
        assert group.statuses() == [JobStatus.RUNNING, JobStatus.RUNNING]
        assert not group.is_done()

    def test_actors_are_separate_instances(self, client: Client) -> None:
        group = client.create_actor_group(ep.Counter, name=self.name("workers"), count=2)
        first, second = group.wait_ready(timeout=self.timeout)
        first.incr(10)
        assert second.value() == 0
        assert first.value() == 10

    def test_constructor_args_reach_every_actor(self, client: Client) -> None:
        group = client.create_actor_group(ep.Counter, 7, name=self.name("workers"), count=2, step=3)
        assert [h.incr() for h in group.wait_ready(timeout=self.timeout)] == [10, 10]

    def test_each_actor_knows_its_index(self, client: Client) -> None:
        name = self.name("workers")
        group = client.create_actor_group(ep.Counter, name=name, count=3)
        identities = sorted(h.identity() for h in group.wait_ready(timeout=self.timeout))
        assert identities == [(name, 0), (name, 1), (name, 2)]

    def test_discover_new_returns_each_actor_once(self, client: Client) -> None:
        group = client.create_actor_group(ep.Counter, name=self.name("workers"), count=3)
        first = group.wait_ready(1, timeout=self.timeout)
        self.eventually(lambda: group.ready_count == 3, "every actor to be ready")
        rest = group.discover_new()
        assert len(rest) == 2
        assert {h.name for h in rest}.isdisjoint(h.name for h in first)
        assert group.discover_new() == []

    def test_shutdown_stops_every_actor(self, client: Client) -> None:
        group = client.create_actor_group(ep.Counter, name=self.name("workers"), count=2)
        group.wait_ready(timeout=self.timeout)
        group.shutdown()
        assert group.is_done()
        assert all(status.is_finished for status in group.statuses())

    def test_calls_after_group_shutdown_raise_actor_died(self, client: Client) -> None:
        group = client.create_actor_group(ep.Counter, name=self.name("workers"), count=2)
        handles = group.wait_ready(timeout=self.timeout)
        group.shutdown()
        for handle in handles:
            with pytest.raises(ActorDiedError):
                handle.incr(1)

    def test_failed_constructor_shows_in_statuses(self, client: Client) -> None:
        group = client.create_actor_group(ep.FailOnIndex, 1, name=self.name("mixed"), count=3)
        ready = group.wait_ready(2, timeout=self.timeout)
        assert [h.ping() for h in ready] == ["pong", "pong"]
        self.eventually(lambda: group.statuses()[1] is JobStatus.FAILED, "actor 1 to fail")
        assert group.statuses()[0] is JobStatus.RUNNING

    def test_wait_ready_for_all_raises_when_one_cannot_start(self, client: Client) -> None:
        group = client.create_actor_group(ep.FailOnIndex, 0, name=self.name("mixed"), count=2)
        with pytest.raises(ActorError) as caught:
            group.wait_ready(timeout=self.timeout)
        assert isinstance(caught.value.__cause__, ep.ConformanceError)

    def test_create_actor_group_rejects_a_bad_count(self, client: Client) -> None:
        with pytest.raises(InvalidRequestError) as caught:
            client.create_actor_group(ep.Counter, name=self.name("none"), count=0)
        assert caught.value.field == "count"
