"""Rule tables for the predecessor's Fray API: ``fray.v2``, ``fray.v1`` and the older
``Cluster`` API, with what each name or call becomes.

The predecessor's current module paths (``fray``, ``fray.types``, ``fray.client``,
``fray.current_client``, ``fray.local_backend``, ``fray.actor``, ``fray.iris_backend``,
``fray.device_flops``, ``fray.cluster``) work unchanged in Fray, so importing its current
names from them is never reported.
"""

from __future__ import annotations

from fray.migrate._strategies import PREDECESSOR, Rule

# The predecessor's top-level names today: all of them import unchanged from ``fray``.
TOP_LEVEL = frozenset(
    {
        *("ActorConfig", "ActorContext", "ActorFuture", "ActorGroup", "ActorHandle"),
        *("ActorMethod", "BinaryEntrypoint", "CallableEntrypoint", "Client", "CpuConfig"),
        *("DeviceConfig", "DeviceKind", "Entrypoint", "EnvironmentConfig", "GpuConfig"),
        *("GpuType", "JobAlreadyExists", "JobFailed", "JobHandle", "JobRequest", "JobStatus"),
        *("LocalActorHandle", "LocalActorMethod", "LocalClient", "LocalJobHandle"),
        *("ResourceConfig", "TpuConfig", "TpuTopologyInfo", "TpuType", "create_environment"),
        *("current_actor", "current_client", "get_tpu_topology", "set_current_client"),
        "wait_all",
    }
)
# Notes for names that kept their name but not their meaning since ``fray.v1``.
V1_MEANING = {
    "ResourceConfig": "replicas now count VMs, not TPU slices: ask for slices with "
    "ResourceConfig.with_tpu(TYPE, slice_count=N)",
    "TpuConfig": "chip_count() is now per VM, not per slice",
}

_JOB_CONTEXT = (
    "current_client(): ctx.run(fn, *args) -> client.submit(JobRequest(..., "
    "entrypoint=Entrypoint.from_callable(fn, args=[...]))), ctx.get(x) -> x.result(), "
    "ctx.wait(...) -> wait_all(jobs), ctx.create_actor -> client.create_actor, ctx.put -> a "
    "storage path"
)
_TPU_RUNNER = "a TPU job: JobRequest(resources=ResourceConfig.with_tpu(...)) (see its calls)"
_QUEUE = (
    "none: keep the queue in one actor (client.create_actor(..., resources=ResourceConfig("
    "preemptible=False))) and pass storage paths through it"
)
# Names of the predecessor's older APIs, gone from it today, and what replaces each.
LEGACY_NAMES: dict[str, str] = {
    "Cluster": "Client (from fray import Client); its submit() returns a JobHandle",
    "JobId": "str: a job's id is job.job_id; keep the JobHandle client.submit returns",
    "JobInfo": "JobInfo (from fray import JobInfo): .error replaces .error_message; "
    "attempts/failures/preemptions replace the per-task list",
    "TaskStatus": "none: JobInfo counts attempts, failures and preemptions",
    "LocalCluster": "LocalClient (from fray import LocalClient)",
    "RayCluster": "client_from_spec('ray') (from fray import client_from_spec)",
    "current_cluster": "current_client (from fray import current_client)",
    "set_current_cluster": "set_current_client (from fray import set_current_client)",
    "create_cluster": "client_from_spec (from fray import client_from_spec)",
    "JobGroup": "none: keep your own subprocess code, or run the command as a job "
    "(Entrypoint.from_command)",
    "TemporaryVenv": "none: run the command as a job with EnvironmentConfig(pip_packages=[...])",
    "FileQueue": _QUEUE,
    "HttpQueue": _QUEUE,
    "Queue": _QUEUE,
    "get_default_job_ctx": _JOB_CONTEXT,
    "create_job_ctx": _JOB_CONTEXT,
    "fray_default_job_ctx": _JOB_CONTEXT,
    "JobContext": _JOB_CONTEXT,
    "run_on_pod": _TPU_RUNNER,
    "run_on_pod_ray": _TPU_RUNNER,
    "run_on_pod_multislice": _TPU_RUNNER,
    "run_on_pod_resumable": _TPU_RUNNER,
    "run_on_pod_multislice_resumable": _TPU_RUNNER,
    "create_thunk_entrypoint": "Entrypoint.from_callable(fn, args=[...], kwargs={...})",
    "RayClient": "client_from_spec('ray') or FRAY_CLIENT_SPEC=ray (needs fray-core[ray])",
    "get_task_index": "task_index (from fray import task_index)",
}
# Modules whose own path is gone; names not in LEGACY_NAMES get this advice.
OLD_MODULES: tuple[tuple[str, str], ...] = (
    ("fray.v2.ray_backend.tpu", _TPU_RUNNER),
    ("fray.v2.ray_backend", "the Ray backend has no module to import: FRAY_CLIENT_SPEC=ray"),
    ("fray.v2.ray", "the Ray backend has no module to import: FRAY_CLIENT_SPEC=ray"),
    ("fray.v1.cluster.device_flops", "import it from fray.device_flops"),
    ("fray.cluster.device_flops", "import it from fray.device_flops"),
    ("fray.v1.cluster.ray.tpu", "TPU types: fray tpu list, or get_tpu_topology (from fray.types)"),
    ("fray.cluster.ray.tpu", "TPU types: fray tpu list, or get_tpu_topology (from fray.types)"),
    ("fray.v1.isolated_env", "none: keep your own subprocess code"),
)
# Where the older layouts kept things that are not a Fray name: reported whatever is imported.
# (Submodules of fray.cluster are old too: fray.cluster itself is a drop-in path.)
LEGACY_MODULES = ("fray.job", "fray.fn_thunk", "fray.queue")
V2 = "fray.v2"

V2_IMPORT = Rule("fray-v2-import", PREDECESSOR, "{advice}", "import of {module}")
V2_DROP_IN = " (the predecessor's module paths work in Fray: drop the .v2)"
# The ``fray.v2`` submodules whose path without ``.v2`` is a Fray module.
V2_SUBMODULES = frozenset(
    {"", ".types", ".client", ".current_client", ".local_backend", ".actor", ".iris_backend"}
)
V1_IMPORT = Rule("fray-v1-import", PREDECESSOR, "{advice}", "import of {module}")
LEGACY_IMPORT = Rule(
    "fray-legacy-import", PREDECESSOR, "{advice}", "{names} from {module} (the older Cluster API)"
)

# Calls by their last name (under a predecessor or TPU-helper module).
CLUSTER_MAKERS = {
    "current_cluster": "{target}current_client() (a Client: submit/list_jobs/get_job)",
    "create_cluster": "{target}client_from_spec({args}) (same spec strings: local, "
    "ray?namespace=NAME; also iris://host:port)",
    "LocalCluster": "{target}LocalClient()",
    "RayCluster": "{target}client_from_spec('ray') (namespace: 'ray?namespace=NAME'; "
    "needs fray-core[ray])",
    "set_current_cluster": "with set_current_client({args}): ... (a context manager: put the "
    "code that should use it inside; the previous client is restored after)",
}
CURRENT_CLUSTER = Rule("current-cluster", PREDECESSOR, "{advice}", "{call}")
JOB_CONTEXT_MAKERS = ("get_default_job_ctx", "create_job_ctx", "fray_default_job_ctx")
JOB_CONTEXT = Rule("job-context", PREDECESSOR, _JOB_CONTEXT, "{call}")

# Methods of a Cluster (``{id}`` is the job id argument as written).
CLUSTER_METHODS: dict[str, str] = {
    "launch": "job = client.submit({args}) returns a JobHandle, not an id: keep the "
    "handle{where} (job.job_id is the id; client.get_job(id) re-attaches)",
    "monitor": "for line in job.logs(follow=True): ... yields the lines until the job ends; "
    "then job.info() gives the final JobInfo (job: the handle submitted for {id})",
    "poll": "job.info() (a JobInfo: .status, and .error where the predecessor had "
    ".error_message), or job.status() for the status alone (job: the handle for {id})",
    "terminate": "job.terminate() (job: the handle for {id}; its child jobs stop too)",
    "list_jobs": "client.list_jobs() (JobInfo records; .error replaces .error_message)",
    "connect": "remove it: a client is connected when it is built",
}
WAIT_ONE = (
    "job.wait(raise_on_failure={raise_}) (job: the handle for {id}){default}; it returns a "
    "JobStatus, not a JobInfo: job.info() has the rest"
)
WAIT_MANY = (
    "wait_all(jobs, raise_on_failure={raise_}) (jobs: the handles for {id}){default}; it "
    "returns the JobStatus list in input order"
)
WAIT_EITHER = WAIT_ONE + "; for a list of ids: wait_all(jobs, raise_on_failure={raise_})"
WAIT_DEFAULT = ", as Cluster.wait did by default (Fray's default is True: JobFailedError on FAILED)"
WAIT_RAISES = "; Fray raises JobFailedError on FAILED only: a STOPPED job is returned"
CLUSTER_METHOD = Rule(
    "cluster-method", PREDECESSOR, "{advice}", "{owner}.{method}(...) on a predecessor Cluster"
)
CONTEXT_METHODS: dict[str, str] = {
    "run": "job = client.submit(JobRequest(name=..., entrypoint=Entrypoint.from_callable("
    "{fn}, args=[{args}]))); its value is job.result()",
    "get": "{id}.result() for a job or actor future (wait_all(jobs) for many jobs)",
    "wait": "wait_all(jobs) waits for all; for the first done, poll job.status()",
    "put": "pass the value as an argument, or write it to a storage path and pass the path",
    "create_actor": "client.create_actor({args}{resources}){exists} (handles pickle: pass "
    "them on instead of looking actors up by name)",
}
CONTEXT_METHOD = Rule(
    "job-context-method", PREDECESSOR, "{advice}", "{owner}.{method}(...) on a job context"
)

# TPU runners: the parameters in order, and their defaults in the predecessor.
RUNNERS: dict[str, tuple[tuple[str, ...], dict[str, str]]] = {
    "run_on_pod": (
        ("remote_fn", "tpu_type", "num_slices", "max_retries_preemption", "max_retries_failure"),
        {"num_slices": "1", "max_retries_preemption": "10000", "max_retries_failure": "10"},
    ),
    "run_on_pod_ray": (
        ("remote_fn", "tpu_type", "num_slices", "max_retries_preemption", "max_retries_failure"),
        {"num_slices": "1", "max_retries_preemption": "10000", "max_retries_failure": "10"},
    ),
    "run_on_pod_multislice": (
        ("remote_fn", "tpu_type", "num_slices"),
        {"max_retries_preemption": "0", "max_retries_failure": "0"},
    ),
    "run_on_pod_resumable": (
        ("remote_fn", "tpu_type", "max_retries_preemption", "max_retries_failure"),
        {"num_slices": "1", "max_retries_preemption": "1000000", "max_retries_failure": "10"},
    ),
    "run_on_pod_multislice_resumable": (
        ("remote_fn", "tpu_type", "num_slices", "max_retries_preemption", "max_retries_failure"),
        {"max_retries_preemption": "1000000", "max_retries_failure": "10"},
    ),
}
RUN_ON_POD = Rule(
    "run-on-pod",
    PREDECESSOR,
    "job = client.submit(JobRequest(name={name}, entrypoint=Entrypoint.from_callable({fn}), "
    "resources=ResourceConfig.with_tpu({tpu_type}{slices}), max_retries_preemption="
    "{max_retries_preemption}, max_retries_failure={max_retries_failure}{env})){ref}; "
    "job.result() is the list of per-VM values, slice by slice (a bare value when the gang "
    "is one VM){notes}",
    "{call}",
)
RUNNER_REF = " in place of the ref (ray.get(ref) becomes job.result())"

OLD_ENTRYPOINT = Rule(
    "old-entrypoint",
    PREDECESSOR,
    "Entrypoint.from_command(binary, *args) or Entrypoint.from_callable(fn, kwargs={...})",
    "Entrypoint(binary=..., args=...) / Entrypoint(callable=..., function_args=...)",
)
CLUSTER_SPEC = Rule("cluster-spec", PREDECESSOR, "FRAY_CLIENT_SPEC", "FRAY_CLUSTER_SPEC")
