"""The launcher example of the README and its test, kept in sync with the README."""

from __future__ import annotations

import inspect
from pathlib import Path

from fray import (
    Entrypoint,
    EnvironmentConfig,
    JobHandle,
    JobRequest,
    ResourceConfig,
    TpuConfig,
    current_client,
)
from fray_testing import FakeClient, Succeed


def train(config_path: str) -> None:
    """The training loop; runs on every TPU host."""


def launch_training(config_path: str, *, run_name: str) -> JobHandle:
    return current_client().submit(
        JobRequest(
            name=f"train-{run_name}",
            entrypoint=Entrypoint.from_callable(train, args=[config_path]),
            resources=ResourceConfig.with_tpu("v5p-16", slice_count=2),
            environment=EnvironmentConfig(env_vars={"WANDB_RUN_GROUP": run_name}),
            max_retries_preemption=10,
        )
    )


def test_launch_training_asks_for_two_v5p_slices(fake_client: FakeClient) -> None:
    fake_client.script(train, Succeed())  # record the launch, do not train

    launch_training("gs://bucket/llama.yaml", run_name="llama-8b")

    [request] = fake_client.requests_named("train-llama-8b")
    assert request.resources.device == TpuConfig(variant="v5p-16")
    assert request.replicas == 4  # 2 slices x 2 VMs per v5p-16 slice
    assert request.environment is not None
    assert request.environment.env_vars == {"WANDB_RUN_GROUP": "llama-8b"}
    assert request.max_retries_preemption == 10


README = Path(__file__).parents[1] / "README.md"


def test_readme_shows_this_example() -> None:
    readme = README.read_text()
    for function in (launch_training, test_launch_training_asks_for_two_v5p_slices):
        assert inspect.getsource(function) in readme, f"README is out of date: {function.__name__}"


def test_readme_first_example_runs() -> None:
    example = README.read_text().split("## Example", 1)[1].split("```python\n", 1)[1]
    exec(compile(example.split("```", 1)[0], str(README), "exec"), {})
