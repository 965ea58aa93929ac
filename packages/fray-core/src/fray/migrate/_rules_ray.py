"""Rule tables for Ray: which Ray names and options the scanner knows, and their Fray forms."""

from __future__ import annotations

from fray.migrate._strategies import DATA, REMOTE, REMOVE_RAY, RESOURCES, Rule

# Calls that only set Ray up: an import used for nothing else can go.
SETUP = {"ray.init", "ray.shutdown", "ray.is_initialized"}

_INTROSPECTION = Rule(
    "ray-cluster-introspection",
    RESOURCES,
    "ask for what the work needs in ResourceConfig; the backend places it",
)
_PLACEMENT_GROUP = Rule(
    "placement-group",
    RESOURCES,
    "a gang is one JobRequest with replicas=N; a TPU gang is "
    "ResourceConfig.with_tpu(TYPE, slice_count=N) (one replica per VM, scheduled together)",
)
_REMOVE_PLACEMENT_GROUP = Rule(
    "placement-group",
    RESOURCES,
    "nothing to remove: the gang's resources are released when the job ends",
)
_ACTOR_POOL = Rule(
    "actor-pool",
    DATA,
    "client.create_actor_group(Worker, name=..., count=N); hand shards to the handles "
    "from group.wait_ready()/discover_new()",
)

# Calls (or references) by qualified name.
CALLS: dict[str, Rule] = {
    "ray.init": Rule(
        "ray-init",
        REMOVE_RAY,
        "remove it: current_client() picks the backend (FRAY_CLIENT_SPEC=ray or "
        "ray://host:port to reach a Ray cluster; local by default)",
    ),
    "ray.shutdown": Rule(
        "ray-shutdown",
        REMOVE_RAY,
        "remove it, or use the client as a context manager: with client_from_spec(spec) as client:",
    ),
    "ray.is_initialized": Rule(
        "ray-is-initialized",
        REMOVE_RAY,
        "remove it: fray doctor shows which client current_client() picks and why",
    ),
    "ray.get": Rule(
        "ray-get",
        REMOTE,
        "job.result(timeout=...) for a job, future.result(timeout=...) for an actor call, "
        "wait_all(jobs) for many jobs",
    ),
    "ray.wait": Rule(
        "ray-wait",
        REMOTE,
        "wait_all(jobs, timeout=...) (fails fast, statuses in input order); "
        "group.wait_ready(count) for actors",
    ),
    "ray.put": Rule(
        "ray-put",
        DATA,
        "write the data to a storage path (fsspec URL) and pass the path to the job or actor",
    ),
    "ray.get_actor": Rule(
        "ray-get-actor",
        REMOTE,
        "create the actor once with client.create_actor(Cls, name=...) and pass its handle "
        "(handles pickle) to the jobs that need it",
    ),
    "ray.kill": Rule("ray-kill", REMOTE, "group.shutdown() for actors, job.terminate() for jobs"),
    "ray.cancel": Rule("ray-cancel", REMOTE, "job.terminate() (stops the job and its children)"),
    "ray.get_runtime_context": Rule(
        "ray-runtime-context",
        REMOTE,
        "fray.current_job_id(), fray.task_index(), fray.current_actor()",
    ),
    "ray.nodes": _INTROSPECTION,
    "ray.cluster_resources": _INTROSPECTION,
    "ray.available_resources": _INTROSPECTION,
    "ray.get_gpu_ids": Rule(
        "ray-gpu-ids",
        RESOURCES,
        "request GPUs with ResourceConfig.with_gpu(TYPE, count=N); the job sees only its own",
    ),
    "ray.util.placement_group": _PLACEMENT_GROUP,
    "ray.util.placement_group.placement_group": _PLACEMENT_GROUP,
    "ray.util.remove_placement_group": _REMOVE_PLACEMENT_GROUP,
    "ray.util.placement_group.remove_placement_group": _REMOVE_PLACEMENT_GROUP,
    "ray.util.scheduling_strategies.PlacementGroupSchedulingStrategy": Rule(
        "placement-group",
        RESOURCES,
        "drop it: replicas of one JobRequest are scheduled as a gang",
    ),
    "ray.util.scheduling_strategies.NodeAffinitySchedulingStrategy": Rule(
        "node-affinity",
        RESOURCES,
        "pinning to a node is not portable: ResourceConfig(preemptible=False) for "
        "non-preemptible capacity, regions=/zone= for placement",
    ),
    "ray.util.ActorPool": _ACTOR_POOL,
    "ray.util.actor_pool.ActorPool": _ACTOR_POOL,
    "ray.util.multiprocessing.Pool": Rule(
        "ray-pool",
        DATA,
        "client.create_actor_group(Worker, name=..., count=N), or one job per chunk and wait_all",
    ),
    "ray.util.queue.Queue": Rule(
        "ray-queue",
        DATA,
        "keep the queue in one actor (create_actor(..., resources=ResourceConfig("
        "preemptible=False))) and pass storage paths through it",
    ),
    "ray.job_submission.JobSubmissionClient": Rule(
        "ray-job-submission",
        REMOTE,
        "for each submit_job(entrypoint=CMD): current_client().submit(JobRequest(name=..., "
        "entrypoint=Entrypoint.from_command(*shlex.split(CMD)))); or the CLI: fray run -- CMD",
    ),
}

_TPU = Rule(
    "tpu-resources", RESOURCES, "ResourceConfig.with_tpu(TYPE, slice_count=N); see fray tpu list"
)
# Prefixes: any use below them.
PREFIXES: tuple[tuple[str, Rule], ...] = (
    (
        "ray.data.",
        Rule(
            "ray-data",
            DATA,
            "an actor group of N workers (client.create_actor_group) reading shards from "
            "storage paths; write outputs to storage and return their paths",
        ),
    ),
    (
        "ray.exceptions.",
        Rule(
            "ray-exceptions",
            REMOTE,
            "catch fray.errors instead: JobFailedError (user exception chained as __cause__), "
            "ActorDiedError, JobTimeoutError",
        ),
    ),
    (
        "ray.train.",
        Rule(
            "ray-train",
            REMOTE,
            "submit training as a JobRequest (TPU: ResourceConfig.with_tpu(TYPE, slice_count=N), "
            "with max_retries_preemption) and wait on it",
        ),
    ),
    (
        "ray.tune.",
        Rule(
            "ray-tune",
            REMOTE,
            "one job per trial, then wait_all(jobs); results through job.result()",
        ),
    ),
    (
        "ray.serve.",
        Rule(
            "ray-serve",
            REMOTE,
            "no direct equivalent: run the server as a job or a non-preemptible actor",
        ),
    ),
    ("ray.util.accelerators.", _TPU),
    ("ray.util.tpu.", _TPU),
)
GENERIC = Rule("ray-other", REMOTE, "no one-to-one Fray form: see docs/migrating-from-ray.md")

# Keyword options of @ray.remote / .options(); ``{value}`` is the option's value as written,
# ``{advice}`` what the scanner derived from it and the options beside it.
OPTIONS: dict[str, Rule] = {
    "num_cpus": Rule("num-cpus", RESOURCES, "ResourceConfig(cpu={value})"),
    "memory": Rule(
        "memory",
        RESOURCES,
        "ResourceConfig(ram={ram}) (Ray's memory is bytes; Fray's ram is a size per replica)",
    ),
    "num_gpus": Rule("num-gpus", RESOURCES, "{advice}"),
    "accelerator_type": Rule("accelerator-type", RESOURCES, "{advice}"),
    "max_retries": Rule("max-retries", RESOURCES, "JobRequest({retries}){note}"),
    "retry_exceptions": Rule("max-retries", RESOURCES, "JobRequest({retries}){note}"),
    "max_restarts": Rule("actor-options", RESOURCES, "ActorConfig(max_restarts={value})"),
    "max_task_retries": Rule("actor-options", RESOURCES, "ActorConfig(max_task_retries={value})"),
    "max_concurrency": Rule("actor-options", RESOURCES, "ActorConfig(max_concurrency={value})"),
    "scheduling_strategy": Rule(
        "scheduling-strategy",
        RESOURCES,
        "drop it: replicas form a gang; ResourceConfig(preemptible=False) pins to "
        "non-preemptible capacity",
    ),
    "num_returns": Rule("num-returns", REMOTE, "return one value (e.g. a tuple) from the callable"),
    "lifetime": Rule(
        "detached-actor",
        REMOTE,
        "an actor lives as long as its group: keep the controller running, or host the "
        "service in a job with ResourceConfig(preemptible=False)",
    ),
    "namespace": Rule("named-actor", REMOTE, "FRAY_CLIENT_SPEC=ray?namespace={namespace}"),
}
RUNTIME_ENV = Rule(
    "runtime-env", RESOURCES, "JobRequest(environment={environment}){notes}", "runtime_env={value}"
)

# Findings the visitor words from what it sees; ``{name}`` is the function, class or variable.
UNUSED_IMPORT = Rule(
    "unused-ray-import", REMOVE_RAY, "delete the import", "{name} ({qual}) is imported but not used"
)
SETUP_ONLY = Rule(
    "ray-setup-only",
    REMOVE_RAY,
    "delete the import together with the set-up calls",
    "{name} is only used for ray.init()/ray.shutdown()",
)
REMOTE_ACTOR = Rule(
    "ray-remote-actor",
    REMOTE,
    "a plain class: {form} (or client.create_actor_group({name}, ..., name=..., count=N)); "
    "calls keep the shape handle.method.remote(...) and return futures with .result()",
    "@ray.remote class {name}",
)
REMOTE_TASK = Rule(
    "ray-remote-task",
    REMOTE,
    "a plain function run as a job: {form}, then job.result()",
    "@ray.remote function {name}",
)
TASK_CALL = Rule("ray-task-call", REMOTE, "{form}", "{name}.remote(...) starts a Ray task")
ACTOR_CREATE = Rule("ray-actor-create", REMOTE, "{form}", "{name}.remote(...) creates a Ray actor")
REMOTE_CALL = Rule(
    "ray-remote-call",
    REMOTE,
    "a job (Entrypoint.from_callable(fn)) for a function, "
    "client.create_actor(Cls, name=...) for a class",
    "ray.remote(...) called directly",
)
NAMED_ACTOR = Rule(
    "named-actor",
    REMOTE,
    "create it once with client.create_actor({cls}, name={name}, "
    "resources=ResourceConfig(preemptible=False)) in the controller and pass the "
    "handle to the jobs that use it (handles pickle); no lookup by name is needed",
    "named actor {name}{extra}",
)
HEAD_NODE = Rule(
    "head-node-resource",
    RESOURCES,
    "ResourceConfig(preemptible=False): non-preemptible capacity on every backend",
    "resources={'head_node': ...} pins to the head node",
)
TPU_RESOURCES = Rule(
    "tpu-resources",
    RESOURCES,
    "ResourceConfig.with_tpu({tpu_type}): one replica per VM of the slice, TPU env "
    "(TPU_WORKER_ID, MEGASCALE_*) set for you (Ray ran one task on the slice's first host); "
    "add slice_count=N for N slices",
    "TPU resources {keys}",
)
CUSTOM_RESOURCES = Rule(
    "custom-resources",
    RESOURCES,
    "ResourceConfig fields: device (with_gpu/with_tpu), regions=, zone=, preemptible=",
    "custom resources {keys}",
)
TPU_BUNDLES = Rule(
    "tpu-resources",
    RESOURCES,
    "ResourceConfig.with_tpu(TYPE, slice_count=N) (fray tpu show TYPE gives VMs/chips)",
    "placement group of TPU bundles",
)
RAY_ADDRESS = Rule(
    "ray-address",
    REMOVE_RAY,
    "FRAY_CLIENT_SPEC=ray://host:port (or ray to join the cluster you are on)",
    "the RAY_ADDRESS env var",
)
# Starting Ray work with per-call options, and actors called through __call__.
OPTIONS_LAUNCH = Rule(
    "ray-options-launch", REMOTE, "{advice}", "{owner}.options(...).remote(...) {what}"
)
DUNDER_CALL = Rule(
    "actor-dunder-call",
    REMOTE,
    "Fray actor handles (like the predecessor's) only reach public methods: "
    "handle.__call__ raises AttributeError. Give {cls}.__call__ a name (def run(...), or "
    "any name you choose) and call {owner}.<that name>.remote(...)",
    "{owner}.__call__{how} on an actor handle",
)
CALL_METHOD = Rule(
    "actor-call-method",
    REMOTE,
    "a Fray actor handle cannot reach __call__ (names starting with _ are not remote "
    "methods): give it a name of your choice and call handle.<that name>.remote(...)",
    "actor class {cls} defines __call__",
)
