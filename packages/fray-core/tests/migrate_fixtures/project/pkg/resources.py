# ruff: noqa
import ray
from ray.util.placement_group import placement_group
from ray.util.scheduling_strategies import (
    NodeAffinitySchedulingStrategy,
    PlacementGroupSchedulingStrategy,
)

ray.init(runtime_env={"env_vars": {"HF_HOME": "/data/hf"}, "pip": ["transformers"]})


@ray.remote(resources={"head_node": 0.001})
class Coordinator:
    pass


@ray.remote(resources={"TPU": 4, "TPU-v4-8-head": 1})
def train_on_tpu() -> None:
    pass


@ray.remote(num_gpus=1, accelerator_type="A100")
def train_on_gpu() -> None:
    pass


def gang():
    pg = placement_group([{"TPU": 4, "CPU": 8}] * 2, strategy="STRICT_SPREAD")
    ray.get(pg.ready())
    strategy = PlacementGroupSchedulingStrategy(placement_group=pg)
    pinned = NodeAffinitySchedulingStrategy(
        node_id=ray.get_runtime_context().get_node_id(), soft=False
    )
    return train_on_tpu.options(scheduling_strategy=strategy).remote(), pinned
