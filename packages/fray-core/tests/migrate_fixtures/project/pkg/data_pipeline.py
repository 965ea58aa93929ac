# ruff: noqa
import ray
from ray.util import ActorPool
from ray.util.queue import Queue


@ray.remote
class Tokenizer:
    def tokenize(self, batch):
        return batch


def run(paths):
    ds = ray.data.read_parquet(paths)
    ds = ds.map_batches(lambda b: b)
    ref = ray.put({"vocab": list(range(10))})
    pool = ActorPool([Tokenizer.remote() for _ in range(4)])
    queue = Queue()
    return ds, ref, pool, queue
