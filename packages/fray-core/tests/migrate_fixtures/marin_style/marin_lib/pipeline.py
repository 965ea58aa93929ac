# ruff: noqa
"""Starts the workers with per-call options, and calls actors through __call__."""

import ray
from fray import current_client
from marin_lib.progress import ProgressTracker
from marin_lib.workers import Scorer, tokenize_shard


class Judge:
    def __call__(self, batch: list[str]) -> float:
        return float(len(batch))


def tokenize_all(paths: list[str]) -> list[str]:
    refs = [
        tokenize_shard.options(name=f"tokenize-{i}", max_retries=5).remote(path)
        for i, path in enumerate(paths)
    ]
    return ray.get(refs)


def score(batches: list[list[str]]) -> list[list[float]]:
    scorer = Scorer.options(num_gpus=2, max_concurrency=4).remote("marin-1b")
    futures = [scorer.__call__.remote(batch) for batch in batches]
    return ray.get(futures)


def judge(batches: list[list[str]]) -> list[float]:
    handle = current_client().create_actor(Judge, name="judge")
    return [handle.__call__.remote(batch).result() for batch in batches]


def track(total: int):
    return ProgressTracker.options(num_cpus=0).remote(total)
