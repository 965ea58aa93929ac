"""Marin's Zephyr (``marin-zephyr``) running its pipelines on Fray, unchanged.

Zephyr is built on the predecessor's actor API: a coordinator actor (0.2.20: hosted in its
own coordinator job with ``client.host_actor``; 0.2.227: an actor group of one) creates a
worker actor group, the workers register back and pull shards, and the driver runs each
pipeline through a long-running call (``coordinator.run_pipeline.submit(...)``). Installed
beside fray-core (its pinned ``marin-fray`` left out), it runs on whichever backend
``FRAY_CLIENT_SPEC`` names. Both lines Marin has used run it: 0.2.20 (Python 3.11) and
0.2.227 (Python 3.12+).

Two pipelines: numbers through ``map`` (reading shared data put with ``ctx.put``),
``filter``, ``flat_map`` and ``group_by`` with a combiner; and records through ``map`` into
JSONL files. ``--more`` adds three: documents written as ``.jsonl.gz``, read back by Zephyr
(``from_files(...).load_jsonl()``) into ``deduplicate``, and read back into ``reshard`` to
more shards than the input has, written out again. The driver checks each against
what it computes itself and exits 1 on a mismatch. ``--kill-worker`` makes one worker's
process end mid-stage (on the first shard it takes): the pipeline must still produce the
right output. Each ``execute`` starts a worker pool of its own and tears it down, as Marin's
code does; ``--shared-pool`` (Zephyr 0.2.227) runs them all on one pool. The report lists what
was logged at WARNING or above during the run.

    python examples/zephyr_pipeline.py --workers 2 --more
"""

from __future__ import annotations

import argparse
import contextlib
import glob
import gzip
import json
import logging
import os
import signal
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from typing import Any

NUMBERS = 60
OFFSET = 100
RECORDS = 12
SHARDS = 3  # each list item is a shard: the inputs come as SHARDS chunks
DOCS = 30
DISTINCT_TEXTS = 7  # document i has the text "text-{i % DISTINCT_TEXTS}": deduplicate keeps 7
RESHARD_TO = 5  # more shards than the input's SHARDS


def chunks(items: list[Any]) -> list[list[Any]]:
    """``items`` cut into ``SHARDS`` lists (Zephyr makes one shard per list item)."""
    return [items[i::SHARDS] for i in range(SHARDS)]


def each(chunk: list[Any]) -> list[Any]:
    return chunk


def add_offset(x: int) -> int:
    """Adds the shared offset (put by the driver with ``ctx.put``)."""
    from zephyr.worker_context import zephyr_worker_ctx

    return x + zephyr_worker_ctx().get_shared("offset")


def keep(x: int) -> bool:
    return x % 3 != 0


def both_signs(x: int) -> list[int]:
    return [x, -x]


def sign(x: int) -> bool:
    return x > 0


def count_group(key: bool, items: Iterator[int]) -> dict[str, Any]:
    values = list(items)
    return {"positive": key, "count": len(values), "total": sum(values)}


def pass_through(key: bool, items: Iterator[int]) -> Iterator[int]:
    """A combiner: pre-aggregation on the map side (here it keeps every item)."""
    return iter(list(items))


def double(record: dict[str, int]) -> dict[str, int]:
    return {"id": record["id"], "value": record["value"] * 2}


def text_of(doc: dict[str, Any]) -> str:
    return doc["text"]


def tagged(doc: dict[str, Any]) -> dict[str, Any]:
    return {**doc, "tag": f"t{doc['id']}"}


class KillOnce:
    """``map`` that kills its worker actor's process the first time any worker runs it (a
    marker file records that it happened), as an out-of-memory kill would. Zephyr runs a
    shard in a subprocess of the worker on a cluster: its parent is the worker actor."""

    def __init__(self, marker: str, driver_pid: int) -> None:
        self.marker = marker
        self.driver_pid = driver_pid

    def __call__(self, x: int) -> int:
        if os.getpid() == self.driver_pid:
            raise RuntimeError("--kill-worker needs workers in processes of their own (Ray, Iris)")
        try:
            fd = os.open(self.marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            return x
        os.write(fd, str(os.getppid()).encode())
        os.close(fd)
        os.kill(os.getppid(), signal.SIGKILL)
        os._exit(137)


def expected_groups() -> list[dict[str, Any]]:
    kept = [x + OFFSET for x in range(NUMBERS) if (x + OFFSET) % 3 != 0]
    return [
        {"positive": False, "count": len(kept), "total": -sum(kept)},
        {"positive": True, "count": len(kept), "total": sum(kept)},
    ]


def zephyr_context_class() -> Any:
    """``ZephyrContext``: in ``zephyr.context`` from 0.2.2xx on, ``zephyr.execution`` before."""
    try:
        from zephyr.context import ZephyrContext
    except ImportError:
        from zephyr.execution import ZephyrContext
    return ZephyrContext


class WarningsSeen(logging.Handler):
    """Records what any logger says at WARNING or above (Zephyr's workers and coordinator on
    the local backend are threads of this process)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.seen: list[dict[str, str]] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.seen.append(
            {
                "level": record.levelname,
                "logger": record.name,
                "function": record.funcName,
                "message": record.getMessage()[:300],
            }
        )


def read_jsonl(paths: list[str]) -> list[dict[str, Any]]:
    """Every row of the JSONL files at ``paths`` (gzip ones by their name), read here."""
    rows: list[dict[str, Any]] = []
    for path in sorted(paths):
        opener = gzip.open if path.endswith(".gz") else open
        with opener(path, "rt") as f:
            rows.extend(json.loads(line) for line in f if line.strip())
    return rows


def is_gzip(path: str) -> bool:
    with open(path, "rb") as f:
        return f.read(2) == b"\x1f\x8b"


def run_more(ctx: Any, work: str) -> dict[str, bool]:
    """The ``--more`` pipelines: documents written as jsonl.gz; read back by Zephyr, through
    ``deduplicate``, and through ``reshard`` into more files than were read."""
    from zephyr.dataset import Dataset

    docs = [{"id": i, "text": f"text-{i % DISTINCT_TEXTS}"} for i in range(DOCS)]
    gz = os.path.join(work, "gz")
    written = ctx.execute(
        Dataset.from_list(chunks(docs))
        .flat_map(each)
        .write_jsonl(os.path.join(gz, "part-{shard:05d}.jsonl.gz"))
    ).results
    files = sorted(glob.glob(os.path.join(gz, "*.jsonl.gz")))
    reread = Dataset.from_files(os.path.join(gz, "*.jsonl.gz")).load_jsonl()

    unique = ctx.execute(reread.deduplicate(key=text_of)).results
    texts = sorted(d["text"] for d in unique)

    resharded = os.path.join(work, "resharded")
    ctx.execute(
        reread.reshard(RESHARD_TO)
        .map(tagged)
        .write_jsonl(os.path.join(resharded, "part-{shard:05d}.jsonl"))
    )
    reshard_files = glob.glob(os.path.join(resharded, "*.jsonl"))
    reshard_rows = sorted(read_jsonl(reshard_files), key=lambda d: d["id"])

    return {
        "jsonl_gz": len(written) == len(files) == SHARDS
        and all(is_gzip(f) for f in files)
        and sorted(read_jsonl(files), key=lambda d: d["id"]) == docs,
        "deduplicate": texts == sorted({d["text"] for d in docs})
        and all(d in docs for d in unique),
        "reshard": len(reshard_files) == RESHARD_TO and reshard_rows == [tagged(d) for d in docs],
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    from rigging.log_setup import configure_logging

    # Zephyr's stages set up logging through rigging, which clears the root logger's handlers
    # the first time: set it up first, then listen.
    configure_logging(level=logging.INFO)
    warnings = WarningsSeen()
    logging.getLogger().addHandler(warnings)
    try:
        summary = run_pipelines(args)
    finally:
        logging.getLogger().removeHandler(warnings)
    summary["warnings"] = warnings.seen
    return summary


def run_pipelines(args: argparse.Namespace) -> dict[str, Any]:
    import fray

    client = fray.current_client()
    work = args.work_dir or tempfile.mkdtemp(prefix="zephyr-on-fray-")
    ctx = zephyr_context_class()(
        client=client,
        max_workers=args.workers,
        chunk_storage_prefix=os.path.join(work, "chunks"),
        name="example",
        max_execution_retries=3,
    )
    ctx.put("offset", OFFSET)
    if args.shared_pool and not hasattr(ctx, "__enter__"):
        raise SystemExit("--shared-pool needs Zephyr 0.2.2xx (`with ZephyrContext(...)`)")
    started = time.monotonic()
    # A dedicated pool per `execute` (Marin's usual way), or one for them all.
    with ctx if args.shared_pool else contextlib.nullcontext():
        groups, rows, checks = run_basic(ctx, args, work)
        if args.more:
            checks.update(run_more(ctx, work))
    return {
        "backend": getattr(client, "scheme", type(client).__name__),
        "groups": groups,
        "rows": len(rows),
        "checks": checks,
        "ok": all(checks.values()),
        "seconds": round(time.monotonic() - started, 2),
    }


def run_basic(
    ctx: Any, args: argparse.Namespace, work: str
) -> tuple[list[dict[str, Any]], list[dict[str, int]], dict[str, bool]]:
    """The two pipelines every run has: numbers through a group_by, records into JSONL."""
    from zephyr.dataset import Dataset

    numbers = Dataset.from_list(chunks(list(range(NUMBERS)))).flat_map(each)
    if args.kill_worker:
        numbers = numbers.map(KillOnce(os.path.join(work, "killed.pid"), os.getpid()))
    grouped = (
        numbers.map(add_offset)
        .filter(keep)
        .flat_map(both_signs)
        .group_by(key=sign, reducer=count_group, combiner=pass_through)
    )
    groups = sorted(ctx.execute(grouped).results, key=lambda g: g["positive"])

    out = os.path.join(work, "out")
    records = Dataset.from_list(chunks([{"id": i, "value": i} for i in range(RECORDS)]))
    records = records.flat_map(each).map(double)
    written = ctx.execute(records.write_jsonl(os.path.join(out, "part-{shard:05d}.jsonl"))).results
    rows = []
    for path in sorted(glob.glob(os.path.join(out, "*.jsonl"))):
        with open(path) as f:
            rows.extend(json.loads(line) for line in f)
    rows.sort(key=lambda r: r["id"])

    checks = {
        "group_by": groups == expected_groups(),
        "written_files": len(written) == len(glob.glob(os.path.join(out, "*.jsonl"))) > 0,
        "written_rows": rows == [{"id": i, "value": 2 * i} for i in range(RECORDS)],
        "worker_killed": (not args.kill_worker) or os.path.exists(os.path.join(work, "killed.pid")),
    }
    return groups, rows, checks


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--workers", type=int, default=2, help="Zephyr worker actors")
    parser.add_argument("--kill-worker", action="store_true", help="kill one worker mid-stage")
    parser.add_argument(
        "--more", action="store_true", help="also jsonl.gz read back, deduplicate and reshard"
    )
    parser.add_argument(
        "--shared-pool",
        action="store_true",
        help="run every pipeline on one worker pool (`with ZephyrContext(...)`, Zephyr 0.2.2xx)",
    )
    parser.add_argument("--work-dir", help="where chunks and outputs go (default: a temp dir)")
    parser.add_argument("--report", help="also write the summary as JSON here")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    summary = run(args)
    line = json.dumps(summary, sort_keys=True)
    print(line)
    if args.report:
        with open(args.report, "w") as f:
            f.write(line)
    return 0 if summary["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
