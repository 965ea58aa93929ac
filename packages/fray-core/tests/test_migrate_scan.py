"""The Ray-migration scanner on a fixture tree covering every pattern of the guide."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from fray_cli_support import import_quietly

main = import_quietly("fray.cli").main
_migrate = import_quietly("fray.migrate")
STRATEGIES, scan = _migrate.STRATEGIES, _migrate.scan

PROJECT = Path(__file__).parent / "migrate_fixtures" / "project"

EXPECTED = [
    ("setup_only.py", 6, "ray-setup-only"),
    ("setup_only.py", 8, "ray-address"),
    ("setup_only.py", 12, "ray-init"),
    ("setup_only.py", 14, "ray-shutdown"),
    ("unused_import.py", 2, "unused-ray-import"),
    ("unused_import.py", 3, "unused-ray-import"),
    ("pkg/data_pipeline.py", 7, "ray-remote-actor"),
    ("pkg/data_pipeline.py", 14, "ray-data"),
    ("pkg/data_pipeline.py", 16, "ray-put"),
    ("pkg/data_pipeline.py", 17, "actor-pool"),
    ("pkg/data_pipeline.py", 17, "ray-actor-create"),
    ("pkg/data_pipeline.py", 18, "ray-queue"),
    ("pkg/tasks.py", 5, "ray-remote-task"),
    ("pkg/tasks.py", 5, "num-cpus"),
    ("pkg/tasks.py", 5, "memory"),
    ("pkg/tasks.py", 5, "max-retries"),
    ("pkg/tasks.py", 15, "ray-task-call"),
    ("pkg/tasks.py", 16, "ray-wait"),
    ("pkg/tasks.py", 17, "ray-cancel"),
    ("pkg/tasks.py", 18, "ray-remote-call"),
    ("pkg/tasks.py", 19, "ray-get"),
    ("pkg/tasks.py", 20, "ray-get"),
    ("pkg/actors.py", 6, "ray-remote-actor"),
    ("pkg/actors.py", 6, "actor-options"),  # max_restarts=
    ("pkg/actors.py", 6, "actor-options"),  # max_concurrency=
    ("pkg/actors.py", 17, "ray-actor-create"),
    ("pkg/actors.py", 18, "ray-options-launch"),
    ("pkg/actors.py", 19, "named-actor"),
    ("pkg/actors.py", 19, "detached-actor"),
    ("pkg/actors.py", 21, "ray-get-actor"),
    ("pkg/actors.py", 23, "ray-get"),
    ("pkg/actors.py", 24, "ray-exceptions"),
    ("pkg/actors.py", 26, "ray-kill"),
    ("pkg/actors.py", 27, "ray-get"),
    ("pkg/resources.py", 9, "ray-init"),
    ("pkg/resources.py", 9, "runtime-env"),
    ("pkg/resources.py", 12, "ray-remote-actor"),
    ("pkg/resources.py", 12, "head-node-resource"),
    ("pkg/resources.py", 17, "ray-remote-task"),
    ("pkg/resources.py", 17, "tpu-resources"),
    ("pkg/resources.py", 22, "ray-remote-task"),
    ("pkg/resources.py", 22, "num-gpus"),
    ("pkg/resources.py", 22, "accelerator-type"),
    ("pkg/resources.py", 28, "placement-group"),
    ("pkg/resources.py", 28, "tpu-resources"),
    ("pkg/resources.py", 29, "ray-get"),
    ("pkg/resources.py", 30, "placement-group"),
    ("pkg/resources.py", 31, "node-affinity"),
    ("pkg/resources.py", 32, "ray-runtime-context"),
    ("pkg/resources.py", 34, "scheduling-strategy"),
    ("pkg/resources.py", 34, "ray-options-launch"),
    ("fray_v2_user.py", 3, "fray-legacy-import"),
    ("fray_v2_user.py", 4, "fray-legacy-import"),
    ("fray_v2_user.py", 5, "fray-v2-import"),
    ("fray_v2_user.py", 7, "cluster-spec"),
    ("fray_v2_user.py", 11, "current-cluster"),
    ("fray_v2_user.py", 12, "old-entrypoint"),
    ("fray_v2_user.py", 13, "cluster-method"),
    ("fray_v2_user.py", 14, "cluster-method"),
    ("fray_v2_user.py", 16, "cluster-method"),
    ("fray_v2_user.py", 17, "run-on-pod"),
]


def test_every_usage_is_found_with_its_file_line_and_pattern(tmp_path: Path) -> None:
    tree = tmp_path / "project"
    shutil.copytree(PROJECT, tree)
    # Folders that are never scanned, and a file that does not parse (kept out of the repo
    # so that linters stay clean).
    for ignored in (".venv/lib", "__pycache__", "node_modules/pkg", "build", ".git"):
        (tree / ignored).mkdir(parents=True)
        (tree / ignored / "ignored.py").write_text("import ray\nray.init()\n")
    (tree / "broken.py").write_text("import ray\n\ndef oops(:\n    pass\n")
    report = scan(str(tree))
    found = [(f.path, f.line, f.pattern) for f in report.findings]
    assert sorted(found) == sorted(EXPECTED)
    assert report.files_scanned == 9  # the 8 fixture files and broken.py
    assert report.files_with_findings == 7
    assert [(e.path, e.line) for e in report.errors] == [("broken.py", 3)]
    assert all("ignored" not in f.path for f in report.findings)


def test_findings_come_in_migration_priority_order() -> None:
    report = scan(str(PROJECT))
    keys = [s.key for s in STRATEGIES]
    assert keys == [
        "remove-unused-ray",
        "data-to-actor-group",
        "remote-to-jobs-or-actors",
        "resources-to-request-fields",
        "port-fray-v2",
    ]
    order = [(f.priority, f.path, f.line, f.column) for f in report.findings]
    assert order == sorted(order)
    assert all(count > 0 for count in report.counts().values())
    by_pattern = {f.pattern: f for f in report.findings}
    assert by_pattern["ray-setup-only"].strategy == "remove-unused-ray"
    assert by_pattern["ray-data"].strategy == "data-to-actor-group"
    assert by_pattern["ray-remote-task"].strategy == "remote-to-jobs-or-actors"
    assert by_pattern["head-node-resource"].strategy == "resources-to-request-fields"
    assert "preemptible=False" in by_pattern["head-node-resource"].replacement
    tpu = next(f for f in report.findings if f.pattern == "tpu-resources" and f.line == 17)
    assert "with_tpu('v4-8'" in tpu.replacement
    assert "create_actor" in by_pattern["named-actor"].replacement
    assert by_pattern["runtime-env"].replacement == (
        "JobRequest(environment=EnvironmentConfig(env_vars={'HF_HOME': '/data/hf'}, "
        "pip_packages=['transformers']))"
    )
    # Ray's "A100" is Fray's too: any A100.
    accelerator = by_pattern["accelerator-type"].replacement
    assert accelerator.startswith("ResourceConfig.with_gpu('A100', count=1)")
    assert by_pattern["memory"].replacement.startswith("ResourceConfig(ram='8g')")  # 8 * 1024**3
    assert by_pattern["num-cpus"].replacement == "ResourceConfig(cpu=4)"
    assert by_pattern["max-retries"].replacement.startswith("JobRequest(max_retries_preemption=3)")


def test_cli_json_output_and_exit_codes(tmp_path: Path) -> None:
    cmd = [sys.executable, "-m", "fray.cli", "migrate", "scan"]
    done = subprocess.run(
        [*cmd, str(PROJECT), "--json"], capture_output=True, text=True, check=False
    )
    assert done.returncode == 1  # usages found
    data = json.loads(done.stdout)
    assert data["version"] == 1 and data["files_scanned"] == 8
    assert sorted((f["path"], f["line"], f["pattern"]) for f in data["findings"]) == sorted(
        EXPECTED
    )
    first = data["findings"][0]
    assert set(first) == {
        "path",
        "line",
        "column",
        "pattern",
        "found",
        "replacement",
        "strategy",
        "priority",
        "snippet",
    }
    assert [s["count"] for s in data["strategies"]] == [7, 4, 25, 15, 10]
    zero = subprocess.run(
        [*cmd, str(PROJECT), "--exit-zero"], capture_output=True, text=True, check=False
    )
    assert zero.returncode == 0 and "usage(s)" in zero.stdout
    clean = subprocess.run(
        [*cmd, str(PROJECT / "clean.py")], capture_output=True, text=True, check=False
    )
    assert clean.returncode == 0
    assert clean.stdout.startswith("fray migrate scan: 0 usage(s) in 0 of 1 file(s)")
    missing = subprocess.run(
        [*cmd, str(tmp_path / "nope")], capture_output=True, text=True, check=False
    )
    assert missing.returncode == 2 and "argument PATH" in missing.stderr


def test_text_output_groups_by_strategy(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["migrate", "scan", str(PROJECT)]) == 1
    out = capsys.readouterr().out
    headings = [out.index(f"\n{s.priority}. {s.title} (") for s in STRATEGIES]
    assert headings == sorted(headings)
    assert "pkg/tasks.py:5:1: @ray.remote function preprocess" in out
    assert "pkg/resources.py:12:" in out


@pytest.mark.parametrize(
    ("source", "patterns"),
    [
        ("import ray\n", {"unused-ray-import"}),
        ("from ray import remote\n@remote\ndef f():\n    pass\n", {"ray-remote-task"}),
        ("import ray.util.queue\nq = ray.util.queue.Queue()\n", {"ray-queue"}),
        ("import ray\nray.nodes()\n", {"ray-cluster-introspection"}),
        ("import ray\nray.autoscaler.sdk.request_resources(num_cpus=4)\n", {"ray-other"}),
        ("ray = object()\nray.init()\n", set[str]()),
        ("from fray import current_client\ncurrent_client()\n", set[str]()),
        ("from fray.v2 import JobRequest\n", {"fray-v2-import"}),
        ("from fray.v1 import JobId\n", {"fray-v1-import"}),
        ("from fray.cluster import JobRequest, ResourceConfig\n", set[str]()),
        ("from fray.types import TpuConfig\nfrom fray.client import wait_all\n", set[str]()),
        ("from fray import Client, JobInfo, LocalClient\n", set[str]()),  # Fray's own names
        ("class A:\n    def __call__(self):\n        return super().__call__()\n", set[str]()),
        ("import fray\nfray.current_cluster().launch(r)\n", {"current-cluster", "cluster-method"}),
        (
            "from fray.cluster import create_cluster\nc = create_cluster('ray')\nc.poll(i)\n",
            {"fray-legacy-import", "current-cluster", "cluster-method"},
        ),
        (
            "import ray\nh = ray.get_actor('a')\nh.__call__.remote(1)\n",
            {"ray-get-actor", "actor-dunder-call"},
        ),
        (
            "import ray\nf.options(num_cpus=1).remote()\n",
            {"unused-ray-import", "ray-options-launch", "num-cpus"},
        ),
    ],
)
def test_small_sources(tmp_path: Path, source: str, patterns: set[str]) -> None:
    path = tmp_path / "snippet.py"
    path.write_text(source)
    assert {f.pattern for f in scan(str(path)).findings} == patterns


def _advice(tmp_path: Path, source: str, pattern: str) -> str:
    path = tmp_path / "snippet.py"
    path.write_text(source)
    found = [f.replacement for f in scan(str(path)).findings if f.pattern == pattern]
    assert len(found) == 1, found
    return found[0]


@pytest.mark.parametrize(
    ("option", "advice"),
    [
        ("memory=16 * 1024**3", "ResourceConfig(ram='16g')"),
        ("memory=512 * 2**20", "ResourceConfig(ram='512m')"),
        ("memory=3_000_000_000", "ResourceConfig(ram='3000000000')"),
        ("memory=MEM_BYTES", "ResourceConfig(ram=str(MEM_BYTES) (a byte count, as Ray took it))"),
    ],
)
def test_memory_advice_is_the_size_asked_for(tmp_path: Path, option: str, advice: str) -> None:
    source = f"import ray\n@ray.remote({option})\ndef f():\n    pass\n"
    assert _advice(tmp_path, source, "memory").startswith(advice)


@pytest.mark.parametrize(
    ("accelerator", "advice"),
    [
        ("NVIDIA_TESLA_V100", "ResourceConfig.with_gpu('V100', count=2)"),
        ("'h100'", "ResourceConfig.with_gpu('H100', count=2)"),
        ("'TPU-V4'", "ResourceConfig.with_tpu('v4-<size>')"),
        ("'RTX9999'", "ResourceConfig.with_gpu(<a GPU type>, count=2)"),
    ],
)
def test_accelerator_advice_names_fray_types(tmp_path: Path, accelerator: str, advice: str) -> None:
    source = (
        "import ray\nfrom ray.util.accelerators import NVIDIA_TESLA_V100\n"
        f"@ray.remote(num_gpus=2, accelerator_type={accelerator})\ndef f():\n    pass\n"
    )
    assert _advice(tmp_path, source, "accelerator-type").startswith(advice)


def test_gpu_types_in_advice_are_fray_types(tmp_path: Path) -> None:
    gpu_types = import_quietly("fray._types").GPU_TYPES
    advice = _advice(tmp_path, "import ray\n@ray.remote(num_gpus=1)\ndef f(): ...\n", "num-gpus")
    listed = advice.split("pin it: ", 1)[1].split(", ")
    assert listed and set(listed) <= set(gpu_types)


def test_retry_advice_follows_ray_semantics(tmp_path: Path) -> None:
    # Ray's max_retries covers lost workers only, unless retry_exceptions is set.
    only_lost = "import ray\n@ray.remote(max_retries=4)\ndef f(): ...\n"
    assert _advice(tmp_path, only_lost, "ray-remote-task").endswith(
        "max_retries_preemption=4)), then job.result()"
    )
    both = "import ray\n@ray.remote(max_retries=4, retry_exceptions=True)\ndef f(): ...\n"
    assert "max_retries_preemption=4, max_retries_failure=4" in _advice(
        tmp_path, both, "ray-remote-task"
    )
    default = "import ray\n@ray.remote(retry_exceptions=True)\ndef f(): ...\n"
    assert "max_retries_preemption=3, max_retries_failure=3" in _advice(
        tmp_path, default, "max-retries"
    )
