"""``fray migrate scan`` on Marin-style code written against the predecessor's APIs.

``migrate_fixtures/marin_style`` holds a small sample (written for these tests) of each way
Marin code used the predecessor: ``fray.v1`` and the first top-level Cluster API, ``fray.v2``
paths, the Ray TPU runners, job contexts, ``.options(...).remote(...)`` launches and actors
called through ``__call__``. ``expected_findings.json`` lists every finding it must produce.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from fray_cli_support import import_quietly

_migrate = import_quietly("fray.migrate")
scan = _migrate.scan

SAMPLE = Path(__file__).parent / "migrate_fixtures" / "marin_style"
EXPECTED = json.loads((SAMPLE / "expected_findings.json").read_text())
CLI = [sys.executable, "-m", "fray.cli", "migrate", "scan"]


def _rows(findings: list[dict[str, object]]) -> list[tuple[object, object, object]]:
    return sorted((f["file"], f["line"], f["rule"]) for f in findings)


def _by(path: str, line: int, rule: str) -> str:
    """The advice of the one finding at ``path:line`` with ``rule``."""
    found = [
        f.replacement
        for f in scan(str(SAMPLE)).findings
        if (f.path, f.line, f.pattern) == (path, line, rule)
    ]
    assert len(found) == 1, (path, line, rule, found)
    return found[0]


def test_the_scanner_finds_exactly_the_expected_findings() -> None:
    report = scan(str(SAMPLE))
    found = [{"file": f.path, "line": f.line, "rule": f.pattern} for f in report.findings]
    assert _rows(found) == _rows(EXPECTED)
    assert report.errors == []
    assert report.files_scanned == 8


def test_the_cli_reports_exactly_the_expected_findings() -> None:
    done = subprocess.run(
        [*CLI, str(SAMPLE), "--json"], capture_output=True, text=True, check=False
    )
    assert done.returncode == 1, done.stderr  # usages found
    data = json.loads(done.stdout)
    found = [{"file": f["path"], "line": f["line"], "rule": f["pattern"]} for f in data["findings"]]
    assert _rows(found) == _rows(EXPECTED)
    assert data["errors"] == [] and done.stderr == ""


def test_the_predecessors_current_module_paths_are_not_reported() -> None:
    report = scan(str(SAMPLE / "marin_lib" / "current_paths.py"))
    assert report.findings == [] and report.errors == []


def test_every_pattern_of_the_sample_is_covered() -> None:
    rules = {row["rule"] for row in EXPECTED}
    assert {
        "fray-v1-import",
        "fray-v2-import",
        "fray-legacy-import",
        "current-cluster",
        "cluster-method",
        "ray-options-launch",
        "run-on-pod",
        "actor-dunder-call",
        "actor-call-method",
        "job-context",
        "job-context-method",
    } <= rules


def test_cluster_advice_follows_the_code() -> None:
    launch = _by("experiments/eval_launcher.py", 28, "cluster-method")
    assert launch.startswith("job = client.submit(request)") and "in place of job_id" in launch
    # Cluster.wait did not raise by default; one id -> job.wait, a list of ids -> wait_all.
    single = _by("experiments/eval_launcher.py", 29, "cluster-method")
    assert single.startswith("job.wait(raise_on_failure=True)") and "STOPPED" in single
    many = _by("experiments/eval_launcher.py", 37, "cluster-method")
    assert many.startswith("wait_all(jobs, raise_on_failure=False)")
    assert "error_message" in _by("experiments/eval_launcher.py", 30, "cluster-method")
    assert _by("experiments/eval_launcher.py", 27, "current-cluster").startswith(
        "cluster = current_client()"
    )
    assert _by("experiments/first_layout.py", 15, "current-cluster") == "cluster = LocalClient()"
    imports = _by("experiments/first_layout.py", 5, "fray-legacy-import")
    assert "Cluster -> Client" in imports and "JobId -> str" in imports
    assert "Entrypoint" not in imports  # still a Fray name: nothing to say about it


def test_import_advice_names_the_new_paths() -> None:
    assert _by("marin_lib/v2_paths.py", 4, "fray-v2-import").startswith(
        "import fray.local_backend as local_backend"
    )
    assert _by("marin_lib/v2_paths.py", 6, "fray-v2-import").startswith(
        "from fray import current_client as v2_current_client"
    )
    assert "task_index" in _by("marin_lib/v2_paths.py", 8, "fray-v2-import")
    v1 = _by("experiments/eval_launcher.py", 6, "fray-v1-import")
    assert v1.startswith(
        "from fray import Entrypoint, EnvironmentConfig, JobRequest, ResourceConfig"
    )
    assert "current_cluster -> current_client" in v1 and "replicas now count VMs" in v1


def test_tpu_runner_advice_carries_the_arguments_and_the_old_defaults() -> None:
    ref = _by("marin_lib/tpu_jobs.py", 15, "run-on-pod")
    assert "with_tpu(config.tpu_type, slice_count=config.slices)" in ref
    assert "max_retries_preemption=10000, max_retries_failure=3" in ref
    assert "ray.get(ref) becomes job.result()" in ref
    multislice = _by("marin_lib/tpu_jobs.py", 23, "run-on-pod")
    assert "with_tpu('v5litepod-16', slice_count=2)" in multislice
    assert "max_retries_preemption=0, max_retries_failure=0" in multislice
    flexible = _by("marin_lib/v2_paths.py", 17, "run-on-pod")
    assert "slice_count=<one count>" in flexible and "[1, 2]" in flexible


def test_launch_and_actor_advice_is_derived_from_the_options() -> None:
    # The decorator's options come from workers.py, the call's from pipeline.py.
    task = _by("marin_lib/pipeline.py", 17, "ray-options-launch")
    assert "name=f'tokenize-{i}'" in task and "args=[path]" in task
    assert "resources=ResourceConfig(cpu=2, ram='16g')" in task
    assert "max_retries_preemption=5" in task
    actor = _by("marin_lib/pipeline.py", 24, "ray-options-launch")
    assert actor.startswith("handle = client.create_actor(Scorer, 'marin-1b', name='scorer'")
    assert "with_gpu(count=2)" in actor and "ActorConfig(max_concurrency=4)" in actor
    unknown = _by("marin_lib/pipeline.py", 35, "ray-options-launch")
    assert "if ProgressTracker is a @ray.remote function" in unknown
    dunder = _by("marin_lib/pipeline.py", 25, "actor-dunder-call")
    assert "Scorer.__call__" in dunder and "AttributeError" in dunder
    assert "Judge.__call__" in _by("marin_lib/pipeline.py", 31, "actor-dunder-call")


@pytest.mark.parametrize("extra", [[], ["--exit-zero"], ["--json"]])
def test_a_file_that_does_not_parse_fails_the_scan(tmp_path: Path, extra: list[str]) -> None:
    tree = tmp_path / "sample"
    shutil.copytree(SAMPLE, tree)
    (tree / "marin_lib" / "half_written.py").write_text("import ray\n\ndef run(:\n    pass\n")
    done = subprocess.run([*CLI, str(tree), *extra], capture_output=True, text=True, check=False)
    assert done.returncode == 1
    assert "error: cannot parse marin_lib/half_written.py:3: syntax error" in done.stderr
    if "--json" in extra:
        errors = json.loads(done.stdout)["errors"]
        assert [(e["path"], e["line"]) for e in errors] == [("marin_lib/half_written.py", 3)]
    else:
        assert "; 1 could not be parsed" in done.stdout.splitlines()[0]


def test_an_unparseable_file_alone_still_fails(tmp_path: Path) -> None:
    broken = tmp_path / "broken.py"
    broken.write_text("def f(:\n")
    done = subprocess.run([*CLI, str(broken), "--exit-zero"], capture_output=True, text=True)
    assert done.returncode == 1 and "cannot parse" in done.stderr and str(broken) in done.stderr
