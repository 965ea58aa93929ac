"""Fray in one file: a controller actor, a handful of jobs, wait_all, results.

Each job estimates pi from its own random samples and reports to a `Tally` actor; the driver
waits for every job and prints the combined estimate. Runs on whatever backend
`FRAY_CLIENT_SPEC` names (local by default):

    uv run --package fray-core examples/quickstart.py
"""

from __future__ import annotations

import random

from fray import Entrypoint, JobRequest, ResourceConfig, current_client, wait_all


class Tally:
    """Collects (inside, total) sample counts from the jobs."""

    def __init__(self) -> None:
        self.inside = 0
        self.total = 0
        self.reports = 0

    def report(self, inside: int, total: int) -> int:
        self.inside += inside
        self.total += total
        self.reports += 1
        return self.reports

    def estimate(self) -> tuple[float, int, int]:
        return 4 * self.inside / self.total, self.total, self.reports


def sample(shard: int, samples: int, tally) -> float:
    rng = random.Random(shard)
    inside = sum(rng.random() ** 2 + rng.random() ** 2 <= 1 for _ in range(samples))
    reports = tally.report(inside, samples)
    print(f"shard {shard}: {inside}/{samples} inside, report #{reports}")
    return 4 * inside / samples


def main(shards: int = 8, samples: int = 200_000) -> None:
    client = current_client()
    print(f"backend: {client.scheme}")
    tally = client.create_actor(Tally, name="tally", resources=ResourceConfig(preemptible=False))
    jobs = [
        client.submit(
            JobRequest(
                name=f"pi-shard-{shard}",
                entrypoint=Entrypoint.from_callable(sample, args=(shard, samples, tally)),
                resources=ResourceConfig(cpu=1, ram="512m"),
            )
        )
        for shard in range(shards)
    ]
    statuses = wait_all(jobs, timeout=600)
    per_job = [job.result() for job in jobs]
    pi, total, reports = tally.estimate()
    print(f"statuses: {sorted({s.value for s in statuses})}")
    print(f"per-job estimates: {', '.join(f'{v:.4f}' for v in per_job)}")
    print(f"pi ~= {pi:.5f} from {total:,} samples in {reports} reports")
    assert reports == shards and abs(pi - 3.14159) < 0.01, "the estimate is off"
    client.shutdown()


if __name__ == "__main__":
    main()
