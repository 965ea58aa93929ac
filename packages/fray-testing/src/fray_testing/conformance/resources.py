"""Resource validation: bad requests fail at once, naming the field; good ones run."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from fray import (
    Client,
    Entrypoint,
    EnvironmentConfig,
    JobRequest,
    JobStatus,
    ResourceConfig,
)
from fray.backend import Capabilities
from fray.errors import InvalidRequestError
from fray_testing.conformance import entrypoints as ep
from fray_testing.conformance._base import ConformanceTests
from fray_testing.conformance.limits import requests_at_the_limits, resources_at_the_limits

__all__ = ["ResourceValidationTests"]


class ResourceValidationTests(ConformanceTests):
    """Requests are validated when built and when submitted; nothing is silently ignored."""

    def test_submit_rejects_something_that_is_not_a_request(self, client: Client) -> None:
        not_a_request: Any = {"name": "dict", "entrypoint": ep.add}
        with pytest.raises(InvalidRequestError) as caught:
            client.submit(not_a_request)
        assert "request" in str(caught.value)

    def test_bad_job_name_names_the_field(self, client: Client) -> None:
        del client
        with pytest.raises(InvalidRequestError) as caught:
            JobRequest(name="has spaces", entrypoint=Entrypoint.from_callable(ep.add))
        assert caught.value.field == "JobRequest.name"
        assert "has spaces" in str(caught.value)

    def test_unknown_tpu_type_suggests_close_names(self, client: Client) -> None:
        del client
        with pytest.raises(InvalidRequestError) as caught:
            ResourceConfig.with_tpu("v5p-17")
        assert caught.value.field is not None and "variant" in caught.value.field
        assert "v5p-16" in str(caught.value)

    def test_bad_memory_size_names_the_field(self, client: Client) -> None:
        del client
        with pytest.raises(InvalidRequestError) as caught:
            ResourceConfig(ram="lots")
        assert caught.value.field == "ResourceConfig.ram"

    def test_negative_retry_budget_names_the_field(self, client: Client) -> None:
        del client
        with pytest.raises(InvalidRequestError) as caught:
            JobRequest(
                name="retries", entrypoint=Entrypoint.from_callable(ep.add), max_retries_failure=-1
            )
        assert caught.value.field == "JobRequest.max_retries_failure"

    def test_replicas_must_fill_whole_tpu_slices(self, client: Client) -> None:
        del client
        with pytest.raises(InvalidRequestError) as caught:
            JobRequest(
                name="tpu",
                entrypoint=Entrypoint.from_callable(ep.add),
                resources=ResourceConfig.with_tpu("v4-16"),
                replicas=3,
            )
        assert "replicas" in str(caught.value)

    def test_small_cpu_and_memory_request_runs(self, client: Client) -> None:
        request = self.request(ep.add, 2, 2, resources=ResourceConfig(cpu=0.5, ram="256m"))
        assert client.submit(request).wait(timeout=self.timeout) is JobStatus.SUCCEEDED

    def test_non_preemptible_request_runs(self, client: Client) -> None:
        request = self.request(ep.add, 2, 2, resources=ResourceConfig(preemptible=False))
        assert client.submit(request).wait(timeout=self.timeout) is JobStatus.SUCCEEDED

    def test_a_placeable_job_with_a_scheduling_timeout_runs(self, client: Client) -> None:
        """``scheduling_timeout`` bounds only the wait for a place: a job placed at once
        runs to the end, however long that takes beyond the timeout. (The timeout leaves a
        busy machine time to start the job: a second did not on a loaded CI machine.)"""
        self.require("runs_user_code")
        request = self.request(ep.sleep_then_return, 7, "placed", scheduling_timeout=6)
        assert client.submit(request).result(timeout=self.timeout) == "placed"
        assert (
            client.submit(self.request(ep.add, 1, 2, scheduling_timeout=60)).result(
                timeout=self.timeout
            )
            == 3
        )

    def test_env_vars_reach_the_job(self, client: Client) -> None:
        self.require("runs_user_code", "applies_env_vars")
        request = self.request(
            ep.read_env,
            "FRAY_CONFORMANCE_VALUE",
            environment=EnvironmentConfig(env_vars={"FRAY_CONFORMANCE_VALUE": "seen"}),
        )
        values = client.submit(request).result(timeout=self.timeout)
        assert values == {"FRAY_CONFORMANCE_VALUE": "seen"}

    def test_tpu_job_runs_one_replica_per_vm(self, client: Client) -> None:
        self.require("runs_user_code", "simulates_tpu_slices")
        request = self.request(ep.echo, "host", resources=ResourceConfig.with_tpu("v4-16"))
        assert request.replicas == 2
        assert client.submit(request).result(timeout=self.timeout) == ["host", "host"]

    def test_tpu_hosts_get_their_worker_env(self, client: Client) -> None:
        self.require("runs_user_code", "simulates_tpu_slices", "applies_env_vars")
        request = self.request(
            ep.read_env, "TPU_WORKER_ID", resources=ResourceConfig.with_tpu("v4-16")
        )
        values = client.submit(request).result(timeout=self.timeout)
        assert sorted(v["TPU_WORKER_ID"] or "" for v in values) == ["0", "1"]

    def test_what_the_capability_table_refuses_is_refused_at_submit(self, client: Client) -> None:
        tables = _tables(client)
        if not tables:
            pytest.skip(f"{type(client).__name__} declares no capability table")
        refused = 0
        for request in requests_at_the_limits():
            expected = _refusal(lambda t, r=request: t.check(r), tables)
            if expected is None:
                continue
            with pytest.raises(InvalidRequestError) as caught:
                client.submit(request)
            assert str(caught.value) == str(expected)
            refused += 1
        assert refused, "no request at the limits was refused; the table refuses nothing?"

    def test_actor_resources_the_table_refuses_are_refused_at_creation(
        self, client: Client
    ) -> None:
        tables = _tables(client)
        if not tables:
            pytest.skip(f"{type(client).__name__} declares no capability table")
        for resources in resources_at_the_limits():
            expected = _refusal(lambda t, r=resources: t.check_resources(r), tables)
            if expected is None:
                continue
            with pytest.raises(InvalidRequestError) as caught:
                client.create_actor_group(
                    ep.Counter, name=self.name("limit"), count=1, resources=resources
                )
            assert str(caught.value) == str(expected)


def _tables(client: Client) -> list[Capabilities]:
    """The capability tables a client checks requests against (a target's first)."""
    found = (getattr(client, "target", None), getattr(type(client), "capabilities", None))
    return [table for table in found if isinstance(table, Capabilities)]


def _refusal(
    check: Callable[[Capabilities], object], tables: list[Capabilities]
) -> InvalidRequestError | None:
    """The first refusal of ``check`` among ``tables``, or ``None``."""
    for table in tables:
        try:
            check(table)
        except InvalidRequestError as refusal:
            return refusal
    return None
