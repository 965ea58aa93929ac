# ruff: noqa
"""Code from the days when the top of the fray package was the Cluster API."""

import fray
from fray import Cluster, Entrypoint, JobId, JobRequest, LocalCluster, current_cluster

TRAIN = Entrypoint(binary="python", args=["-m", "marin.train"])


def submit(cluster: Cluster, request: JobRequest) -> JobId:
    return cluster.launch(request)


def run_here(request: JobRequest) -> None:
    cluster = LocalCluster()
    job_id = submit(cluster, request)
    for line in cluster.monitor(job_id):
        print(line)
    cluster.terminate(job_id)


def pick_cluster(explicit: Cluster | None) -> Cluster:
    return explicit or fray.current_cluster() or current_cluster()
