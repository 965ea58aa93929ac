"""Handle pickling: actor handles travel by pickle and keep working."""

from __future__ import annotations

import pickle

import cloudpickle  # pyright: ignore[reportMissingTypeStubs]
import pytest

from fray import Client
from fray.errors import ActorDiedError
from fray_testing.conformance import entrypoints as ep
from fray_testing.conformance._base import ConformanceTests

__all__ = ["PicklingTests"]


class PicklingTests(ConformanceTests):
    """Actor handles pickle with ``pickle`` and ``cloudpickle``, and can be job arguments."""

    def test_handle_survives_pickle(self, client: Client) -> None:
        counter = client.create_actor(ep.Counter, name=self.name("counter"))
        counter.incr(1)
        copy = pickle.loads(pickle.dumps(counter))
        assert copy.incr(1) == 2
        assert counter.value() == 2

    def test_handle_survives_cloudpickle(self, client: Client) -> None:
        counter = client.create_actor(ep.Counter, name=self.name("counter"))
        copy = cloudpickle.loads(cloudpickle.dumps(counter))
        assert copy.incr(3) == 3
        assert counter.value() == 3

    def test_unpickled_handle_keeps_the_name(self, client: Client) -> None:
        counter = client.create_actor(ep.Counter, name=self.name("counter"))
        assert pickle.loads(pickle.dumps(counter)).name == counter.name

    def test_group_handles_pickle(self, client: Client) -> None:
        group = client.create_actor_group(ep.Counter, name=self.name("workers"), count=2)
        handles = group.wait_ready(timeout=self.timeout)
        copies = pickle.loads(pickle.dumps(handles))
        assert [h.incr(1) for h in copies] == [1, 1]
        assert [h.value() for h in handles] == [1, 1]

    def test_remote_call_on_unpickled_handle(self, client: Client) -> None:
        counter = client.create_actor(ep.Counter, name=self.name("counter"))
        copy = pickle.loads(pickle.dumps(counter))
        assert copy.incr.remote(6).result(timeout=self.timeout) == 6

    def test_handle_passed_to_a_job(self, client: Client) -> None:
        self.require("runs_user_code")
        counter = client.create_actor(ep.Counter, name=self.name("counter"))
        job = client.submit(self.request(ep.call_actor, counter, "incr", 5))
        assert job.result(timeout=self.timeout) == 5
        assert counter.value() == 5

    def test_handle_passed_to_another_actor(self, client: Client) -> None:
        target = client.create_actor(ep.Counter, name=self.name("target"))
        caller = client.create_actor(ep.Counter, name=self.name("caller"))
        assert caller.call(target, "incr", 2) == 2
        assert target.value() == 2

    def test_handle_unpickled_after_shutdown_raises_actor_died(self, client: Client) -> None:
        counter = client.create_actor(ep.Counter, name=self.name("counter"))
        data = pickle.dumps(counter)
        client.shutdown()
        with pytest.raises(ActorDiedError):
            pickle.loads(data).incr(1)
