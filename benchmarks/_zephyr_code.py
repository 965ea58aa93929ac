"""User code timed by ``bench_zephyr.py``: a Zephyr pipeline on the local backend, run
unchanged by a venv with Fray (``marin-zephyr`` installed beside fray-core) and by one with
the predecessor (``marin-zephyr`` with its own ``marin-fray``).

Started as ``python _zephyr_code.py``, it prints ``ready`` and serves commands on stdin, one
per line: ``pipeline`` runs the pipeline once and prints ``{"seconds": ...}``; ``quit`` (or
the end of stdin) ends it. The pipeline: numbers in four shards, ``map`` reading data put with
``ctx.put``, ``filter``, ``flat_map`` and ``group_by`` with a combiner; the result is checked
on every run.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from typing import Any

NUMBERS = 400
SHARDS = 4
OFFSET = 100


def each(chunk: list[int]) -> list[int]:
    return chunk


def add_offset(x: int) -> int:
    from zephyr import zephyr_worker_ctx

    return x + zephyr_worker_ctx().get_shared("offset")


def keep(x: int) -> bool:
    return x % 3 != 0


def both_signs(x: int) -> list[int]:
    return [x, -x]


def sign(x: int) -> bool:
    return x > 0


def count_group(key: bool, items: Iterator[int]) -> dict[str, Any]:
    values = list(items)
    return {"positive": key, "count": len(values)}


def pass_through(key: bool, items: Iterator[int]) -> Iterator[int]:
    return iter(list(items))


def serve() -> None:
    from zephyr import Dataset, ZephyrContext

    from fray.local_backend import LocalClient

    for noisy in ("zephyr", "iris", "rigging", "fray"):  # their INFO lines are not the point
        logging.getLogger(noisy).setLevel(logging.WARNING)

    work = tempfile.mkdtemp(prefix="fray-bench-zephyr-")
    os.environ["MARIN_PREFIX"] = work
    client = LocalClient()
    kept = sum(1 for x in range(NUMBERS) if (x + OFFSET) % 3 != 0)
    expected = [{"positive": False, "count": kept}, {"positive": True, "count": kept}]
    chunks = [list(range(NUMBERS))[i::SHARDS] for i in range(SHARDS)]
    try:
        print("ready", flush=True)
        for line in sys.stdin:
            if line.strip() == "quit":
                break
            ctx = ZephyrContext(
                client=client,
                max_workers=2,
                chunk_storage_prefix=os.path.join(work, "chunks"),
                name="bench",
            )
            ctx.put("offset", OFFSET)
            start = time.perf_counter()
            dataset = (
                Dataset.from_list(chunks)
                .flat_map(each)
                .map(add_offset)
                .filter(keep)
                .flat_map(both_signs)
                .group_by(key=sign, reducer=count_group, combiner=pass_through)
            )
            results = sorted(ctx.execute(dataset).results, key=lambda g: g["positive"])
            seconds = time.perf_counter() - start
            if results != expected:
                raise SystemExit(f"wrong result: {results} != {expected}")
            print(json.dumps({"seconds": seconds}), flush=True)
    finally:
        client.shutdown()


if __name__ == "__main__":
    serve()
