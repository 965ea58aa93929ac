"""Actors: ``create_actor``, blocking and ``.remote()`` calls, errors, death."""

from __future__ import annotations

import pytest

from fray import ActorConfig, ActorHandle, Client, ResourceConfig
from fray.errors import ActorDiedError, ActorError, InvalidRequestError
from fray_testing.conformance import entrypoints as ep
from fray_testing.conformance._base import ConformanceTests

__all__ = ["ActorTests"]


class ActorTests(ConformanceTests):
    """One actor: state, calls, the method's own exceptions, and calls after shutdown."""

    def test_blocking_call_returns_the_value(self, client: Client) -> None:
        counter = client.create_actor(ep.Counter, name=self.name("counter"))
        assert counter.incr(5) == 5

    def test_state_persists_between_calls(self, client: Client) -> None:
        counter = client.create_actor(ep.Counter, name=self.name("counter"))
        counter.incr(2)
        counter.incr(3)
        assert counter.value() == 5

    def test_constructor_args_and_kwargs_arrive(self, client: Client) -> None:
        counter = client.create_actor(ep.Counter, 10, name=self.name("counter"), step=5)
        assert counter.incr() == 15

    def test_method_kwargs_arrive(self, client: Client) -> None:
        counter = client.create_actor(ep.Counter, name=self.name("counter"))
        assert counter.incr(by=7) == 7

    def test_remote_returns_a_future(self, client: Client) -> None:
        counter = client.create_actor(ep.Counter, name=self.name("counter"))
        future = counter.incr.remote(4)
        assert future.result(timeout=self.timeout) == 4
        assert future.done()

    def test_remote_calls_run_in_call_order(self, client: Client) -> None:
        counter = client.create_actor(ep.Counter, name=self.name("counter"))
        futures = [counter.incr.remote(1) for _ in range(20)]
        assert [f.result(timeout=self.timeout) for f in futures] == list(range(1, 21))

    def test_method_exception_keeps_its_type(self, client: Client) -> None:
        counter = client.create_actor(ep.Counter, name=self.name("counter"))
        with pytest.raises(ep.ConformanceError, match="method failed"):
            counter.fail("method failed")

    def test_remote_exception_keeps_its_type(self, client: Client) -> None:
        counter = client.create_actor(ep.Counter, name=self.name("counter"))
        future = counter.fail.remote("remote failure")
        with pytest.raises(ep.ConformanceError, match="remote failure"):
            future.result(timeout=self.timeout)

    def test_actor_survives_a_method_exception(self, client: Client) -> None:
        counter = client.create_actor(ep.Counter, name=self.name("counter"))
        counter.incr(1)
        with pytest.raises(ep.ConformanceError):
            counter.fail("not fatal")
        assert counter.incr(1) == 2

    def test_constructor_failure_raises_actor_error_with_cause(self, client: Client) -> None:
        with pytest.raises(ActorError) as caught:
            client.create_actor(ep.FailingInit, "cannot start", name=self.name("broken"))
        assert isinstance(caught.value.__cause__, ep.ConformanceError)
        assert "cannot start" in str(caught.value.__cause__)

    def test_handle_satisfies_protocol(self, client: Client) -> None:
        counter = client.create_actor(ep.Counter, name=self.name("counter"))
        assert isinstance(counter, ActorHandle)
        assert isinstance(counter.name, str) and counter.name

    def test_private_attributes_are_not_methods(self, client: Client) -> None:
        counter = client.create_actor(ep.Counter, name=self.name("counter"))
        with pytest.raises(AttributeError):
            counter._private  # noqa: B018 - the attribute access is the test

    def test_actor_calls_another_actor(self, client: Client) -> None:
        first = client.create_actor(ep.Counter, name=self.name("first"))
        second = client.create_actor(ep.Counter, 100, name=self.name("second"))
        assert first.call(second, "incr", 1) == 101
        assert second.value() == 101

    def test_resources_and_actor_config_are_accepted(self, client: Client) -> None:
        counter = client.create_actor(
            ep.Counter,
            name=self.name("configured"),
            resources=ResourceConfig(cpu=0.5, ram="256m", preemptible=False),
            actor_config=ActorConfig(max_concurrency=2, max_restarts=0),
        )
        assert counter.incr(1) == 1

    def test_call_after_shutdown_raises_actor_died(self, client: Client) -> None:
        counter = client.create_actor(ep.Counter, name=self.name("counter"))
        counter.incr(1)
        client.shutdown()
        with pytest.raises(ActorDiedError):
            counter.incr(1)

    def test_first_call_after_shutdown_raises_actor_died(self, client: Client) -> None:
        counter = client.create_actor(ep.Counter, name=self.name("counter"))
        client.shutdown()
        with pytest.raises(ActorDiedError):
            counter.incr(1)

    def test_remote_call_after_shutdown_raises_actor_died(self, client: Client) -> None:
        counter = client.create_actor(ep.Counter, name=self.name("counter"))
        counter.incr(1)
        client.shutdown()
        with pytest.raises(ActorDiedError):
            counter.incr.remote(1).result(timeout=self.timeout)

    def test_system_exit_in_a_method_ends_the_actor(self, client: Client) -> None:
        counter = client.create_actor(ep.Counter, name=self.name("quitter"))
        counter.incr(1)
        with pytest.raises(ActorDiedError):
            counter.exit(3)
        with pytest.raises(ActorDiedError):
            counter.incr(1)

    def test_create_actor_rejects_a_non_class(self, client: Client) -> None:
        with pytest.raises(InvalidRequestError) as caught:
            client.create_actor(ep.add, name=self.name("function"))  # pyright: ignore[reportArgumentType]
        assert caught.value.field == "actor_class"
