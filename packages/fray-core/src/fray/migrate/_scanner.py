"""A static scan (Python ``ast``, nothing is imported or run) for Ray and predecessor-API use."""

from __future__ import annotations

import ast
import dataclasses
import os
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

__all__ = ["STRATEGIES", "Finding", "ScanError", "ScanReport", "Strategy", "scan"]


@dataclasses.dataclass(frozen=True)
class Strategy:
    """One migration step. Steps are done in ``priority`` order (1 first).

    Attributes:
        key: Stable identifier used in JSON output.
        priority: 1 is done first.
        title: One line.
        summary: What the step means in Fray.
    """

    key: str
    priority: int
    title: str
    summary: str


STRATEGIES: tuple[Strategy, ...] = (
    Strategy(
        "remove-unused-ray",
        1,
        "Remove unused Ray",
        "Drop Ray imports nothing uses and the ray.init()/ray.shutdown() set-up: Fray picks "
        "its backend from FRAY_CLIENT_SPEC (local, ray, ray://host:port, iris://host:port) "
        "through current_client().",
    ),
    Strategy(
        "data-to-actor-group",
        2,
        "Move data processing to an actor group",
        "Ray Data pipelines, ActorPools, queues and object-store traffic become "
        "client.create_actor_group(Worker, name=..., count=N): hand each shard to a ready "
        "worker (group.wait_ready(), discover_new()), re-assign it if the worker dies, and move "
        "data through storage paths (fsspec URLs), not ray.put()/RPC arguments.",
    ),
    Strategy(
        "remote-to-jobs-or-actors",
        3,
        "Replace ray.remote with jobs or actors",
        "A @ray.remote function becomes a job (client.submit(JobRequest(..., "
        "entrypoint=Entrypoint.from_callable(fn, args)))) and ray.get() becomes "
        "job.result() or wait_all(jobs); a @ray.remote class becomes client.create_actor(Cls, "
        "name=...) whose methods keep the .method.remote(...) call shape (ActorFuture.result()).",
    ),
    Strategy(
        "resources-to-request-fields",
        4,
        "Express runtime env and head-node needs as JobRequest fields",
        "num_cpus/memory/num_gpus/TPU resources become ResourceConfig (ResourceConfig.with_tpu("
        "type, slice_count=N) for TPU gangs, instead of placement groups); runtime_env becomes "
        "EnvironmentConfig(env_vars=..., pip_packages=...); the head_node resource becomes "
        "ResourceConfig(preemptible=False); retries become max_retries_failure and "
        "max_retries_preemption; actor options become ActorConfig.",
    ),
    Strategy(
        "port-fray-v2",
        5,
        "Port the predecessor's Fray API",
        "fray.v2 and fray.cluster imports become imports from fray; current_cluster()/"
        "Cluster.launch() become current_client()/client.submit() with JobHandle methods.",
    ),
)
_BY_KEY = {s.key: s for s in STRATEGIES}


@dataclasses.dataclass(frozen=True)
class Finding:
    """One use of Ray (or of the predecessor API) and its Fray replacement.

    Attributes:
        path: File, relative to the scanned root where possible.
        line: 1-based line.
        column: 0-based column.
        pattern: Stable pattern id, e.g. ``ray-remote-task``.
        found: What was found, in words (``@ray.remote function train``).
        replacement: The recommended Fray form.
        strategy: Key of the :class:`Strategy` it belongs to.
        priority: That strategy's priority.
        snippet: The source line, stripped and shortened.
    """

    path: str
    line: int
    column: int
    pattern: str
    found: str
    replacement: str
    strategy: str
    priority: int
    snippet: str

    def as_dict(self) -> dict[str, Any]:
        """A JSON-friendly dict."""
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class ScanError:
    """A file that could not be scanned (syntax error, unreadable)."""

    path: str
    line: int | None
    message: str


@dataclasses.dataclass
class ScanReport:
    """Everything a scan found, findings sorted by priority, file and line."""

    paths: list[str]
    files_scanned: int = 0
    findings: list[Finding] = dataclasses.field(default_factory=list[Finding])
    errors: list[ScanError] = dataclasses.field(default_factory=list[ScanError])

    @property
    def files_with_findings(self) -> int:
        """Files with at least one finding."""
        return len({f.path for f in self.findings})

    def counts(self) -> dict[str, int]:
        """Findings per strategy key, every strategy included."""
        counts = {s.key: 0 for s in STRATEGIES}
        for finding in self.findings:
            counts[finding.strategy] += 1
        return counts

    def as_dict(self) -> dict[str, Any]:
        """The report as JSON-friendly data (the ``--json`` output)."""
        counts = self.counts()
        return {
            "version": 1,
            "paths": self.paths,
            "files_scanned": self.files_scanned,
            "files_with_findings": self.files_with_findings,
            "strategies": [{**dataclasses.asdict(s), "count": counts[s.key]} for s in STRATEGIES],
            "findings": [f.as_dict() for f in self.findings],
            "errors": [dataclasses.asdict(e) for e in self.errors],
        }


# ---------------------------------------------------------------------------------------------
# Pattern tables

_P1, _P2, _P3, _P4, _P5 = (s.key for s in STRATEGIES)
_SETUP = {"ray.init", "ray.shutdown", "ray.is_initialized"}

# Calls (or references) by qualified name: pattern, strategy, replacement.
_CALLS: dict[str, tuple[str, str, str]] = {
    "ray.init": (
        "ray-init",
        _P1,
        "remove it: current_client() picks the backend (FRAY_CLIENT_SPEC=ray or "
        "ray://host:port to reach a Ray cluster; local by default)",
    ),
    "ray.shutdown": (
        "ray-shutdown",
        _P1,
        "remove it, or use the client as a context manager: with client_from_spec(spec) as client:",
    ),
    "ray.is_initialized": (
        "ray-is-initialized",
        _P1,
        "remove it: fray doctor shows which client current_client() picks and why",
    ),
    "ray.get": (
        "ray-get",
        _P3,
        "job.result(timeout=...) for a job, future.result(timeout=...) for an actor call, "
        "wait_all(jobs) for many jobs",
    ),
    "ray.wait": (
        "ray-wait",
        _P3,
        "wait_all(jobs, timeout=...) (fails fast, statuses in input order); "
        "group.wait_ready(count) for actors",
    ),
    "ray.put": (
        "ray-put",
        _P2,
        "write the data to a storage path (fsspec URL) and pass the path to the job or actor",
    ),
    "ray.get_actor": (
        "ray-get-actor",
        _P3,
        "create the actor once with client.create_actor(Cls, name=...) and pass its handle "
        "(handles pickle) to the jobs that need it",
    ),
    "ray.kill": ("ray-kill", _P3, "group.shutdown() for actors, job.terminate() for jobs"),
    "ray.cancel": ("ray-cancel", _P3, "job.terminate() (stops the job and its children)"),
    "ray.get_runtime_context": (
        "ray-runtime-context",
        _P3,
        "fray.current_job_id(), fray.task_index(), fray.current_actor()",
    ),
    "ray.nodes": (
        "ray-cluster-introspection",
        _P4,
        "ask for what the work needs in ResourceConfig; the backend places it",
    ),
    "ray.cluster_resources": (
        "ray-cluster-introspection",
        _P4,
        "ask for what the work needs in ResourceConfig; the backend places it",
    ),
    "ray.available_resources": (
        "ray-cluster-introspection",
        _P4,
        "ask for what the work needs in ResourceConfig; the backend places it",
    ),
    "ray.get_gpu_ids": (
        "ray-gpu-ids",
        _P4,
        "request GPUs with ResourceConfig.with_gpu(TYPE, count=N); the job sees only its own",
    ),
    "ray.util.placement_group": (
        "placement-group",
        _P4,
        "a gang is one JobRequest with replicas=N; a TPU gang is "
        "ResourceConfig.with_tpu(TYPE, slice_count=N) (one replica per VM, scheduled together)",
    ),
    "ray.util.placement_group.placement_group": (
        "placement-group",
        _P4,
        "a gang is one JobRequest with replicas=N; a TPU gang is "
        "ResourceConfig.with_tpu(TYPE, slice_count=N) (one replica per VM, scheduled together)",
    ),
    "ray.util.remove_placement_group": (
        "placement-group",
        _P4,
        "nothing to remove: the gang's resources are released when the job ends",
    ),
    "ray.util.placement_group.remove_placement_group": (
        "placement-group",
        _P4,
        "nothing to remove: the gang's resources are released when the job ends",
    ),
    "ray.util.scheduling_strategies.PlacementGroupSchedulingStrategy": (
        "placement-group",
        _P4,
        "drop it: replicas of one JobRequest are scheduled as a gang",
    ),
    "ray.util.scheduling_strategies.NodeAffinitySchedulingStrategy": (
        "node-affinity",
        _P4,
        "pinning to a node is not portable: ResourceConfig(preemptible=False) for "
        "non-preemptible capacity, regions=/zone= for placement",
    ),
    "ray.util.ActorPool": (
        "actor-pool",
        _P2,
        "client.create_actor_group(Worker, name=..., count=N); hand shards to the handles "
        "from group.wait_ready()/discover_new()",
    ),
    "ray.util.actor_pool.ActorPool": (
        "actor-pool",
        _P2,
        "client.create_actor_group(Worker, name=..., count=N); hand shards to the handles "
        "from group.wait_ready()/discover_new()",
    ),
    "ray.util.multiprocessing.Pool": (
        "ray-pool",
        _P2,
        "client.create_actor_group(Worker, name=..., count=N), or one job per chunk and wait_all",
    ),
    "ray.util.queue.Queue": (
        "ray-queue",
        _P2,
        "keep the queue in one actor (create_actor(..., resources=ResourceConfig("
        "preemptible=False))) and pass storage paths through it",
    ),
    "ray.job_submission.JobSubmissionClient": (
        "ray-job-submission",
        _P3,
        "current_client().submit(JobRequest(name=..., entrypoint=Entrypoint.from_command("
        "'python', 'train.py'))); or the CLI: fray run -- python train.py",
    ),
}
# Prefixes: any use below them.
_PREFIXES: tuple[tuple[str, tuple[str, str, str]], ...] = (
    (
        "ray.data.",
        (
            "ray-data",
            _P2,
            "an actor group of N workers (client.create_actor_group) reading shards from "
            "storage paths; write outputs to storage and return their paths",
        ),
    ),
    (
        "ray.exceptions.",
        (
            "ray-exceptions",
            _P3,
            "catch fray.errors instead: JobFailedError (user exception chained as __cause__), "
            "ActorDiedError, JobTimeoutError",
        ),
    ),
    (
        "ray.train.",
        (
            "ray-train",
            _P3,
            "submit training as a JobRequest (TPU: ResourceConfig.with_tpu(TYPE, slice_count=N), "
            "with max_retries_preemption) and wait on it",
        ),
    ),
    (
        "ray.tune.",
        ("ray-tune", _P3, "one job per trial, then wait_all(jobs); results through job.result()"),
    ),
    (
        "ray.serve.",
        (
            "ray-serve",
            _P3,
            "no direct equivalent: run the server as a job or a non-preemptible actor",
        ),
    ),
    (
        "ray.util.accelerators.",
        ("tpu-resources", _P4, "ResourceConfig.with_tpu(TYPE, slice_count=N); see fray tpu list"),
    ),
    (
        "ray.util.tpu.",
        ("tpu-resources", _P4, "ResourceConfig.with_tpu(TYPE, slice_count=N); see fray tpu list"),
    ),
)
_GENERIC = (
    "ray-other",
    _P3,
    "no one-to-one Fray form: see docs/migrating-from-ray.md",
)

# Predecessor API.
_PRED_MODULES = ("fray.v2", "fray.cluster", "fray.job", "fray.fn_thunk", "fray.queue")
_PRED_CALLS: dict[str, tuple[str, str]] = {
    "current_cluster": (
        "current-cluster",
        "current_client() (returns a Client: submit/list_jobs/get_job)",
    ),
    "set_current_cluster": (
        "current-cluster",
        "with set_current_client(client): ... (a context manager; restores the previous client)",
    ),
    "create_cluster": (
        "current-cluster",
        "client_from_spec(spec) (spec: local, ray, iris://host:port)",
    ),
    "LocalCluster": ("current-cluster", "LocalClient()"),
    "RayCluster": ("current-cluster", "client_from_spec('ray') (needs fray-core[ray])"),
    "get_default_job_ctx": (
        "job-context",
        "current_client(): ctx.create_actor -> client.create_actor; tasks -> jobs + result()",
    ),
    "create_job_ctx": (
        "job-context",
        "current_client(): ctx.create_actor -> client.create_actor; tasks -> jobs + result()",
    ),
    "fray_default_job_ctx": (
        "job-context",
        "current_client(): ctx.create_actor -> client.create_actor; tasks -> jobs + result()",
    ),
    "run_on_pod": (
        "run-on-pod",
        "submit a JobRequest with ResourceConfig.with_tpu(TYPE, slice_count=N) and "
        "max_retries_failure/max_retries_preemption",
    ),
}
_CLUSTER_METHODS: dict[str, str] = {
    "launch": "job = client.submit(request) (a JobHandle; job.job_id is the id)",
    "monitor": "job.logs(follow=True)",
    "poll": "job.status() or job.info()",
    "wait": "job.wait() (raises JobFailedError on failure)",
    "terminate": "job.terminate()",
    "list_jobs": "client.list_jobs() (returns JobInfo)",
    "connect": "remove it: clients connect when built",
}

# Keyword options of @ray.remote / .options(): pattern, strategy, replacement.
_OPTIONS: dict[str, tuple[str, str, str]] = {
    "num_cpus": ("num-cpus", _P4, "ResourceConfig(cpu=N)"),
    "memory": ("memory", _P4, "ResourceConfig(ram='16g') (sizes as strings)"),
    "num_gpus": ("num-gpus", _P4, "ResourceConfig.with_gpu(TYPE, count=N)"),
    "accelerator_type": ("accelerator-type", _P4, "ResourceConfig.with_gpu({value}, count=N)"),
    "runtime_env": (
        "runtime-env",
        _P4,
        "JobRequest(environment=EnvironmentConfig(env_vars={...}, pip_packages=[...]))",
    ),
    "max_retries": (
        "max-retries",
        _P4,
        "JobRequest(max_retries_failure=N, max_retries_preemption=M): separate budgets",
    ),
    "retry_exceptions": (
        "max-retries",
        _P4,
        "JobRequest(max_retries_failure=N): user exceptions count against it",
    ),
    "max_restarts": ("actor-options", _P4, "ActorConfig(max_restarts=N)"),
    "max_task_retries": ("actor-options", _P4, "ActorConfig(max_task_retries=N)"),
    "max_concurrency": ("actor-options", _P4, "ActorConfig(max_concurrency=N)"),
    "scheduling_strategy": (
        "scheduling-strategy",
        _P4,
        "drop it: replicas form a gang; ResourceConfig(preemptible=False) pins to "
        "non-preemptible capacity",
    ),
    "num_returns": ("num-returns", _P3, "return one value (e.g. a tuple) from the callable"),
    "lifetime": (
        "detached-actor",
        _P3,
        "an actor lives as long as its group: keep the controller running, or host the "
        "service in a job with ResourceConfig(preemptible=False)",
    ),
    "namespace": ("named-actor", _P3, "FRAY_CLIENT_SPEC=ray?namespace=NAME"),
}
_RUNTIME_ENV_KEYS = {
    "env_vars": "EnvironmentConfig(env_vars={...})",
    "pip": "EnvironmentConfig(pip_packages=[...])",
    "uv": "EnvironmentConfig(pip_packages=[...])",
    "working_dir": "EnvironmentConfig(workspace=PATH)",
    "py_modules": "EnvironmentConfig(workspace=PATH)",
    "conda": "not supported: use EnvironmentConfig(pip_packages=[...]) or docker_image=",
    "container": "EnvironmentConfig(docker_image=IMAGE)",
    "image_uri": "EnvironmentConfig(docker_image=IMAGE)",
}
_SKIP_DIRS = {
    "__pycache__",
    "node_modules",
    "site-packages",
    "venv",
    "build",
    "dist",
}


# ---------------------------------------------------------------------------------------------
# The per-file visitor


def _constant_str(node: ast.AST | None) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return None


class _FileScan:
    def __init__(self, path: str, source: str, tree: ast.Module) -> None:
        self.path = path
        self.lines = source.splitlines()
        self.tree = tree
        self.findings: dict[tuple[int, int, str], Finding] = {}
        self.bindings: dict[str, str] = {}  # local name -> qualified name (ray..., fray.v2...)
        self.import_nodes: dict[str, ast.stmt] = {}
        self.parents: dict[ast.AST, ast.AST] = {}
        self.remote_functions: set[str] = set()
        self.remote_classes: set[str] = set()
        self.cluster_vars: set[str] = set()
        self.handled: set[ast.AST] = set()  # attribute chains already reported
        self.decorators: set[ast.AST] = set()  # @ray.remote(...) calls, reported with their def

    # -- helpers ---------------------------------------------------------------------------

    def add(self, node: ast.AST, pattern: str, strategy: str, found: str, replacement: str) -> None:
        line = getattr(node, "lineno", 1)
        col = getattr(node, "col_offset", 0)
        key = (line, col, pattern)
        if key in self.findings:
            return
        text = self.lines[line - 1].strip() if 0 < line <= len(self.lines) else ""
        if len(text) > 120:
            text = text[:117] + "..."
        self.findings[key] = Finding(
            path=self.path,
            line=line,
            column=col,
            pattern=pattern,
            found=found,
            replacement=replacement,
            strategy=strategy,
            priority=_BY_KEY[strategy].priority,
            snippet=text,
        )

    def qual(self, node: ast.AST) -> str | None:
        if isinstance(node, ast.Name):
            return self.bindings.get(node.id)
        if isinstance(node, ast.Attribute):
            base = self.qual(node.value)
            return f"{base}.{node.attr}" if base else None
        return None

    @staticmethod
    def _interesting(module: str) -> bool:
        return module == "ray" or module.startswith("ray.") or module.startswith(_PRED_MODULES)

    # -- passes ----------------------------------------------------------------------------

    def run(self) -> list[Finding]:
        for parent in ast.walk(self.tree):
            for child in ast.iter_child_nodes(parent):
                self.parents[child] = parent
        self.collect_imports()
        self.collect_remote_defs()
        self.check_imports_used()
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Call):
                self.visit_call(node)
            elif isinstance(node, ast.Assign):
                self.visit_assign(node)
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                self.visit_string(node)
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Attribute | ast.Name) and node not in self.handled:
                self.visit_reference(node)
        return sorted(self.findings.values(), key=lambda f: (f.line, f.column, f.pattern))

    def collect_imports(self) -> None:
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if not self._interesting(alias.name):
                        continue
                    if alias.asname:
                        self.bindings[alias.asname] = alias.name
                        self.import_nodes[alias.asname] = node
                    else:
                        root = alias.name.split(".")[0]
                        self.bindings[root] = root
                        self.import_nodes[root] = node
                    self.report_predecessor_import(node, alias.name)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                if not self._interesting(node.module):
                    continue
                for alias in node.names:
                    local = alias.asname or alias.name
                    if alias.name == "*":
                        continue
                    self.bindings[local] = f"{node.module}.{alias.name}"
                    self.import_nodes[local] = node
                self.report_predecessor_import(node, node.module)

    def report_predecessor_import(self, node: ast.stmt, module: str) -> None:
        if not module.startswith(_PRED_MODULES):
            return
        if module.startswith("fray.v2"):
            replacement = "import the same names from fray (from fray import ...)"
        elif module.startswith("fray.cluster.ray.tpu") or "tpu" in module:
            replacement = (
                "TPU gangs are JobRequests with ResourceConfig.with_tpu(TYPE, slice_count=N); "
                "the topology table is fray_tpu (get_tpu_topology)"
            )
        else:
            replacement = "import from fray: current_client, JobRequest, ResourceConfig, ..."
        self.add(node, "fray-v2-import", _P5, f"import of {module}", replacement)

    def collect_remote_defs(self) -> None:
        for node in ast.walk(self.tree):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                continue
            for deco in node.decorator_list:
                target = deco.func if isinstance(deco, ast.Call) else deco
                if self.qual(target) != "ray.remote":
                    continue
                self.handled.add(target)
                self.decorators.add(deco)
                if isinstance(node, ast.ClassDef):
                    self.remote_classes.add(node.name)
                    self.add(
                        deco,
                        "ray-remote-actor",
                        _P3,
                        f"@ray.remote class {node.name}",
                        f"a plain class; create it with client.create_actor({node.name}, "
                        f"name='...') (or create_actor_group(..., count=N)); calls keep the "
                        "shape handle.method.remote(...) and return futures with .result()",
                    )
                else:
                    self.remote_functions.add(node.name)
                    self.add(
                        deco,
                        "ray-remote-task",
                        _P3,
                        f"@ray.remote function {node.name}",
                        f"a plain function run as a job: client.submit(JobRequest(name='...', "
                        f"entrypoint=Entrypoint.from_callable({node.name}, args=[...]))), "
                        "then job.result()",
                    )
                if isinstance(deco, ast.Call):
                    self.visit_options(deco, actor=isinstance(node, ast.ClassDef))

    def check_imports_used(self) -> None:
        uses: dict[str, list[ast.Name]] = {name: [] for name in self.bindings}
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id in uses:
                uses[node.id].append(node)
        for name, found in uses.items():
            qual = self.bindings[name]
            if not (qual == "ray" or qual.startswith("ray.")):
                continue
            node = self.import_nodes[name]
            if not found:
                self.add(
                    node,
                    "unused-ray-import",
                    _P1,
                    f"{name} ({qual}) is imported but not used",
                    "delete the import",
                )
                continue
            if all(self._setup_use(use) for use in found):
                self.add(
                    node,
                    "ray-setup-only",
                    _P1,
                    f"{name} is only used for ray.init()/ray.shutdown()",
                    "delete the import together with the set-up calls",
                )

    def _setup_use(self, use: ast.Name) -> bool:
        parent = self.parents.get(use)
        if isinstance(parent, ast.Attribute):
            return self.qual(parent) in _SETUP
        return self.bindings.get(use.id) in _SETUP

    # -- calls -----------------------------------------------------------------------------

    def visit_call(self, call: ast.Call) -> None:
        func = call.func
        qual = self.qual(func)
        if qual is not None:
            self.visit_qualified_call(call, qual)
            return
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
            owner = func.value.id
            if func.attr == "remote" and owner in self.remote_functions:
                self.add(
                    call,
                    "ray-task-call",
                    _P3,
                    f"{owner}.remote(...) starts a Ray task",
                    f"job = client.submit(JobRequest(name='{owner}', "
                    f"entrypoint=Entrypoint.from_callable({owner}, args=[...])))",
                )
            elif func.attr == "remote" and owner in self.remote_classes:
                self.add(
                    call,
                    "ray-actor-create",
                    _P3,
                    f"{owner}.remote(...) creates a Ray actor",
                    f"handle = client.create_actor({owner}, ..., name='...')",
                )
            elif func.attr == "options" and owner in self.remote_functions | self.remote_classes:
                self.visit_options(call, actor=owner in self.remote_classes)
            elif owner in self.cluster_vars and func.attr in _CLUSTER_METHODS:
                self.add(
                    call,
                    "cluster-method",
                    _P5,
                    f"{owner}.{func.attr}(...) on a predecessor Cluster",
                    _CLUSTER_METHODS[func.attr],
                )
        if isinstance(func, ast.Name) and func.id == "Entrypoint":
            self.check_old_entrypoint(call)

    def check_old_entrypoint(self, call: ast.Call) -> None:
        keywords = {k.arg for k in call.keywords}
        if keywords & {"binary", "function_args"}:
            self.add(
                call,
                "old-entrypoint",
                _P5,
                "Entrypoint(binary=..., args=...) / Entrypoint(callable=..., function_args=...)",
                "Entrypoint.from_command(binary, *args) or Entrypoint.from_callable(fn, "
                "kwargs={...})",
            )

    def visit_qualified_call(self, call: ast.Call, qual: str) -> None:
        self.mark_chain(call.func)
        if call in self.decorators:
            return
        if qual.startswith(_PRED_MODULES):
            leaf = qual.rsplit(".", 1)[-1]
            if leaf == "Entrypoint":
                self.check_old_entrypoint(call)
            elif leaf in _PRED_CALLS:
                pattern, replacement = _PRED_CALLS[leaf]
                self.add(call, pattern, _P5, f"{qual}()", replacement)
            return
        if qual == "ray.remote":
            # ray.remote(fn) or ray.remote(num_gpus=1)(fn) used as a call, not a decorator.
            self.add(
                call,
                "ray-remote-call",
                _P3,
                "ray.remote(...) called directly",
                "a job (Entrypoint.from_callable(fn)) for a function, "
                "client.create_actor(Cls, name=...) for a class",
            )
            self.visit_options(call, actor=False)
            return
        if qual in _CALLS:
            pattern, strategy, replacement = _CALLS[qual]
            self.add(call, pattern, strategy, f"{qual}()", replacement)
            if qual == "ray.init":
                for keyword in call.keywords:
                    if keyword.arg == "runtime_env":
                        self.visit_runtime_env(keyword)
            if qual.endswith("placement_group"):
                self.visit_bundles(call)
            return
        for prefix, (pattern, strategy, replacement) in _PREFIXES:
            if qual.startswith(prefix):
                self.add(call, pattern, strategy, f"{qual}()", replacement)
                return
        if qual.split(".")[0] == "ray":
            pattern, strategy, replacement = _GENERIC
            self.add(call, pattern, strategy, f"{qual}()", replacement)
        # ray.remote-decorated things called through an alias chain stay unreported here.

    def visit_options(self, call: ast.Call, *, actor: bool) -> None:
        keywords = {k.arg: k for k in call.keywords if k.arg}
        if "name" in keywords and actor:
            exists = keywords.get("get_if_exists")
            get_if_exists = isinstance(exists, ast.keyword) and (
                isinstance(exists.value, ast.Constant) and exists.value.value is True
            )
            self.add(
                keywords["name"],
                "named-actor",
                _P3,
                "named actor" + (" with get_if_exists=True" if get_if_exists else ""),
                "create it once with client.create_actor(Cls, name='...', "
                "resources=ResourceConfig(preemptible=False)) in the controller and pass the "
                "handle to the jobs that use it (handles pickle); no lookup by name is needed",
            )
        for arg, keyword in keywords.items():
            if arg == "resources":
                self.visit_resources(keyword)
            elif arg == "runtime_env":
                self.visit_runtime_env(keyword)
            elif arg in _OPTIONS:
                pattern, strategy, replacement = _OPTIONS[arg]
                value = ast.unparse(keyword.value)
                replacement = replacement.replace("{value}", value)
                self.add(keyword, pattern, strategy, f"{arg}={value}", replacement)

    def visit_resources(self, keyword: ast.keyword) -> None:
        value = keyword.value
        keys: list[str] = []
        if isinstance(value, ast.Dict):
            keys = [k for k in (_constant_str(key) for key in value.keys) if k is not None]
        tpu_head = [k for k in keys if k.startswith("TPU-") and k.endswith("-head")]
        if "head_node" in keys:
            self.add(
                keyword,
                "head-node-resource",
                _P4,
                "resources={'head_node': ...} pins to the head node",
                "ResourceConfig(preemptible=False): non-preemptible capacity on every backend",
            )
        if tpu_head or "TPU" in keys:
            tpu_type = tpu_head[0][len("TPU-") : -len("-head")] if tpu_head else "TYPE"
            self.add(
                keyword,
                "tpu-resources",
                _P4,
                f"TPU resources {', '.join(repr(k) for k in keys if k.startswith('TPU'))}",
                f"ResourceConfig.with_tpu('{tpu_type}', slice_count=N): one replica per VM, "
                "TPU env (TPU_WORKER_ID, MEGASCALE_*) set for you",
            )
        others = [k for k in keys if k != "head_node" and not k.startswith("TPU")]
        if others or not keys:
            shown = ", ".join(repr(k) for k in others) if others else ast.unparse(value)
            self.add(
                keyword,
                "custom-resources",
                _P4,
                f"custom resources {shown}",
                "ResourceConfig fields: device (with_gpu/with_tpu), regions=, zone=, preemptible=",
            )

    def visit_runtime_env(self, keyword: ast.keyword) -> None:
        value = keyword.value
        parts: list[str] = []
        if isinstance(value, ast.Dict):
            for key in value.keys:
                name = _constant_str(key)
                if name is not None:
                    parts.append(_RUNTIME_ENV_KEYS.get(name, f"{name}: no equivalent"))
        replacement = "JobRequest(environment=EnvironmentConfig(...))"
        if parts:
            replacement += ": " + "; ".join(dict.fromkeys(parts))
        self.add(keyword, "runtime-env", _P4, f"runtime_env={ast.unparse(value)[:60]}", replacement)

    def visit_bundles(self, call: ast.Call) -> None:
        text = ast.unparse(call)
        if "TPU" in text:
            self.add(
                call,
                "tpu-resources",
                _P4,
                "placement group of TPU bundles",
                "ResourceConfig.with_tpu(TYPE, slice_count=N) (fray tpu show TYPE gives VMs/chips)",
            )

    def visit_assign(self, node: ast.Assign) -> None:
        value = node.value
        if not isinstance(value, ast.Call):
            return
        qual = self.qual(value.func) or ""
        leaf = qual.rsplit(".", 1)[-1]
        if qual.startswith(_PRED_MODULES) and leaf in (
            "current_cluster",
            "create_cluster",
            "LocalCluster",
            "RayCluster",
        ):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    self.cluster_vars.add(target.id)

    def visit_string(self, node: ast.Constant) -> None:
        if node.value == "RAY_ADDRESS":
            self.add(
                node,
                "ray-address",
                _P1,
                "the RAY_ADDRESS env var",
                "FRAY_CLIENT_SPEC=ray://host:port (or ray to join the cluster you are on)",
            )
        elif node.value == "FRAY_CLUSTER_SPEC":
            self.add(node, "cluster-spec", _P5, "FRAY_CLUSTER_SPEC", "FRAY_CLIENT_SPEC")

    # -- plain references (exceptions, attributes passed around) ---------------------------

    def mark_chain(self, node: ast.AST) -> None:
        while isinstance(node, ast.Attribute):
            self.handled.add(node)
            node = node.value
        self.handled.add(node)

    def visit_reference(self, node: ast.Attribute | ast.Name) -> None:
        parent = self.parents.get(node)
        if isinstance(parent, ast.Attribute):
            return  # report the longest chain only
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            return
        qual = self.qual(node)
        if qual is None or qual in ("ray",) or qual.startswith(_PRED_MODULES):
            return
        if qual == "ray.remote" or qual in _SETUP:
            return
        self.mark_chain(node)
        if qual in _CALLS:
            pattern, strategy, replacement = _CALLS[qual]
            self.add(node, pattern, strategy, qual, replacement)
            return
        for prefix, (pattern, strategy, replacement) in _PREFIXES:
            if qual.startswith(prefix) or qual == prefix[:-1]:
                self.add(node, pattern, strategy, qual, replacement)
                return
        pattern, strategy, replacement = _GENERIC
        self.add(node, pattern, strategy, qual, replacement)


# ---------------------------------------------------------------------------------------------
# Walking a tree


def _python_files(root: str) -> Iterator[str]:
    if os.path.isfile(root):
        yield root
        return
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in _SKIP_DIRS)
        for name in sorted(files):
            if name.endswith(".py"):
                yield os.path.join(folder, name)


def _display(path: str, root: str) -> str:
    if os.path.isfile(root):
        return path
    rel = os.path.relpath(path, root)
    return rel if not rel.startswith("..") else path


def scan(paths: Sequence[str] | str) -> ScanReport:
    """Scans Python files under ``paths`` (files or folders) for Ray and predecessor-API use.

    Nothing is imported or executed. Hidden folders, ``__pycache__``, virtualenvs,
    ``site-packages``, ``build`` and ``dist`` are skipped.

    Args:
        paths: Files or folders.

    Returns:
        A :class:`ScanReport`; files that do not parse are listed in ``errors``.

    Raises:
        FileNotFoundError: A path does not exist.
    """
    roots = [paths] if isinstance(paths, str) else list(paths)
    for root in roots:
        if not os.path.exists(root):
            raise FileNotFoundError(root)
    report = ScanReport(paths=roots)
    findings: list[Finding] = []
    for root in roots:
        for path in _python_files(root):
            shown = _display(path, root)
            report.files_scanned += 1
            try:
                with open(path, encoding="utf-8", errors="replace") as f:
                    source = f.read()
                tree = ast.parse(source, filename=path)
            except SyntaxError as err:
                report.errors.append(ScanError(shown, err.lineno, f"syntax error: {err.msg}"))
                continue
            except (OSError, ValueError) as err:
                report.errors.append(ScanError(shown, None, str(err)))
                continue
            findings.extend(_FileScan(shown, source, tree).run())
    report.findings = sorted(findings, key=lambda f: (f.priority, f.path, f.line, f.column))
    return report


def iter_strategies(report: ScanReport) -> Iterable[tuple[Strategy, list[Finding]]]:
    """Each strategy with its findings, in priority order (empty ones included)."""
    for strategy in STRATEGIES:
        yield strategy, [f for f in report.findings if f.strategy == strategy.key]
