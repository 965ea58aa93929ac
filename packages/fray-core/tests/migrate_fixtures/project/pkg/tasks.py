# ruff: noqa
import ray as r


@r.remote(num_cpus=4, memory=8 * 1024**3, max_retries=3)
def preprocess(shard: str) -> str:
    return shard


def square(x: int) -> int:
    return x * x


def main() -> list[str]:
    refs = [preprocess.remote(f"shard-{i}") for i in range(8)]
    ready, _ = r.wait(refs, num_returns=2)
    r.cancel(refs[-1])
    remote_square = r.remote(square)
    print(r.get(remote_square.remote(3)))
    return r.get(refs)
