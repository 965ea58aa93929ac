"""User code timed by ``bench_zephyr.py`` and ``bench_zephyr_227.py``: a Zephyr pipeline on the
local backend, run unchanged by a venv with Fray (``marin-zephyr`` installed beside fray-core)
and by one with the predecessor (``marin-zephyr`` with its own ``marin-fray``), on either line
of Zephyr (0.2.20 or 0.2.227).

Started as ``python _zephyr_code.py``, it prints ``ready`` and serves commands on stdin, one
per line: ``pipeline`` runs the pipeline once and prints ``{"seconds": ...}``; ``quit`` (or
the end of stdin) ends it. The pipeline: numbers in four shards, ``map`` reading data put with
``ctx.put``, ``filter``, ``flat_map`` and ``group_by`` with a combiner; the result is checked
on every run. Its functions are the Zephyr example's (``examples/zephyr_pipeline.py``).
"""

from __future__ import annotations

import json
import logging
import os
import sys
import tempfile
import time
from pathlib import Path

# The pipeline's functions are the Zephyr example's own (examples/zephyr_pipeline.py).
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
from zephyr_pipeline import (
    OFFSET,
    add_offset,
    both_signs,
    count_group,
    each,
    keep,
    pass_through,
    sign,
    zephyr_context_class,
)

NUMBERS = 400
SHARDS = 4


def serve() -> None:
    from zephyr.dataset import Dataset

    from fray.local_backend import LocalClient

    zephyr_context = zephyr_context_class()

    for noisy in ("zephyr", "iris", "rigging", "fray"):  # their INFO lines are not the point
        logging.getLogger(noisy).setLevel(logging.WARNING)

    work = tempfile.mkdtemp(prefix="fray-bench-zephyr-")
    os.environ["MARIN_PREFIX"] = work
    client = LocalClient()
    kept = [x + OFFSET for x in range(NUMBERS) if keep(x + OFFSET)]
    expected = [
        {"positive": False, "count": len(kept), "total": -sum(kept)},
        {"positive": True, "count": len(kept), "total": sum(kept)},
    ]
    chunks = [list(range(NUMBERS))[i::SHARDS] for i in range(SHARDS)]
    try:
        print("ready", flush=True)
        for line in sys.stdin:
            if line.strip() == "quit":
                break
            ctx = zephyr_context(
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
