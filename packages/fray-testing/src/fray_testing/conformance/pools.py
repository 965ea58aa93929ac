"""Actor pools: ``create_actor_pool``, ``group.pool()``, ``submit``, ``map``, ``broadcast``,
autoscaling, failures and shutdown, on every backend through its actor seam."""

from __future__ import annotations

import concurrent.futures
from pathlib import Path
from typing import Any

import pytest

from fray import ActorConfig, Client, MemberState, PoolState
from fray.errors import ActorDiedError, FrayError, InvalidRequestError
from fray_testing.conformance import entrypoints as ep
from fray_testing.conformance._base import ConformanceTests
from fray_testing.conformance._pool_workers import PoolWorker

__all__ = ["PoolTests"]

_NO_RESTARTS = ActorConfig(max_restarts=0)


class PoolTests(ConformanceTests):
    """Items sent to the members of a pool, which survives members that die."""

    def test_map_returns_results_in_input_order(self, client: Client) -> None:
        with client.create_actor_pool(PoolWorker, name=self.name("pool"), min_workers=2) as pool:
            assert list(pool.map("echo", range(20))) == list(range(20))
            assert sorted(pool.map("echo", range(20), ordered=False)) == list(range(20))
            future = pool.submit("echo", "x")
            concurrent.futures.wait([future], timeout=self.timeout)
            assert future.result() == "x"
        assert pool.status().state is PoolState.STOPPED

    def test_user_error_reaches_the_caller_and_is_not_retried(self, client: Client) -> None:
        with client.create_actor_pool(PoolWorker, name=self.name("pool"), min_workers=2) as pool:
            with pytest.raises(ep.ConformanceError, match="mine"):
                pool.submit("fail", "mine").result(self.timeout)
            status = pool.status()
        assert (status.failed, status.redispatched, status.members_dead) == (1, 0, 0)

    def test_item_whose_member_died_runs_on_another(self, client: Client, tmp_path: Path) -> None:
        name = self.name("pool")
        pool = client.create_actor_pool(
            PoolWorker, name=name, min_workers=2, actor_config=_NO_RESTARTS
        )
        with pool:
            marker = str(tmp_path / "died")
            assert pool.submit("die_once", marker, 7).result(self.timeout) == 7
            assert list(pool.map("echo", range(6))) == list(range(6))
            assert pool.status().redispatched == 1

    def test_poison_item_fails_after_its_cap_and_the_rest_finish(self, client: Client) -> None:
        group = client.create_actor_group(
            PoolWorker, name=self.name("group"), count=3, actor_config=_NO_RESTARTS
        )
        group.wait_ready(timeout=self.timeout)
        with group.pool(max_item_retries=1) as pool:
            with pytest.raises(ActorDiedError, match="max_item_retries=1"):
                pool.submit("die").result(self.timeout)
            assert list(pool.map("echo", range(5))) == list(range(5))
            status = pool.status()
        assert (status.failed, status.redispatched) == (1, 1)
        group.shutdown()

    def test_no_member_left_fails_pending_items(self, client: Client) -> None:
        group = client.create_actor_group(
            PoolWorker, name=self.name("group"), count=1, actor_config=_NO_RESTARTS
        )
        group.wait_ready(timeout=self.timeout)
        pool = group.pool(max_item_retries=0, no_members_timeout=0.5)
        with pytest.raises(ActorDiedError):
            pool.submit("die").result(self.timeout)
        with pytest.raises(ActorDiedError, match="no_members_timeout"):
            pool.submit("echo", 1).result(self.timeout)
        pool.shutdown()
        group.shutdown()

    def test_member_the_backend_restarts_rejoins(self, client: Client, tmp_path: Path) -> None:
        group = client.create_actor_group(
            PoolWorker, name=self.name("group"), count=1, actor_config=ActorConfig(max_restarts=1)
        )
        group.wait_ready(timeout=self.timeout)
        with group.pool(max_item_retries=10) as pool:
            assert pool.submit("restart_once", str(tmp_path / "m")).result(self.timeout)
            assert list(pool.map("echo", range(4))) == list(range(4))
            assert pool.status().members_ready == 1
        group.shutdown()

    def test_broadcast_gives_one_result_per_member(self, client: Client) -> None:
        name = self.name("group")
        group = client.create_actor_group(PoolWorker, name=name, count=3, actor_config=_NO_RESTARTS)
        handles = sorted(group.wait_ready(timeout=self.timeout), key=lambda h: h.name)
        results = group.broadcast("whoami", timeout=self.timeout)
        assert [(r.member, r.result()) for r in results] == [(f"{name}-{i}",) * 2 for i in range(3)]
        with pytest.raises(ActorDiedError):
            handles[1].die()
        results = group.broadcast("echo", 5, timeout=self.timeout)
        assert [r.ok for r in results] == [True, False, True]
        assert isinstance(results[1].error, ActorDiedError)
        group.shutdown()

    def test_pool_grows_while_items_wait_and_shrinks_when_idle(self, client: Client) -> None:
        self.require("runs_jobs_concurrently")  # else each item ends inside submit: none waits
        pool = client.create_actor_pool(
            PoolWorker, name=self.name("pool"), min_workers=1, max_workers=2, idle_timeout=0.5
        )
        with pool:
            futures = [pool.submit("nap", 0.3, i) for i in range(6)]
            self.eventually(lambda: len(pool.status().members) == 2, "a second member")
            assert [f.result(self.timeout) for f in futures] == list(range(6))
            self.eventually(lambda: pool.status().members_ready == 1, "an idle member stopped")
            assert MemberState.STOPPED in dict(pool.status().members).values()

    def test_shutdown_drains_or_cancels(self, client: Client) -> None:
        pool = client.create_actor_pool(PoolWorker, name=self.name("pool"), min_workers=1)
        drained = [pool.submit("echo", i) for i in range(5)]
        pool.shutdown()
        assert [f.result(0) for f in drained] == list(range(5))
        with pytest.raises(FrayError):
            pool.submit("echo", 1)
        assert all(state is MemberState.STOPPED for _, state in pool.status().members)

    def test_bad_arguments_name_the_field(self, client: Client) -> None:
        cases: list[tuple[str, dict[str, Any]]] = [
            ("max_workers", {"min_workers": 3, "max_workers": 2}),
            ("max_item_retries", {"max_item_retries": -1}),
            ("no_members_timeout", {"no_members_timeout": 0}),
            ("name", {"name": "bad name"}),
        ]
        for field, bad in cases:
            arguments: dict[str, Any] = {"name": self.name("pool"), **bad}
            with pytest.raises(InvalidRequestError) as caught:
                client.create_actor_pool(PoolWorker, **arguments)
            assert caught.value.field == field
