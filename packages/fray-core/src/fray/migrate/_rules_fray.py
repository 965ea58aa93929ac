"""Rule tables for the predecessor's Fray API (``fray.v2``, ``fray.cluster`` and older)."""

from __future__ import annotations

from fray.migrate._strategies import PREDECESSOR, Rule

# Modules of the predecessor whose use is reported.
MODULES = ("fray.v2", "fray.cluster", "fray.job", "fray.fn_thunk", "fray.queue")
# Calls that make a predecessor Cluster; the variable they are assigned to is tracked.
CLUSTER_MAKERS = ("current_cluster", "create_cluster", "LocalCluster", "RayCluster")

_JOB_CONTEXT = "current_client(): ctx.create_actor -> client.create_actor; tasks -> jobs + result()"
# Calls by their last name (under one of MODULES).
CALLS: dict[str, Rule] = {
    "current_cluster": Rule(
        "current-cluster",
        PREDECESSOR,
        "current_client() (returns a Client: submit/list_jobs/get_job)",
    ),
    "set_current_cluster": Rule(
        "current-cluster",
        PREDECESSOR,
        "with set_current_client(client): ... (a context manager; restores the previous client)",
    ),
    "create_cluster": Rule(
        "current-cluster",
        PREDECESSOR,
        "client_from_spec(spec) (spec: local, ray, iris://host:port)",
    ),
    "LocalCluster": Rule("current-cluster", PREDECESSOR, "LocalClient()"),
    "RayCluster": Rule(
        "current-cluster", PREDECESSOR, "client_from_spec('ray') (needs fray-core[ray])"
    ),
    "get_default_job_ctx": Rule("job-context", PREDECESSOR, _JOB_CONTEXT),
    "create_job_ctx": Rule("job-context", PREDECESSOR, _JOB_CONTEXT),
    "fray_default_job_ctx": Rule("job-context", PREDECESSOR, _JOB_CONTEXT),
    "run_on_pod": Rule(
        "run-on-pod",
        PREDECESSOR,
        "submit a JobRequest with ResourceConfig.with_tpu(TYPE, slice_count=N) and "
        "max_retries_failure/max_retries_preemption",
    ),
}
# Methods of a predecessor Cluster, and what replaces them.
CLUSTER_METHODS: dict[str, str] = {
    "launch": "job = client.submit(request) (a JobHandle; job.job_id is the id)",
    "monitor": "job.logs(follow=True)",
    "poll": "job.status() or job.info()",
    "wait": "job.wait() (raises JobFailedError on failure)",
    "terminate": "job.terminate()",
    "list_jobs": "client.list_jobs() (returns JobInfo)",
    "connect": "remove it: clients connect when built",
}
CLUSTER_METHOD = Rule(
    "cluster-method", PREDECESSOR, "{advice}", "{owner}.{method}(...) on a predecessor Cluster"
)

V2_IMPORT = "import the same names from fray (from fray import ...)"
TPU_IMPORT = (
    "TPU gangs are JobRequests with ResourceConfig.with_tpu(TYPE, slice_count=N); "
    "the topology table is fray_tpu (get_tpu_topology)"
)
OTHER_IMPORT = "import from fray: current_client, JobRequest, ResourceConfig, ..."
IMPORT = Rule("fray-v2-import", PREDECESSOR, "{advice}", "import of {module}")

OLD_ENTRYPOINT = Rule(
    "old-entrypoint",
    PREDECESSOR,
    "Entrypoint.from_command(binary, *args) or Entrypoint.from_callable(fn, kwargs={...})",
    "Entrypoint(binary=..., args=...) / Entrypoint(callable=..., function_args=...)",
)
CLUSTER_SPEC = Rule("cluster-spec", PREDECESSOR, "FRAY_CLIENT_SPEC", "FRAY_CLUSTER_SPEC")
