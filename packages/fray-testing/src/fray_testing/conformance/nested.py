"""Nested jobs: a job submitted from inside a job is its child."""

from __future__ import annotations

import pytest

from fray import Client, JobStatus
from fray.errors import JobFailedError
from fray_testing.conformance import entrypoints as ep
from fray_testing.conformance._base import ConformanceTests

__all__ = ["NestedJobTests"]


class NestedJobTests(ConformanceTests):
    """Job trees: ids, parent/children in ``info()``, failures and termination."""

    def test_child_id_is_under_the_parent_id(self, client: Client) -> None:
        self.require("runs_user_code")
        parent = client.submit(self.request(ep.spawn_and_wait, self.name("child"), ep.add, 1, 2))
        child_id, _ = parent.result(timeout=self.timeout)
        assert child_id.startswith(parent.job_id + "/")

    def test_parent_info_lists_its_children(self, client: Client) -> None:
        self.require("runs_user_code")
        parent = client.submit(self.request(ep.spawn_and_wait, self.name("child"), ep.add, 1, 2))
        child_id, _ = parent.result(timeout=self.timeout)
        assert parent.info().children == (child_id,)

    def test_child_info_names_its_parent(self, client: Client) -> None:
        self.require("runs_user_code")
        parent = client.submit(self.request(ep.spawn_and_wait, self.name("child"), ep.add, 1, 2))
        child_id, _ = parent.result(timeout=self.timeout)
        assert client.get_job(child_id).info().parent == parent.job_id

    def test_top_level_job_has_no_parent(self, client: Client) -> None:
        job = client.submit(self.request(ep.add, 1, 1))
        job.wait(timeout=self.timeout)
        assert job.info().parent is None
        assert "/" not in job.job_id

    def test_child_result_reaches_parent_and_driver(self, client: Client) -> None:
        self.require("runs_user_code")
        parent = client.submit(self.request(ep.spawn_and_wait, self.name("child"), ep.add, 4, 5))
        child_id, value = parent.result(timeout=self.timeout)
        assert value == 9
        assert client.get_job(child_id).result(timeout=self.timeout) == 9

    def test_children_are_listed_by_the_client(self, client: Client) -> None:
        self.require("runs_user_code")
        parent = client.submit(self.request(ep.spawn_and_wait, self.name("child"), ep.add, 1, 1))
        child_id, _ = parent.result(timeout=self.timeout)
        assert child_id in [info.job_id for info in client.list_jobs()]

    def test_grandchild_ids_nest(self, client: Client) -> None:
        self.require("runs_user_code")
        top = client.submit(self.request(ep.spawn_chain, 2, self.name("level")))
        child_id, grandchild_id = top.result(timeout=self.timeout)
        assert child_id.startswith(top.job_id + "/")
        assert grandchild_id.startswith(child_id + "/")
        assert client.get_job(grandchild_id).info().parent == child_id

    def test_child_failure_fails_a_waiting_parent(self, client: Client) -> None:
        self.require("runs_user_code")
        parent = client.submit(
            self.request(ep.spawn_and_wait, self.name("child"), ep.raise_value_error, "deep")
        )
        with pytest.raises(JobFailedError) as caught:
            parent.wait(timeout=self.timeout)
        assert caught.value.job_id == parent.job_id
        assert "ValueError" in str(caught.value) and "deep" in str(caught.value)
        [child_id] = parent.info().children
        assert client.get_job(child_id).status() is JobStatus.FAILED

    def test_jobs_inside_a_job_use_the_same_backend(self, client: Client) -> None:
        self.require("runs_user_code")
        job = client.submit(self.request(ep.client_scheme))
        assert job.result(timeout=self.timeout) == client.scheme

    def test_children_stop_when_the_parent_ends(self, client: Client) -> None:
        self.require("runs_user_code")
        parent = client.submit(
            self.request(ep.spawn_and_return, self.name("orphan"), ep.run_until_terminated)
        )
        child_id = parent.result(timeout=self.timeout)
        child = client.get_job(child_id)
        assert child.wait(timeout=self.timeout) is JobStatus.STOPPED

    def test_terminating_a_parent_stops_its_children(self, client: Client) -> None:
        self.require("runs_user_code", "runs_jobs_concurrently")
        parent = client.submit(self.request(ep.spawn_then_block, self.name("child")))
        [child_id] = self.eventually(lambda: parent.info().children, "the child to be submitted")
        child = client.get_job(child_id)
        self.eventually(lambda: child.status() is JobStatus.RUNNING, "the child to start")
        parent.terminate()
        assert child.status() is JobStatus.STOPPED
        assert parent.status() is JobStatus.STOPPED
