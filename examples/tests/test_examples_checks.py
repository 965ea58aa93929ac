"""Fast checks of the examples' own pieces (no backend): their end-of-run checks reject a bad
outcome, their flags reject bad values, and the pipeline's dispatcher reassigns the shard of
a dead worker."""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from fray import LocalClient, set_current_client

EXAMPLES = Path(__file__).resolve().parents[1]


def _load(name: str) -> ModuleType:
    module_name = f"fray_example_{name}"
    if module_name in sys.modules:
        return sys.modules[module_name]
    spec = importlib.util.spec_from_file_location(module_name, EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return module


train = _load("train")
rl = _load("rl")
pipeline = _load("pipeline")


@pytest.mark.parametrize(
    ("module", "argv", "message"),
    [
        (train, ["--slices", "2"], "--slices needs --tpu TYPE"),
        (train, ["--steps", "0"], "--steps must be at least 1"),
        (rl, ["--rollouts", "0"], "--rollouts must be at least 1"),
        (pipeline, ["--shards", "3", "--kill-at-shard", "3"], "--kill-at-shard must be between"),
        (pipeline, ["--workers", "1", "--kill-at-shard", "0"], "needs at least 2 workers"),
    ],
)
def test_bad_flags_exit_with_a_usage_error(
    module: ModuleType, argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as info:
        module.main(argv)
    assert info.value.code == 2
    assert message in capsys.readouterr().err


def _rl_outcome(versions: int, rollouts: int) -> tuple[Any, ...]:
    args = argparse.Namespace(versions=versions)
    lessons = {
        "lessons_issued": versions * rollouts,
        "reports": versions * rollouts,
        "reported_lessons": list(range(versions * rollouts)),
        "duplicates": [],
        "unknown": [],
        "per_rollout": {str(i): versions for i in range(rollouts)},
    }
    weights = {
        "published": list(range(versions + 1)),
        "observed": {str(i): list(range(versions)) for i in range(rollouts)},
    }
    trained = {
        "batches_used": versions * rollouts,
        "expected_reward_initial": 0.4,
        "expected_reward_final": 0.85,
    }
    results = [
        {"rollout": i, "batches": versions, "versions_seen": list(range(versions))}
        for i in range(rollouts)
    ]
    return args, trained, results, lessons, weights


def test_rl_check_accepts_a_good_run_and_rejects_bad_ones() -> None:
    assert rl.check(*_rl_outcome(4, 2)) == []

    args, trained, results, lessons, weights = _rl_outcome(4, 2)
    results[1]["versions_seen"] = [0, 2, 3]
    assert any(
        "saw weight versions" in p for p in rl.check(args, trained, results, lessons, weights)
    )

    args, trained, results, lessons, weights = _rl_outcome(4, 2)
    lessons["duplicates"] = [3]
    assert any("reported twice" in p for p in rl.check(args, trained, results, lessons, weights))

    args, trained, results, lessons, weights = _rl_outcome(4, 2)
    trained["expected_reward_final"] = 0.42
    assert any("did not improve" in p for p in rl.check(args, trained, results, lessons, weights))


def test_pipeline_reassigns_a_dead_workers_shard_and_checks_exactly_once(
    tmp_path: Path,
) -> None:
    storage = f"file://{tmp_path}"
    argv = ["--workers", "2", "--shards", "5", "--kill-at-shard", "1", "--storage-url", storage]
    report = tmp_path / "report.json"
    with LocalClient() as client, set_current_client(client):
        assert pipeline.main([*argv, "--report", str(report)]) == 0
    summary = json.loads(report.read_text())
    assert summary["reassigned"] == [1] and len(summary["dead"]) == 1

    # The same check fails once an output goes missing or a stray file appears.
    args = pipeline.parse_args(argv)
    output = tmp_path / "output"
    (output / "shard-00003.json").rename(output / "stray.json")
    dispatcher = pipeline.Dispatcher(None, {}, None)
    dispatcher.accepted = [{"shard": s} for s in (0, 1, 2, 3, 4, 4)]
    dispatcher.dead, dispatcher.reassigned = summary["dead"], [1]
    problems, _ = pipeline.check(args, dispatcher, f"{storage}/output")
    assert any("accepted twice [4]" in p for p in problems)
    assert any("extra files ['stray.json']" in p for p in problems)


def test_train_check_rejects_a_loss_that_did_not_fall(tmp_path: Path) -> None:
    args = train.parse_args(["--steps", "10", "--checkpoint-url", f"file://{tmp_path}"])
    train.save_checkpoint(args.checkpoint_url, 10, {"params.w1": [[0.0]]})
    host = {key: None for key in train.HOST_ENV_KEYS}
    good = {"env": host, "leader": True, "start_step": 0}
    problems, _ = train.check([{**good, "eval_loss_first": 1.0, "eval_loss_last": 0.1}], args, 1)
    assert problems == []
    problems, _ = train.check([{**good, "eval_loss_first": 1.0, "eval_loss_last": 0.9}], args, 1)
    assert any("loss did not fall" in p for p in problems)
    problems, _ = train.check([{**good, "eval_loss_first": 1.0, "eval_loss_last": 0.1}], args, 2)
    assert any("expected 2 host reports" in p for p in problems)


def test_a_failed_job_ends_with_a_failed_line_and_exit_code_1(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with LocalClient() as client, set_current_client(client):
        code = train.main(["--steps", "5", "--checkpoint-url", "no-such-protocol://ckpt"])
    assert code == 1
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last.startswith("train: FAILED: JobFailedError"), last
    assert "no-such-protocol" in last
