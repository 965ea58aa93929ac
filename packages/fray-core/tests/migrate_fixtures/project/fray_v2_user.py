import os

from fray.cluster import Entrypoint, JobRequest, current_cluster
from fray.cluster.ray.tpu import run_on_pod
from fray.v2 import ResourceConfig, current_client

os.environ.setdefault("FRAY_CLUSTER_SPEC", "ray")


def main() -> None:
    cluster = current_cluster()
    request = JobRequest(name="train", entrypoint=Entrypoint(binary="python", args=["train.py"]))
    job_id = cluster.launch(request)
    for line in cluster.monitor(job_id):
        print(line)
    print(cluster.poll(job_id).status)
    run_on_pod(lambda: None, "v4-8", num_slices=2)
    current_client().submit(request, ResourceConfig())
